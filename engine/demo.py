"""The built-in demo model ("LF-Demo", ``model_name_or_path: demo``), made offline and deterministically.

Nothing is downloaded. :func:`build_demo_model` trains a byte-level BPE tokenizer on the demo datasets'
text (``examples/data``), creates a small Llama-architecture model from a fixed seed and gives it a short
warm-up pre-training on the demo text (plain text plus ChatML-formatted conversations, so it writes
words and closes its turns) — never on the identity data, so the answer to "Who are you?" only changes
once the user fine-tunes it. It is saved as safetensors with its config, tokenizer and a ChatML chat
template. :func:`ensure_demo_model` keeps one copy under ``$LF_BOARD_HOME/demo-model`` (default
``~/.cache/lf-board/demo-model``), rebuilt when its version stamp changes; a file lock keeps concurrent
processes from building it twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.demo_names import demo_home
from engine.errors import UserError
from engine.small_json import read_small_json

logger = logging.getLogger(__name__)


class DemoDataMissing(UserError, FileNotFoundError):
    """The demo datasets the demo model is built from are not where they should be."""


DEMO_VERSION = "2"
"""Bump to rebuild every cached demo model (the stamp also covers the data and library versions)."""

STAMP_FILE = "lf_demo.json"
MAX_STAMP_BYTES = 64 << 10
"""The most of a demo model's stamp read (bytes; it is a few hundred): a larger one, or one that is no regular file
(a named pipe held the board's start for good), makes the model out of date, and it is built again."""
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# Files whose text trains the tokenizer; the identity data is tokenized but never pre-trained on.
DATA_FILES = (
    "demo_pt.jsonl", "demo_alpaca.json", "demo_identity.json", "demo_sharegpt.json", "demo_tools.json",
    "demo_dpo.json", "demo_kto.json",
)


@dataclass(frozen=True)
class DemoSpec:
    """Size and warm-up of the demo model.

    ``final_norm_scale`` initialises the last RMSNorm's weight above 1 so the output distribution can be
    sharp: LoRA cannot change norms or the output head, so on a briefly trained model with a flat output
    it learns very slowly (measured: identity loss 0.27 instead of 2.7 after 80 LoRA steps).
    """

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 4
    num_heads: int = 4
    max_positions: int = 1024
    tie_embeddings: bool = True
    final_norm_scale: float = 4.0
    seed: int = 0
    warmup_steps: int = 120
    warmup_batch: int = 4
    warmup_block: int = 128
    warmup_lr: float = 3e-3


SPEC = DemoSpec()


def demo_data_dir() -> Path:
    """The folder with the demo datasets (``$LF_DEMO_DATA_DIR`` or the repository's ``examples/data``)."""
    override = os.environ.get("LF_DEMO_DATA_DIR")
    return Path(override).expanduser() if override else Path(__file__).resolve().parents[1] / "examples" / "data"




# ---------------------------------------------------------------------------------------------------------
# Text


def _read_rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _chatml(messages: list[tuple[str, str]], system: str = "") -> str:
    parts = [f"{IM_START}system\n{system}{IM_END}\n"] if system else []
    parts += [f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in messages]
    return "".join(parts)


def _alpaca_messages(row: dict[str, Any]) -> list[tuple[str, str]]:
    prompt = row["instruction"] + (f"\n{row['input']}" if row.get("input") else "")
    return [("user", prompt), ("assistant", row["output"])]


def _sharegpt_messages(turns: list[dict[str, str]]) -> list[tuple[str, str]]:
    roles = {"human": "user", "gpt": "assistant", "function_call": "assistant", "observation": "tool"}
    return [(roles.get(t["from"], t["from"]), t["value"]) for t in turns]


def load_demo_texts(data_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """The demo data's text.

    Returns:
        (tokenizer corpus: every string of every demo file, warm-up documents: the pre-training text and
        ChatML-formatted alpaca and multi-turn conversations, without the identity data).

    Raises:
        DemoDataMissing: When the demo data folder or one of its files is missing.
    """
    folder = data_dir or demo_data_dir()
    missing = [name for name in DATA_FILES if not (folder / name).is_file()]
    if missing:
        raise DemoDataMissing(
            f"The demo datasets are missing from {folder} ({', '.join(missing)}); run from a full LF Board "
            "checkout or set LF_DEMO_DATA_DIR to its examples/data folder."
        )
    rows = {name: _read_rows(folder / name) for name in DATA_FILES}
    corpus: list[str] = []
    for name in DATA_FILES:
        for row in rows[name]:
            corpus.extend(_strings(row))
    documents = [row["text"] for row in rows["demo_pt.jsonl"]]
    documents += [_chatml(_alpaca_messages(row)) for row in rows["demo_alpaca.json"]]
    documents += [_chatml(_sharegpt_messages(row["conversations"]), row.get("system", ""))
                  for row in rows["demo_sharegpt.json"]]
    return corpus, documents


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, dict):
        return [s for key in sorted(value) for s in _strings(value[key])]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


# ---------------------------------------------------------------------------------------------------------
# Building


def train_tokenizer(corpus: list[str], spec: DemoSpec | None = None):
    """A byte-level BPE tokenizer (``transformers`` fast tokenizer) with the ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    spec = spec or SPEC
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        model_max_length=spec.max_positions,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _make_model(tokenizer, spec: DemoSpec):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_positions,
        rms_norm_eps=1e-5,
        tie_word_embeddings=spec.tie_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        lf_board_demo=True,
    )
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.fill_(spec.final_norm_scale)
    return model


def _warm_up(model, tokenizer, documents: list[str], spec: DemoSpec) -> float:
    """Short full-parameter pre-training on the demo documents; returns the last loss."""
    if spec.warmup_steps <= 0:
        return float("nan")
    eot = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    stream: list[int] = []
    for doc in documents:
        stream.extend(tokenizer(doc, add_special_tokens=False)["input_ids"] + [eot])
    block = min(spec.warmup_block, len(stream))
    blocks = torch.tensor(stream[: len(stream) // block * block], dtype=torch.long).view(-1, block)
    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 10) * max(0.05, 1 - step / spec.warmup_steps))
    model.train()
    loss_value = float("nan")
    order = torch.randperm(len(blocks), generator=generator)
    cursor = 0
    for _ in range(spec.warmup_steps):
        if cursor + spec.warmup_batch > len(order):
            order, cursor = torch.randperm(len(blocks), generator=generator), 0
        batch = blocks[order[cursor: cursor + spec.warmup_batch]]
        cursor += spec.warmup_batch
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.detach().item()
    model.eval()
    return loss_value


def _save_tokenizer(tokenizer, target: Path) -> None:
    """Save with the chat template inside tokenizer_config.json and a class name older transformers know."""
    try:
        tokenizer.save_pretrained(target, save_jinja_files=False)
    except TypeError:
        tokenizer.save_pretrained(target)
    config_file = target / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config.pop("backend", None)
    config["chat_template"] = CHATML_TEMPLATE
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (target / "chat_template.jinja").unlink(missing_ok=True)


def _stamp(data_dir: Path, spec: DemoSpec) -> dict[str, Any]:
    import transformers

    digest = hashlib.sha256()
    for name in DATA_FILES:
        digest.update(name.encode())
        digest.update((data_dir / name).read_bytes())
    return {
        "version": DEMO_VERSION,
        "spec": {k: getattr(spec, k) for k in spec.__dataclass_fields__},
        "data_sha256": digest.hexdigest(),
        # transformers writes the config and tokenizer files another version may not read; torch's version is left
        # out: its safetensors load anywhere, and with it two venvs sharing the cache (a CPU and a CUDA build, or
        # two torch releases) rebuilt the model at every switch (minutes on a busy machine) and an adapter trained
        # in one was then applied to the other's rebuild
        "transformers": transformers.__version__,
    }


def build_demo_model(target_dir: str | Path, data_dir: str | Path | None = None, spec: DemoSpec | None = None) -> Path:
    """Build the demo model into ``target_dir`` (created; existing files are overwritten).

    The result depends only on the demo data, ``spec`` and the library versions: two builds on one machine
    give byte-identical files. Takes a few seconds on a CPU.

    Returns:
        The folder, loadable with ``AutoModelForCausalLM`` and ``AutoTokenizer``.
    """
    from transformers import GenerationConfig

    start = time.perf_counter()
    logger.info("Building the demo model, offline (once: 15-30 s on 2 CPU cores, longer on a busy machine)...")
    spec = spec or SPEC
    target = Path(target_dir).expanduser()
    folder = Path(data_dir).expanduser() if data_dir else demo_data_dir()
    corpus, documents = load_demo_texts(folder)
    tokenizer = train_tokenizer(corpus, spec)
    with torch.random.fork_rng(devices=[]):
        model = _make_model(tokenizer, spec)
        loss = _warm_up(model, tokenizer, documents, spec)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)],
        pad_token_id=tokenizer.pad_token_id,
        max_new_tokens=64,
    )
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    _save_tokenizer(tokenizer, target)
    from engine.fileperms import match_umask

    match_umask(target)
    stamp = _stamp(folder, spec)
    (target / STAMP_FILE).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    logger.info("Built the demo model in %s (%.1f s, warm-up loss %.3f).", target, time.perf_counter() - start, loss)
    return target


def _stamp_matches(folder: Path, expected: dict[str, Any]) -> bool:
    try:
        current = read_small_json(folder / STAMP_FILE, MAX_STAMP_BYTES)  # a regular file of a few hundred bytes
    except (OSError, ValueError, RecursionError):  # missing, no regular file, outsized, not JSON: built again
        return False
    if isinstance(current, dict):
        current.pop("torch", None)  # written by earlier versions; no longer part of the stamp
    return current == expected and (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def ensure_demo_model(folder: str | Path | None = None) -> Path:
    """The cached demo model, built on first use or when its stamp is out of date.

    Args:
        folder: Where the model lives (default :func:`demo_home`); a ``.lock`` file beside it serialises builds.

    Returns:
        The model folder.

    Raises:
        DemoDataMissing: No cached copy and the demo datasets are missing.
    """
    target = Path(folder).expanduser() if folder else demo_home()
    data_dir = demo_data_dir()
    have_data = all((data_dir / name).is_file() for name in DATA_FILES)
    expected = _stamp(data_dir, SPEC) if have_data else None
    if expected is not None and _stamp_matches(target, expected):
        return target
    if expected is None and (target / STAMP_FILE).is_file():
        return target  # installed without the demo data: keep the copy there is
    return build_once(target, lambda: expected is not None and _stamp_matches(target, expected),
                      lambda staging: build_demo_model(staging, data_dir, SPEC))


def build_once(target: Path, is_current: Callable[[], bool], build: Callable[[Path], Any]) -> Path:
    """Build a cached folder under a ``.lock`` file beside it: ``build(staging)`` writes a fresh copy that then
    replaces ``target`` in one rename, unless ``is_current()`` says another process built it while this one waited."""
    from filelock import FileLock

    from engine.atomic_write import sync_folder, sync_tree

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=900):
        if is_current():
            return target
        staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            build(staging)
            sync_tree(staging)  # the model's files on the disk before the rename makes them the cached copy
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
            sync_folder(target.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
