"""Turn a flat YAML mapping (plus ``key=value`` overrides) into a validated :class:`RunConfig`.

Every problem is collected and reported together in one :class:`ConfigError`, before anything heavy loads.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from engine.config import lf_keys
from engine.config.cross_checks import cross_checks
from engine.config.hf_values import hf_training_keys, hf_value_problem, hf_yaml_no, optim_problem
from engine.config.limits import (
    LIST_TEXT_KEYS,
    MAX_CONFIG_BYTES,
    MAX_WHOLE_NUMBER,
    TEXT_KINDS,
    expansion_problem,
    format_problems,
    key_problem,
    non_finite,
    non_finite_inside,
    non_finite_problem,
    shorten,
    shown,
    size_problems,
    text_problem,
)
from engine.config.method_checks import REFUSED_WHEN_SET, is_set, method_checks
from engine.config.name_checks import hidden_char_problems
from engine.config.schema import (
    SECTIONS,
    DataArgs,
    ExportArgs,
    FinetuningArgs,
    GenerationArgs,
    MethodArgs,
    ModelArgs,
    ParallelArgs,
    TrainArgs,
)
from engine.config.yaml_loader import ConfigLoader
from engine.credentials import MASK, SECRET_KEYS
from engine.errors import UserError, coded
from engine.json_text import loads

logger = logging.getLogger(__name__)

# LLaMA-Factory's switch with the opposite sense of ours: `disable_gradient_checkpointing: false` turns it on.
INVERTED_KEYS = {"disable_gradient_checkpointing": "gradient_checkpointing"}


# LLaMA-Factory's `flash_attn` values (and transformers' `attn_implementation` names) -> ours.
INLINE_JSON_KEYS = frozenset({"fsdp_config", "lr_scheduler_kwargs"})
"""Keys that take settings inline (a mapping in YAML, kept as JSON text); ``fsdp_config`` also a JSON file's path."""
MAPPING_KEYS = frozenset({"lr_scheduler_kwargs"})
"""Keys whose text must itself be a mapping (a JSON object or a YAML mapping, as the board's box takes it)."""
INLINE_HINTS = {"deepspeed": " Give the path of a DeepSpeed JSON file (e.g. examples/deepspeed/ds_z2.json) and put "
                             "these settings in it."}
FLASH_ATTN_ALIASES = {"disabled": "eager", "fa2": "flash_attention_2", "fa3": "flash_attention_3"}


class ConfigError(UserError, ValueError):
    """A user error in a config: carries every problem found, each naming the fix."""

    def __init__(self, problems: list[str], partial: RunConfig | None = None):
        self.problems = coded("config", list(problems))
        self.partial = partial
        """The config built from the keys that were valid, so later checks can still report their problems."""
        super().__init__(self.format())

    def format(self) -> str:
        head = f"{len(self.problems)} problems in the config:" if len(self.problems) > 1 else "Problem in the config:"
        return format_problems(head, self.problems)


@dataclass
class RunConfig:
    """The complete configuration of one job."""

    model: ModelArgs = field(default_factory=ModelArgs)
    data: DataArgs = field(default_factory=DataArgs)
    finetuning: FinetuningArgs = field(default_factory=FinetuningArgs)
    train: TrainArgs = field(default_factory=TrainArgs)
    generation: GenerationArgs = field(default_factory=GenerationArgs)
    export: ExportArgs = field(default_factory=ExportArgs)
    methods: MethodArgs = field(default_factory=MethodArgs)
    parallel: ParallelArgs = field(default_factory=ParallelArgs)
    extra: dict[str, Any] = field(default_factory=dict)
    """Other Hugging Face ``TrainingArguments`` keys, passed through unchanged."""
    notes: list[str] = field(default_factory=list)
    """Non-fatal remarks made while loading (ignored keys, defaults filled in)."""
    secrets: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """Secrets taken out of the mapping ({environment variable: value}); never serialized."""

    def to_dict(self) -> dict[str, Any]:
        """The flat mapping (LLaMA-Factory style); only values that differ from the defaults plus key ones."""
        out: dict[str, Any] = {}
        for name in SECTIONS:
            section = getattr(self, name)
            for f in dataclasses.fields(section):
                out[f.name] = getattr(section, f.name)
        out.update(self.extra)
        return out

    def to_yaml(self, minimal: bool = True) -> str:
        flat = self.to_dict()
        if minimal:
            defaults = RunConfig().to_dict()
            always = {"model_name_or_path", "stage", "finetuning_type", "output_dir", "template", "dataset"}
            flat = {k: v for k, v in flat.items() if k in always or k not in defaults or defaults[k] != v}
            # a None kept where the default is not None means something (`enable_thinking: null`: the mixed mode)
            flat = {k: v for k, v in flat.items() if v is not None or k in always or defaults.get(k) is not None}
        for key in INLINE_JSON_KEYS & flat.keys():  # settings given inline go back as the mapping they were
            text = flat[key]
            if isinstance(text, str) and text.lstrip().startswith("{"):
                try:
                    flat[key] = loads(text)
                except (json.JSONDecodeError, RecursionError):
                    pass  # left as the text it is (resolve_fsdp names the problem)
        return yaml.safe_dump(flat, sort_keys=False, allow_unicode=True)


