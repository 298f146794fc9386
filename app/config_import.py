"""What a config loaded into the Train tab leaves behind: its keys that the form has no widget for.

The form carries the engine's own fields; a LLaMA-Factory or Hugging Face config may hold more (``run_name``,
``save_only_model``, ``ld_alpha``...). Those are not carried into the run Start launches, so the load message
names each one whose value would change something, with the way to keep them (run the file with ``lf-engine``).
Keys that change nothing are not named: LLaMA-Factory keys at its own default, transformers' keys at theirs, and
the keys the board sets for every run (its folder, ``do_train``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from typing import Any

from engine.config import lf_keys
from engine.config.method_checks import REFUSED_WHEN_SET
from engine.credentials import SECRET_KEYS

# set by the board for each run, by the form's own top bar and data pickers, or by the engine for every run
SET_BY_THE_BOARD = frozenset({
    "output_dir", "overwrite_output_dir", "do_train", "model_name_or_path", "finetuning_type", "adapter_name_or_path",
    "template", "stage", "dataset_dir", "dataset", "eval_dataset", "include_num_input_tokens_seen",
})
MAX_NAMED = 12


# The defaults of transformers' training arguments, printed by a subprocess: importing transformers (and with it
# torch) would add hundreds of MB to the board for good. Enum defaults become their values (a config holds strings).
_DEFAULTS_CODE = """
import dataclasses, enum, json
from transformers.training_args_seq2seq import Seq2SeqTrainingArguments
out = {}
for f in dataclasses.fields(Seq2SeqTrainingArguments):
    value = f.default
    if value is dataclasses.MISSING:
        continue
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        out[f.name] = value
print(json.dumps(out))
"""


@lru_cache(maxsize=1)
def _hf_defaults() -> dict[str, Any]:
    """transformers' ``Seq2SeqTrainingArguments`` defaults by name (once per board; {} if they cannot be read, and
    then every such key set in a config is named)."""
    from app.jobs import child_env

    try:
        proc = subprocess.run([sys.executable, "-c", _DEFAULTS_CODE], capture_output=True, text=True, timeout=180,
                              env=child_env(), stdin=subprocess.DEVNULL, check=False)
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}


def _changes_nothing(key: str, value: Any) -> bool:
    if key in REFUSED_WHEN_SET:
        return lf_keys.refused_key_is_off(key, value)
    if key in lf_keys.APPLIED:  # the engine applies it; the form has no field, so it is lost unless empty
        return lf_keys.is_default(value, None)
    if lf_keys.handles(key):
        return key in lf_keys.SAME_RESULT or lf_keys.problem(key, value) is None
    defaults = _hf_defaults()
    if key not in defaults or isinstance(defaults[key], (list, dict)):
        return False
    return lf_keys.is_default(value, defaults[key])


def left_out(mapping: dict[str, Any], form_keys: list[str] | set[str]) -> list[str]:
    """``key: value`` of each key of ``mapping`` the form does not carry and whose value would change something."""
    carried = set(form_keys) | SET_BY_THE_BOARD
    out = []
    for key, value in mapping.items():
        key = str(key)
        if key in carried or _changes_nothing(key, value):
            continue
        if key in SECRET_KEYS or key in lf_keys.HIDDEN_VALUES:  # a token: named, never shown
            out.append(f"`{key}`")
            continue
        text = str(value)
        out.append(f"`{key}: {text if len(text) <= 40 else text[:37] + '...'}`")
    return out


def named(items: list[str]) -> str:
    """The list for a message: the first :data:`MAX_NAMED`, then how many more."""
    shown = ", ".join(items[:MAX_NAMED])
    return shown if len(items) <= MAX_NAMED else f"{shown} (+{len(items) - MAX_NAMED})"


def misspelt(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, the config key it is close to) for each key of ``mapping`` that the engine does not know
    (``learning_rat`` → ``learning_rate``; a closer match than the engine's own check asks for, so that only a near
    miss is named): a typo read as "not in the form" alone would look deliberate."""
    import difflib

    from engine.config import all_keys

    vocabulary = list(all_keys())
    out = []
    for key in map(str, mapping):
        if key in vocabulary or key in SET_BY_THE_BOARD or lf_keys.handles(key) or key in _hf_defaults():
            continue
        close = difflib.get_close_matches(key, vocabulary, n=1, cutoff=0.8)
        if close:
            out.append((key, close[0]))
    return out
