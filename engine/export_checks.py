"""What stops an export, found before anything loads (the export folder, the adapters, unsupported keys).

Kept apart from :mod:`engine.export` (which imports torch) so that the pre-flight checks can run in a process that
must stay light: the board checks every config without loading the ML stack.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from engine.atomic_write import is_temp_name
from engine.checkpoints import adapter_config_problem
from engine.config import RunConfig
from engine.run_lock import LOCK_NAME
from engine.runs import CONFIG_FILE, EVENTS_FILE, LOG_FILE, RUN_FILE

INFO_FILE = "export_info.json"
CONFIG_NAME = "export_config.yaml"
STAGING_PREFIX = ".lf-export-staging-"
"""An export writes its files into a new private folder of this prefix inside ``export_dir``, then renames each into
place: a link planted in the export folder is replaced, never written through. One left by a killed export is no
content of the folder and is removed by the next export."""
RUN_FOLDER_FILES = {CONFIG_FILE, RUN_FILE, EVENTS_FILE, LOG_FILE, LOCK_NAME}
"""Run-folder files left alone when the run folder and the export folder are the same: not counted as the folder's
content, not listed among the exported files, never removed as an earlier export's (the job's own lock among them,
which it holds while it exports)."""


def adapter_paths(cfg: RunConfig) -> list[str]:
    """The adapter folders of ``adapter_name_or_path`` (comma separated), in order."""
    return [a.strip() for a in (cfg.model.adapter_name_or_path or "").split(",") if a.strip()]


def _plain_name(name: object) -> bool:
    """A file name directly inside a folder: not empty, ``.``, ``..``, nor a path."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name)


def previous_export_files(export_dir: Path) -> list[Path] | None:
    """The files of an earlier export in ``export_dir`` (its info file lists them), or None if it holds none.

    The info file is read as a folder from elsewhere may hold it: one that is not the table an export writes, or
    that names anything but plain file names (``..``, ``.``, a path: the folder's parent or itself would be
    replaced) or names a folder there (an export writes files only), is no earlier export, so nothing it names is
    ever deleted."""
    info_path = export_dir / INFO_FILE
    if not info_path.is_file():
        return None
    from engine.models.registry import read_config_text

    try:
        info = json.loads(read_config_text(info_path))  # a regular file of at most a config's size
    except (OSError, ValueError, RecursionError):
        return None
    files = info.get("files", []) if isinstance(info, dict) else None
    if not isinstance(files, list) or not all(_plain_name(name) for name in files):
        return None
    if any((export_dir / name).is_dir() and not (export_dir / name).is_symlink() for name in files):
        return None  # an export writes files only: a folder it names is someone's data (a checkpoint, a model)
    names = set(files) | {INFO_FILE, CONFIG_NAME}
    return [export_dir / name for name in sorted(names) if not run_folder_entry(name)]


def run_folder_entry(name: str) -> bool:
    """Whether ``name`` in an export folder that is also a run folder belongs to the run, not to an export: its files
    (:data:`RUN_FOLDER_FILES`) and another writer's temp file in the making (run.json replaced by the board while the
    export runs). Never listed among the exported files, never counted as the folder's content, never removed as an
    earlier export's file (an export_info.json written before exports listed only their own files may name one)."""
    return name in RUN_FOLDER_FILES or is_temp_name(name)


def stale_staging(path: Path) -> bool:
    """Whether ``path`` is an export's staging folder (a real folder, not a link to one)."""
    return path.name.startswith(STAGING_PREFIX) and path.is_dir() and not path.is_symlink()


def check_export(cfg: RunConfig) -> list[str]:
    """Every problem that stops an export, each naming the fix (empty when all is well).

    Args:
        cfg: The run config.

    Returns:
        The problems found.
    """
    ex = cfg.export
    problems = []
    if not ex.export_dir:
        problems.append("`export_dir` is not set: name the folder the merged model should be written to.")
    if ex.export_quantization_bit:
        problems.append(
            f"`export_quantization_bit: {ex.export_quantization_bit}` is not supported: quantized export needs a "
            "quantization backend this engine does not ship; remove the key (export in float16/bfloat16 with "
            "`infer_dtype`) and quantize the exported folder with a dedicated tool."
        )
    if ex.export_legacy_format:
        problems.append(
            "`export_legacy_format: true` asks for .bin weights, but transformers 5 writes safetensors only; "
            "remove the key (every current loader reads safetensors)."
        )
    if ex.export_hub_model_id:
        problems.append("`export_hub_model_id` is not supported (no uploads from the engine); remove it and "
                        "upload the exported folder with `huggingface-cli upload`.")
    if not cfg.model.model_name_or_path:
        problems.append("`model_name_or_path` is empty: name the base model the adapters were trained on.")
    for adapter in adapter_paths(cfg):
        path = Path(adapter).expanduser()
        if not path.is_dir():
            problems.append(f"`adapter_name_or_path: {adapter}` does not exist; give the folder of a trained adapter "
                            "(the output_dir of a LoRA run).")
        elif not (path / "adapter_config.json").is_file():
            problems.append(f"`adapter_name_or_path: {adapter}` has no adapter_config.json; is it a LoRA adapter "
                            "folder (or a checkpoint folder inside one)?")
        elif unreadable := adapter_config_problem(path):
            problems.append(f"`adapter_name_or_path: {adapter}` cannot be loaded: {unreadable}; pick another "
                            "checkpoint or save the adapter again.")
    if ex.export_dir:
        problems += _check_export_dir(Path(ex.export_dir).expanduser(), cfg)
    return problems


def _writable_problem(export_dir: Path) -> str | None:
    """Whether the export can create its files: tried with a scratch file in ``export_dir`` or its nearest existing
    parent (a read-only mount or an immutable folder stops root too, which a permission check does not show)."""
    existing = next((p for p in (export_dir, *export_dir.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"`export_dir: {export_dir}` is inside the file {existing}; give a folder path."
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".lf-write-check-"):
            pass
    except OSError as err:
        return (f"`export_dir: {export_dir}` cannot be written ({existing}: {err.strerror or err}); choose a folder "
                "you can write to.")
    return None


def _check_export_dir(export_dir: Path, cfg: RunConfig) -> list[str]:
    if export_dir.exists() and not export_dir.is_dir():
        return [f"`export_dir: {export_dir}` is a file; give a folder."]
    unwritable = _writable_problem(export_dir)
    if unwritable:
        return [unwritable]
    if not export_dir.is_dir():
        return []
    base = Path(cfg.model.model_name_or_path).expanduser()
    sources = [base, *(Path(a).expanduser() for a in adapter_paths(cfg))]
    for source in sources:
        if source.exists() and source.resolve() == export_dir.resolve():
            return [f"`export_dir: {export_dir}` is also the model or adapter being exported; choose a new folder."]
    present = {p.name for p in export_dir.iterdir() if not stale_staging(p) and not run_folder_entry(p.name)}
    if not present:
        return []
    previous = previous_export_files(export_dir)
    if previous is None:
        shown = ", ".join(sorted(present)[:5]) + (" ..." if len(present) > 5 else "")
        return [f"`export_dir: {export_dir}` is not empty ({shown}) and holds no earlier export; choose an empty "
                "or new folder (an earlier export is replaced, other files are never deleted)."]
    extra = present - {p.name for p in previous}
    if extra:
        shown = ", ".join(sorted(extra)[:5])
        return [f"`export_dir: {export_dir}` holds an earlier export plus other files ({shown}); move those away "
                "or choose another folder."]
    return []