def all_keys() -> dict[str, tuple[str, dataclasses.Field]]:
    """Every known flat key, mapped to (section name, dataclass field)."""
    keys: dict[str, tuple[str, dataclasses.Field]] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            keys[f.name] = (section, f)
    return keys


def _resolved_hints(cls: type) -> dict[str, Any]:
    import sys

    import engine.config.schema as schema_module

    return typing.get_type_hints(cls, {**vars(schema_module), **vars(sys.modules[cls.__module__])})


_HINTS: dict[str, dict[str, Any]] = {}


def field_type(section: str, name: str) -> Any:
    """The resolved type annotation of a field."""
    if section not in _HINTS:
        _HINTS[section] = _resolved_hints(SECTIONS[section])
    return _HINTS[section][name]


def literal_choices(tp: Any) -> list[Any] | None:
    """The allowed values of a ``Literal`` (possibly inside ``Optional``), else None."""
    if get_origin(tp) is Literal:
        return list(get_args(tp))
    if get_origin(tp) in (typing.Union, types.UnionType):
        for arg in get_args(tp):
            choices = literal_choices(arg)
            if choices is not None:
                return choices + ([None] if type(None) in get_args(tp) else [])
    return None


def _base_type(tp: Any) -> tuple[type | None, bool]:
    """(plain type, optional?) for ``int``, ``float | None`` and so on."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        optional = len(args) != len(get_args(tp))
        return (args[0] if len(args) == 1 and isinstance(args[0], type) else None), optional
    return (tp if isinstance(tp, type) else None), False


_KIND_WORDS = {str: "a value", int: "a whole number", float: "a number", bool: "true or false"}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def coerce_value(key: str, value: Any, tp: Any) -> Any:
    """Convert a YAML or command-line value to the field's type; raise ValueError with a clear message."""
    choices = literal_choices(tp)
    if choices is not None:
        if value is False and "no" in choices:  # YAML 1.1 reads a bare `no` as false
            return "no"
        if isinstance(value, str) and value.strip().lower() in ("null", "none", "") and None in choices:
            return None
        for choice in choices:
            if value == choice or (isinstance(value, str) and choice is not None and value == str(choice)):
                return choice
        listed = ", ".join(repr(c) if c is not None else "null" for c in choices)
        hint = difflib.get_close_matches(str(value)[:100], [str(c) for c in choices if c is not None], n=1)
        extra = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ValueError(f"`{key}: {shown(value)}` is not a valid choice; use one of {listed}.{extra}")
    base, optional = _base_type(tp)
    if isinstance(value, (list, tuple)) and not value and key in LIST_TEXT_KEYS:
        value = None  # `lora_target: []` names nothing, as an empty value does
    if value is None or (optional and isinstance(value, str) and value.strip().lower() in ("null", "none")):
        if optional:
            return None
        raise ValueError(f"`{key}` cannot be empty; give {_KIND_WORDS.get(base, 'a value')}.")
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, str)) and str(value).strip().lower() in _TRUE | _FALSE:
            return str(value).strip().lower() in _TRUE
        raise ValueError(f"`{key}: {shown(value)}` must be true or false.")
    if base is int:
        if isinstance(value, bool):
            raise ValueError(f"`{key}: {shown(value)}` must be a whole number.")
        if isinstance(value, int):
            return value
        try:
            as_float = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"`{key}: {shown(value)}` must be a whole number.") from None
        if non_finite(as_float):
            raise ValueError(non_finite_problem(key, value if isinstance(value, str) else as_float))
        if not as_float.is_integer():
            raise ValueError(f"`{key}: {shown(value)}` must be a whole number, not a fraction.")
        return int(as_float)
    if base is float:
        if isinstance(value, bool):
            raise ValueError(f"`{key}: {shown(value)}` must be a number.")
        try:
            number = float(value)
        except (TypeError, ValueError):
            example = " (e.g. 1.0e-4)" if key.endswith(("learning_rate", "_lr")) else " (e.g. 3 or 0.5)"
            raise ValueError(f"`{key}: {shown(value)}` must be a number{example}.") from None
        if non_finite(number):
            raise ValueError(non_finite_problem(key, value if isinstance(value, str) else number))
        return number
    if base is str and key in MAPPING_KEYS:
        return mapping_text(key, value)
    if base is str:
        if isinstance(value, (list, tuple)) and key in LIST_TEXT_KEYS:
            value = ",".join(str(v) for v in value)
        elif isinstance(value, (list, tuple)):
            raise ValueError(f"`{key}: {shown(value)}` must be {TEXT_KINDS.get(key, 'text')}, not a list; give one "
                             "value (quote it if it holds brackets).")
        if isinstance(value, dict) and key in INLINE_JSON_KEYS:  # transformers' own form: the settings inline
            if non_finite_inside(value) is not None:
                raise ValueError(non_finite_problem(key, non_finite_inside(value)))
            value = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, dict):
            raise ValueError(f"`{key}` must be text, not a mapping." + INLINE_HINTS.get(key, ""))
        if non_finite(value):  # `.nan` where a path or name is expected
            raise ValueError(non_finite_problem(key, value))
        text = str(value)
        problem = text_problem(key, text)
        if problem:
            raise ValueError(problem)
        return text
    return value


