"""Find a run's checkpoints and tell complete ones from torn ones.

A process killed (or a disk that fills up) while the Trainer saves leaves a ``checkpoint-N`` folder with only part
of its files: often just README.md, or weights cut off in the middle. The Trainer writes ``trainer_state.json``
last, so a checkpoint counts as complete when that file parses, its weights are there and whole (a safetensors
file as long as its header says, a torch zip with its closing directory), and so are the optimizer and scheduler
states it has. Reading headers only: no tensor is loaded.
"""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path
from typing import Any

from engine.safetensors_header import MAX_HEADER, HeaderError, read_header

logger = logging.getLogger(__name__)

PREFIX = "checkpoint-"
STATE_FILE = "trainer_state.json"
WEIGHT_FILES = (
    "adapter_model.safetensors", "adapter_model.bin", "model.safetensors", "model.safetensors.index.json",
    "pytorch_model.bin", "pytorch_model.bin.index.json",
)
TORCH_STATE_FILES = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth")


def step_of(path: Path) -> int | None:
    """N of a ``checkpoint-N`` folder (None for anything else)."""
    tail = path.name[len(PREFIX):] if path.name.startswith(PREFIX) else ""
    return int(tail) if tail.isdigit() else None


def list_checkpoints(folder: str | Path) -> list[Path]:
    """The checkpoint-N folders directly inside ``folder``, oldest first (complete or not)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and step_of(p) is not None]
    return sorted(found, key=step_of)


MAX_HEADER_BYTES = MAX_HEADER
"""The largest safetensors header read (the safetensors library refuses larger ones as well)."""


def _safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file is cut off or is no safetensors file (None when its header's tensors are all there).
    A header of another shape (a list, an entry or offsets that are not a table of numbers: a file from
    elsewhere or damaged) is named as such, never raised."""
    try:
        header = read_header(path, limit=MAX_HEADER_BYTES)
    except HeaderError as err:
        said = {"short": "is empty or cut off", "cut": "is cut off",
                "large": f"is not a safetensors file ({err.reason})",
                "table": "is not a safetensors file (its header is not a table of tensors)"}
        return f"{path.name} {said.get(err.kind, 'is cut off or unreadable')}"
    if header.file_size < header.data_end:
        return f"{path.name} is cut off ({header.file_size:,} of {header.data_end:,} bytes)"
    return None


def _torch_file_problem(path: Path) -> str | None:
    try:
        if path.stat().st_size == 0 or not zipfile.is_zipfile(path):
            return f"{path.name} is cut off"
    except OSError:
        return f"{path.name} is unreadable"
    return None


def _file_problem(path: Path) -> str | None:
    if path.suffix == ".safetensors":
        return _safetensors_problem(path)
    if path.suffix in (".bin", ".pt", ".pth"):
        return _torch_file_problem(path)
    return None


def read_adapter_config(folder: str | Path) -> dict:
    """``folder/adapter_config.json`` as a dict ({} when it is absent, unreadable or not a JSON object). Light: the
    pre-flight checks read it without importing torch or PEFT; :func:`adapter_config_problem` says why it fails."""
    from engine.models.registry import read_config_text

    try:
        config = json.loads(read_config_text(Path(folder).expanduser() / "adapter_config.json"))
    except (OSError, ValueError, RecursionError):  # ValueError: too large, not UTF-8, not JSON
        return {}
    return config if isinstance(config, dict) else {}


def adapter_config_problem(folder: Path) -> str | None:
    """Why ``folder/adapter_config.json`` cannot be read as PEFT reads it (None when it can, or is absent)."""
    path = Path(folder) / "adapter_config.json"
    if not path.is_file():
        return None
    from engine.models.registry import ConfigTooLarge, read_config_text

    try:
        data = json.loads(read_config_text(path))
    except ConfigTooLarge as err:
        return f"its adapter_config.json is too large to be one ({err})"
    except UnicodeDecodeError:
        return "its adapter_config.json is not UTF-8 text"
    except ValueError as err:
        return f"its adapter_config.json is not valid JSON ({err})"
    except RecursionError:
        return "its adapter_config.json nests lists or objects too deeply to be read"
    except OSError as err:
        return f"its adapter_config.json cannot be read ({err.strerror or err})"
    if not isinstance(data, dict):
        return "its adapter_config.json is not a JSON object"
    return None


MAX_INDEX_BYTES = 64 << 20
"""The largest weights index read (the largest models' hold a few MB)."""