_YAML_EXPONENT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


def yaml_exponent(value: Any) -> Any:
    """``1e-6`` as the number it is: YAML 1.1 (``yaml.safe_load``) reads an exponent without a dot as text, which
    a schedule then fails on after the model has loaded (``min_lr: 1e-6``)."""
    return float(value) if isinstance(value, str) and _YAML_EXPONENT.fullmatch(value.strip()) else value


def mapping_text(key: str, given: Any) -> str | None:
    """A :data:`MAPPING_KEYS` value (a mapping as a YAML config gives it, or text: a JSON object or a YAML mapping
    such as ``{min_lr_rate: 0.1}``, as the board's box takes it) as the JSON text of its mapping; None for empty
    text."""
    value = given
    if isinstance(given, str):
        problem = text_problem(key, given)
        if problem:
            raise ValueError(problem)
        if not given.strip():
            return None
        try:
            value = loads(given)  # JSON first: YAML reads `1e-6` as text
        except (ValueError, RecursionError):
            try:
                value = yaml.load(given, Loader=ConfigLoader)  # noqa: S506 (a safe loader)
            except (yaml.YAMLError, RecursionError, ValueError):
                value = None
    if isinstance(value, dict):
        value = {name: yaml_exponent(item) for name, item in value.items()}
    if isinstance(value, dict) and non_finite_inside(value) is not None:
        raise ValueError(non_finite_problem(key, non_finite_inside(value)))
    try:  # names are text; values numbers, text, true/false, lists (a YAML date is none of them)
        if isinstance(value, dict) and all(isinstance(name, str) for name in value):
            return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        pass
    raise ValueError(f"`{key}: {shown(given)}` must be a mapping of names to values, e.g. "
                     '`{"min_lr_rate": 0.1}` (a JSON object) or `{min_lr_rate: 0.1}`.')


def build_config(mapping: dict[str, Any], *, allow_hf_passthrough: bool = True) -> RunConfig:
    """Validate a flat mapping and build the typed config. Raises ConfigError listing every problem."""
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        raise ConfigError([f"The config must be a mapping of `key: value` lines, not a {type(mapping).__name__}."])
    problems: list[str] = size_problems(mapping)
    expanded = expansion_problem(mapping)  # before any value is read or turned into text
    if problems or expanded:
        raise ConfigError(problems or [expanded])
    from engine.credentials import secret_problems, take_secrets

    wrong_secrets = secret_problems(mapping)
    if wrong_secrets:
        raise ConfigError(wrong_secrets)
    mapping, secrets, notes = take_secrets(mapping)  # never part of the config, so never written with it
    foreign = lf_keys.foreign_file_problem(mapping)
    if foreign:
        raise ConfigError([foreign])
    problems.extend(hidden_char_problems(mapping))
    known = all_keys()
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    extra: dict[str, Any] = {}
    unknown: list[str] = []
    lf_only: list[tuple[str, Any]] = []
    for key, value in mapping.items():
        if not isinstance(key, str):  # `null:`, `true:`, `3:` in YAML: named as YAML writes them, not as Python does
            problems.append(f"Unknown key `{_yaml_text(key)}` (YAML reads it as {_yaml_kind(key)}, not as a name). "
                            "Remove it, or quote it if it is meant as a name.")
            continue
        if key_problem(key):
            problems.append(key_problem(key))
            continue
        if key in ("attn_implementation", "flash_attn") and value is not None:
            key, value = "flash_attn", FLASH_ATTN_ALIASES.get(str(value).strip().lower(), value)
        if key == "max_length":
            problems.extend(lf_keys.max_length_problems(mapping, notes))
            continue
        if key == "val_size" and lf_keys.whole_fraction(value):
            problems.append(lf_keys.WHOLE_VAL_SIZE)
            continue
        if key == "mix_strategy" and value == "interleave_once":
            problems.append(lf_keys.INTERLEAVE_ONCE)
            continue
        if key in known:
            section, f = known[key]
            try:
                values[section][key] = coerce_value(key, value, field_type(section, key))
            except ValueError as err:
                problems.append(str(err))
                continue
            if key == "val_size" and type(value) is int:  # a row count stays one when the config is written again
                values[section][key] = value  # (LLaMA-Factory tells `1`, one row, from `1.0`, every row)
            meta = f.metadata
            v = values[section][key]
            if key == "optim" and (wrong := optim_problem(v)):  # transformers refuses it after the model loads
                problems.append(wrong)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if "min" in meta and v < meta["min"] and not meta.get("off_below_min"):
                    problems.append(f"`{key}: {v}` is below the minimum {meta['min']}; raise it.")
                if "max" in meta and v > meta["max"]:
                    problems.append(f"`{key}: {v}` is above the maximum {meta['max']}; lower it.")
                elif isinstance(v, int) and abs(v) > MAX_WHOLE_NUMBER and not ("min" in meta and v < meta["min"]):
                    problems.append(f"`{key}: {shown(value)}` is beyond the largest whole number a setting may hold "
                                    f"({MAX_WHOLE_NUMBER:,}); use a smaller value.")
        elif key in REFUSED_WHEN_SET:
            if not lf_keys.refused_key_is_off(key, value):
                problems.append(f"`{key}: {value}`: {REFUSED_WHEN_SET[key]}")
        elif lf_keys.handles(key):  # LLaMA-Factory's, with no field here: fine at its default, else refused
            lf_only.append((key, value))
            if lf_keys.note(key, value):
                notes.append(lf_keys.note(key, value))
        elif key in INVERTED_KEYS:
            target = INVERTED_KEYS[key]
            if target not in mapping:
                section, _ = known[target]
                values[section][target] = not is_set(value)
        else:
            unknown.append(key)
    problems.extend(lf_keys.problems(lf_only))
    if unknown:
        hf_keys = hf_training_keys() if allow_hf_passthrough else set()
        vocabulary = sorted(set(known) | hf_keys)
        for key in unknown:
            if key in hf_keys:
                value = hf_yaml_no(key, mapping[key])
                if non_finite_inside(value) is not None:
                    problems.append(non_finite_problem(key, non_finite_inside(value)))
                elif wrong := hf_value_problem(key, value):
                    problems.append(wrong)
                else:
                    extra[key] = value
                continue
            close = difflib.get_close_matches(key, vocabulary, n=1, cutoff=0.6)
            fix = f" Did you mean `{close[0]}`?" if close else " Remove it or check the spelling."
            problems.append(f"Unknown key `{shorten(key, 80)}`.{fix}")
    cfg = RunConfig(
        **{name: SECTIONS[name](**values[name]) for name in SECTIONS},
        extra=extra,
        notes=notes,
        secrets=secrets,
    )
    problems.extend(_apply_adapter_folder(cfg, mapping.get("adapter_folder")))
    if cfg.train.eval_strategy not in (None, "no") and not cfg.train.do_eval:
        # as Hugging Face's TrainingArguments (LLaMA-Factory's) do: evaluating during training also evaluates at the end
        cfg.train.do_eval = True
    if "do_train" not in mapping and not cfg.data.dataset and (cfg.train.do_predict or cfg.train.do_eval):
        # LLaMA-Factory's (Hugging Face's) do_train defaults to false: its predict/eval configs have no `dataset`.
        cfg.train.do_train = False
        notes.append("No `dataset` and no `do_train`: this config evaluates/predicts only (do_train: false).")
    problems.extend(cross_checks(cfg))
    problems.extend(method_checks(cfg))
    if problems:
        raise ConfigError(problems, partial=cfg)
    return cfg