def weights_problem(folder: Path) -> str | None:
    """Why the model or adapter weights in ``folder`` are missing or cut off (None when they are whole)."""
    present = [folder / name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        if any(p.is_dir() for p in folder.glob("global_step*")):  # DeepSpeed keeps the weights there
            return None
        fsdp = sorted(folder.glob(f"{FSDP_STATE}*"))
        if fsdp:
            return _fsdp_state_problem(fsdp)
        return "no model or adapter weights"
    from engine.models.registry import ConfigTooLarge, read_config_text

    for path in present:
        if path.name.endswith(".index.json"):
            try:
                shards = set(json.loads(read_config_text(path, MAX_INDEX_BYTES))["weight_map"].values())
            except ConfigTooLarge:  # a sparse file of gigabytes was read whole, in the board's process too
                return f"{path.name} is {path.stat().st_size:,} bytes, more than any weights index"
            except (OSError, ValueError, KeyError, AttributeError, RecursionError):
                return f"{path.name} is cut off"
            except TypeError:  # a shard that is a list or a table
                shards = {None}
            if not all(isinstance(shard, str) and shard and Path(shard).name == shard for shard in shards):
                return f"{path.name} names shards that are not file names in its folder"
            for shard in sorted(shards):
                if not (folder / shard).is_file():
                    return f"the weight shard {shard} is missing"
                problem = _file_problem(folder / shard)
                if problem:
                    return problem
        else:
            problem = _file_problem(path)
            if problem:
                return problem
    return None


FSDP_STATE = "pytorch_model_fsdp"
"""How an FSDP run's model state is named in a checkpoint (accelerate): with a sharded or local state dict the
checkpoint holds only that, a ``pytorch_model_fsdp_0`` folder (torch.distributed.checkpoint) or one
``pytorch_model_fsdp_rank<N>.bin`` per process, and no model or adapter weights."""


def _fsdp_state_problem(paths: list[Path]) -> str | None:
    """Why an FSDP run's saved model state is cut off (None when it is whole): a folder is written by
    torch.distributed.checkpoint, whose ``.metadata`` file comes last, once every process has written its part."""
    for path in paths:
        if path.is_dir():
            if not (path / ".metadata").is_file():
                return f"{path.name} has no .metadata: the FSDP save was cut off"
        else:
            problem = _file_problem(path)
            if problem:
                return problem
    return None


MAX_STATE_BYTES = 512 << 20
"""The largest trainer_state.json read. A real one grows by about 290 bytes per logged step (a LoRA run's, measured:
23,530 bytes for 81 logs), so this is some 1.8 million logs; a larger one (a sparse file of gigabytes, a file from
elsewhere) was read whole, in the board's own process too when it resumes a run."""


class StateUnread(Exception):
    """A trainer_state.json that is there but is not read: not a regular file, unreadable, or past
    :data:`MAX_STATE_BYTES`. No save is cut off that way, so such a checkpoint is named, never removed."""


def read_state(folder: str | Path) -> Any:
    """The parsed ``trainer_state.json`` of a checkpoint folder, read only as a regular file of at most
    :data:`MAX_STATE_BYTES`.

    Raises:
        FileNotFoundError: there is none (a save cut off before its end).
        StateUnread: it is there but not read (the message says why and what to do).
        ValueError, RecursionError: it is cut off (not UTF-8 or not JSON) or nested past the parser's depth.
    """
    import errno
    import os

    from engine.runs import open_regular

    path = Path(folder) / STATE_FILE
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size  # judged before reading: a sparse file reads as its size of zeros
            if size > MAX_STATE_BYTES:
                raise StateUnread(f"{STATE_FILE} is {size:,} bytes, more than any run writes (at most "
                                  f"{MAX_STATE_BYTES:,} are read); copy the checkpoint again from where it was saved")
            raw = fh.read(size)  # (a read of the bound would take the bound's memory at once)
    except OSError as err:
        if err.errno == errno.ENOENT and not os.path.lexists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        raise StateUnread(f"{STATE_FILE} cannot be read ({err.strerror or err}): it must be a regular file the "
                          "Trainer wrote; copy the checkpoint again from where it was saved") from None
    return json.loads(raw.decode("utf-8"))


def checkpoint_problem(folder: str | Path, check_state: bool = True) -> str | None:
    """Why ``folder`` is not a complete checkpoint (None when it is one); ``check_state=False``: only whether a save
    was cut off, not whether its trainer_state.json's values can be the Trainer's (nor whether it can be read at
    all: one that is not a regular file or is outsized is no cut-off save)."""
    folder = Path(folder)
    try:
        saved = read_state(folder)
    except FileNotFoundError:
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        held = f"it holds only {', '.join(names)}" if 0 < len(names) <= 3 else ("it is empty" if not names else
                                                                                 f"{len(names)} files")
        return f"no {STATE_FILE} ({held}): the save was cut off"
    except StateUnread as err:
        if check_state:
            return str(err)
        saved = {}
    except (ValueError, RecursionError):
        return f"{STATE_FILE} is cut off"
    if not isinstance(saved, dict):
        return f"{STATE_FILE} is not a JSON object"
    problem = _state_problem(saved, step_of(folder)) if check_state else None
    if problem:
        return problem
    problem = weights_problem(folder)
    if problem:
        return problem
    for name in TORCH_STATE_FILES:
        if (folder / name).is_file():
            problem = _torch_file_problem(folder / name)
            if problem:
                return problem
    return None


def _state_problem(saved: dict, step: int | None) -> str | None:
    """Why a trainer_state.json cannot be the one the Trainer saved with ``checkpoint-step`` (None when it can): its
    step is not a whole number, or not the folder's (the Trainer names the folder after it: a state that claims
    another step would resume there, and one past the run's end trained nothing and ended 'completed'), or its
    logs are not a list (TypeError as the Trainer reads them)."""
    global_step = saved.get("global_step")
    if global_step is not None and (isinstance(global_step, bool) or not isinstance(global_step, int)
                                    or global_step < 0):
        return f"{STATE_FILE}'s global_step is {str(global_step)[:40]!r}, not a step number"
    if global_step is not None and step is not None and global_step != step:
        if global_step >= 10**12:
            return f"{STATE_FILE} says step a number past any run's steps, not {step} as its folder's name"
        return (f"{STATE_FILE} says step {global_step:,}, not {step} as its folder's name (a folder renamed? name it "
                f"checkpoint-{global_step} if that is the step it holds)")
    for key in ("log_history", "max_steps", "epoch"):
        value = saved.get(key)
        if value is None:
            continue
        if key == "log_history" and not (isinstance(value, list) and all(isinstance(e, dict) for e in value)):
            return f"{STATE_FILE}'s log_history is not a list of logs"
        if key != "log_history" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"{STATE_FILE}'s {key} is not a number"
    return None


def torn_checkpoints(folder: str | Path, check_state: bool = True) -> list[tuple[Path, str]]:
    """(checkpoint, what is wrong) for every incomplete checkpoint-N in ``folder``, oldest first."""
    out = []
    for path in list_checkpoints(folder):
        problem = checkpoint_problem(path, check_state)
        if problem:
            out.append((path, problem))
    return out


def latest_complete(folder: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest complete checkpoint in ``folder`` and the torn ones newer than it (skipped, newest first)."""
    skipped = []
    for path in reversed(list_checkpoints(folder)):
        problem = checkpoint_problem(path)
        if problem is None:
            return path, skipped
        skipped.append((path, problem))
    return None, skipped


def describe_torn(torn: list[tuple[Path, str]]) -> str:
    return "; ".join(f"{path.name}: {problem}" for path, problem in torn)


def remove_torn(folder: str | Path) -> list[str]:
    """Delete the incomplete checkpoints in ``folder`` (they cannot be resumed from); returns their names."""
    removed = []
    for path, problem in torn_checkpoints(folder, check_state=False):  # cut-off saves only: never one renamed
        try:
            shutil.rmtree(path)
        except OSError as err:
            logger.warning("Could not remove the incomplete %s: %s", path, err)
            continue
        logger.warning("Removed the incomplete %s (%s).", path.name, problem)
        removed.append(path.name)
    return removed


def trained_template(path: str) -> str | None:
    """The ``template`` an adapter (or model) folder was trained with, from the lf_config.yaml saved beside it."""
    saved = read_saved_config(Path(path).expanduser())
    template = saved.get("template")
    return template if isinstance(template, str) else None  # a name, never a structure


SAVED_CONFIG = "lf_config.yaml"
_NAMED_BROKEN: set[str] = set()


def read_saved_config(folder: Path) -> dict[str, Any]:
    """The flat config a run saved beside its checkpoint, adapter or model (lf_config.yaml), read as every config is
    (:func:`engine.config.loader.load_yaml_text`: nesting too deep refused before the parser's slow look-ahead, a
    text whose aliases expand past a config's size refused before any value is read, numbers too large named).

    {} when there is none; also {} for a broken one, which is named in a warning (once a file) with what is wrong and
    the fix: the callers use the saved settings to explain or to fill a default, never to decide a run alone.
    """
    from engine.config.limits import MAX_CONFIG_BYTES
    from engine.models.registry import read_config_text

    file = Path(folder) / SAVED_CONFIG
    if not file.is_file():
        return {}
    problem = None
    try:  # a regular file of at most a config's size (an outsized one was read whole, in the board's check too)
        text = read_config_text(file, 2 * MAX_CONFIG_BYTES)
    except UnicodeDecodeError as err:
        text, problem = None, (f"is not UTF-8 text (byte 0x{err.object[err.start]:02x} at position {err.start:,})")
    except (OSError, ValueError) as err:  # ValueError: too large (its message names the file and the fix)
        text, problem = None, f"cannot be read ({getattr(err, 'strerror', None) or err})"
    data: Any = None
    if text is not None:
        import yaml

        from engine.config.loader import ConfigError, load_yaml_text, yaml_error_message

        try:
            data = load_yaml_text(text, f"`{file}`", warn=False)
        except yaml.YAMLError as err:
            problem = yaml_error_message(f"`{file}`", text, err)
        except ConfigError as err:  # nested too deeply, or an alias bomb
            problem = err.problems[0]
        except ValueError as err:  # a whole number past Python's digits limit (in a mapping key)
            problem = f"`{file}` cannot be read as a config ({err})"
        if problem is None and data is not None and not isinstance(data, dict):
            problem = f"`{file}` does not hold `key: value` lines"
    if problem is None:
        return data or {}
    if not problem.startswith("`"):
        problem = f"`{file}` {problem}"
    if str(file) not in _NAMED_BROKEN:
        _NAMED_BROKEN.add(str(file))
        logger.warning("%s The settings it records are not used (the saved template, base model, or the settings a "
                       "resumed checkpoint is compared with); fix the file or delete it.", problem.rstrip(".") + ".")
    return {}