def _apply_adapter_folder(cfg: RunConfig, folder: Any) -> list[str]:
    """LLaMA-Factory's ``adapter_folder``: the subfolder of each adapter in ``adapter_name_or_path`` that holds the
    adapter (PEFT's ``subfolder``). Adapters here are local folders, so the paths are joined once, and the run's
    saved config names the folders really loaded."""
    if lf_keys.is_default(folder, None):
        return []
    if not isinstance(folder, str):
        return [f"`adapter_folder: {shown(folder)}` must be a folder name inside each adapter folder."]
    adapters = [a.strip() for a in (cfg.model.adapter_name_or_path or "").split(",") if a.strip()]
    if not adapters:
        return ["`adapter_folder` names a subfolder of each adapter in `adapter_name_or_path`, which is empty; set "
                "`adapter_name_or_path` or remove `adapter_folder`."]
    joined = [str(Path(a) / folder.strip()) for a in adapters]
    cfg.model.adapter_name_or_path = ",".join(joined)
    cfg.notes.append(f"`adapter_folder: {folder.strip()}`: adapters are loaded from {', '.join(joined)}.")
    return []


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``key=value`` strings (values parsed as YAML scalars) into a mapping."""
    out: dict[str, Any] = {}
    bad = []
    for item in items:
        key, _, raw = item.partition("=")
        if "=" not in item or not key.strip():
            bad.append(f"Override `{item}` must look like `key=value`" + (" (no key before `=`)." if "=" in item else "."))
            continue
        try:
            value = load_yaml_text(raw, warn=False) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str):  # YAML 1.1 reads `1e-3` as text; numbers are meant
            try:
                number = float(value) if any(c in value for c in ".eE") else int(value)
                value = value if non_finite(number) else number  # `1e999` stays as typed, for a message to show
            except ValueError:
                pass
        out[key.strip().lstrip("-")] = value
    if bad:
        raise ConfigError(bad)
    return out


def load_yaml_text(text: str, source: str = "The config", warn: bool = True) -> Any:
    """``yaml.safe_load(text)``, with a warning for each key set twice (the last value is used; ``warn=False`` for a
    second reading of the same file). A text whose aliases expand past the size limit is refused here, before
    anything reads a value. Raises yaml.YAMLError, or ConfigError for that size."""
    loader = ConfigLoader(text)
    try:
        data = loader.get_single_data()
        expanded = expansion_problem(data, source)
    except RecursionError:
        raise ConfigError([f"{source} nests lists or mappings too deeply to be read (a config needs only a few "
                           "levels); fix the file."]) from None
    finally:
        loader.dispose()
    if expanded:
        raise ConfigError([expanded])
    for key, line in loader.repeated if warn else ():
        logger.warning("%s sets `%s` more than once (again at line %d); the last value is used, as LLaMA-Factory "
                       "does. Remove the other one.", source, key, line)
    return data


def yaml_error_message(source: str, text: str, err: yaml.YAMLError) -> str:
    """Where ``text`` stops being YAML, with the line the parser was reading when that began: PyYAML reports a key
    without its colon (``stage sft``) or an unclosed ``[`` at the line after it, which may be past the file's end."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    message = f"{source} is not valid YAML{where}: {getattr(err, 'problem', None) or err}"
    start = getattr(err, "context_mark", None)
    lines = text.splitlines()
    if start is not None and mark is not None and start.line != mark.line and 0 <= start.line < len(lines):
        quoted = lines[start.line].strip()
        key, colon, _ = quoted.partition(":")
        if colon and key.strip().strip("'\"").strip() in SECRET_KEYS:  # a token never goes into a message or a log
            quoted = f"{key}: {MASK}"
        quoted = quoted if len(quoted) <= 80 else quoted[:79] + "…"
        message += f" (in what begins at line {start.line + 1}: `{quoted}`)"
    if "'\\t'" in message:
        message += "; YAML indents with spaces, never tabs"
    return message + "."



def _yaml_text(value: Any) -> str:
    """How YAML writes a key that is no name (``null``, ``true``, ``3``), abridged: the message names what the user
    wrote, not Python's spelling of it (``None``, ``True``)."""
    return shorten(yaml.safe_dump(value, default_flow_style=True).split("\n", 1)[0], 80)


def _yaml_kind(value: Any) -> str:
    """What YAML made of a key that is no name, in words."""
    if value is None:
        return "no value"
    if isinstance(value, bool):
        return "a yes/no value"
    return "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}"


def _read_config_file(path: str | Path, too_large: str) -> str:
    """A config file's text, checked and read through one descriptor (engine.small_json.read_small): a file
    swapped between a size check on the path and its read was read whole (a sparse file of gigabytes) or waited on
    for good (a named pipe)."""
    import errno

    from engine.small_json import TooLarge, read_small

    try:
        return read_small(path, MAX_CONFIG_BYTES).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError([f"`{path}` is not UTF-8 text (byte 0x{err.object[err.start]:02x} at position "
                           f"{err.start:,}); re-save it as UTF-8."]) from None
    except TooLarge:
        raise ConfigError([too_large]) from None
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError([f"Config file `{path}` does not exist; check the path."]) from None
    except OSError as err:
        if Path(path).is_dir():
            raise ConfigError([f"Config file `{path}` is a folder; give the YAML file inside it."]) from None
        if err.errno == errno.EINVAL:  # open_regular: no regular file
            raise ConfigError([f"Config file `{path}` is a pipe, device or socket, not a file; give a YAML file."]) \
                from None
        raise ConfigError([f"Config file `{path}` cannot be read ({err.strerror or err}); check its "
                           "permissions."]) from None


def read_yaml(path: str | Path, warn: bool = True) -> dict[str, Any]:
    """Read a YAML (or JSON) config file into a mapping, with a clear error for a missing or broken file.

    ``-`` reads the config from standard input (``lf-engine train - <<'EOF' ... EOF``).
    """
    too_large = (f"Config file `{path}` is larger than {MAX_CONFIG_BYTES:,} bytes, the most a config may be (a "
                 "LLaMA-Factory config is a few dozen lines). Is this the right file?")
    if str(path) == "-":
        import sys

        text = sys.stdin.read(MAX_CONFIG_BYTES + 1)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
            raise ConfigError([too_large.replace(f"Config file `{path}`", "The config from standard input")])
    else:
        text = _read_config_file(path, too_large)
    try:
        data = load_yaml_text(text, f"`{path}`", warn)
    except yaml.YAMLError as err:
        source = "The config from standard input" if str(path) == "-" else f"`{path}`"
        raise ConfigError([yaml_error_message(source, text, err)]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"`{path}` must hold `key: value` lines at the top level."])
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML file, apply overrides, validate and return the typed config."""
    mapping: dict[str, Any] = read_yaml(path) if path else {}
    foreign = lf_keys.foreign_file_problem(mapping) if isinstance(mapping, dict) else None
    if foreign:  # judged on the file alone: `key=value` overrides would hide what it is
        raise ConfigError([foreign])
    if isinstance(overrides, dict):
        mapping.update(overrides)
    elif overrides:
        mapping.update(parse_overrides(overrides))
    return build_config(mapping)
