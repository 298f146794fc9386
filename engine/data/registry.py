"""The dataset registry: ``dataset_info.json`` in ``dataset_dir`` (LLaMA-Factory's format).

Each entry names a local file (``file_name``, relative to ``dataset_dir``) or a hub dataset, and how to read it:
``formatting`` (``alpaca``, the default, or ``sharegpt``), ``ranking`` (preference pairs), ``columns`` (which column holds the
prompt, query, response, history, messages, system, tools, images, videos, audios, chosen, rejected, kto_tag) and
``tags`` (sharegpt role names). Hub entries (``hf_hub_url``, ``ms_hub_url``, ``om_hub_url``) load through
:mod:`engine.data.hub` (from the local cache when offline); as in LLaMA-Factory, an entry with a hub URL is read
from the hub even when it also names a ``file_name``. A dataset name that is not registered but is an existing
file or folder is accepted as a plain file whose format is detected from its rows.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.entry_keys import COLUMN_KEYS, TAG_KEYS, known_inner, warn_misspelt_keys
from engine.data.errors import DatasetError
from engine.data.hub import HUB_URL_KEYS
from engine.data.info_repeats import parse_noting_repeats, repeats_message, warn_repeats
from engine.data.slices import check_split

logger = logging.getLogger(__name__)

INFO_FILE = "dataset_info.json"
HUB_KEYS = ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name")
LF_DEFAULT_COLUMNS = {"prompt": "instruction", "query": "input", "response": "output", "messages": "conversations"}
"""The columns LLaMA-Factory reads from an entry without ``columns`` (its DatasetAttr's defaults; the rest: none)."""
FORMATTINGS = ("alpaca", "sharegpt", "openai", "text", "auto")


@dataclass
class DatasetSpec:
    """How to read one dataset.

    Attributes:
        name: The name used in the config (registry key or path).
        path: Absolute path of the file or folder.
        formatting: alpaca, sharegpt, openai, text, or auto (detected from the rows).
        ranking: Preference data (chosen/rejected).
        columns: Canonical column name -> the file's column name (only what the entry sets).
        tags: Sharegpt tag settings (only what the entry sets).
        dataset_dir: The folder relative paths (file_name, and media files without ``media_dir``) are resolved
            against.
        media_dir: The folder relative media paths are resolved against (LLaMA-Factory's ``media_dir``; None:
            ``dataset_dir``).
        num_samples: Rows to take from this dataset (dataset_info's ``num_samples``), or None.
        lf_columns: For an alpaca, sharegpt or openai entry of dataset_info.json, every column key and the column
            LLaMA-Factory reads for it, None where it reads none: an entry without ``columns`` reads only
            instruction/input/output (or conversations), and one with ``columns`` reads exactly the keys it names
            (LLaMA-Factory's ``DatasetAttr.join``); so a ``system`` or ``history`` column nobody mapped is not read.
            None for a dataset named by its path, whose layout is detected (our own defaults).
        lf_tags: Likewise the sharegpt tags of an entry that sets ``tags`` (the ones it leaves out are None, so a
            turn with such a role makes the row unusable, as there), or None (the defaults).
        split: A local file's ``split`` (dataset_info's, e.g. ``train[:10%]``: :mod:`engine.data.slices`), or None
            for every row; hub entries keep theirs in ``hub``.
    """

    name: str
    path: Path
    formatting: str = "alpaca"
    ranking: bool = False
    columns: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    dataset_dir: Path = field(default_factory=Path.cwd)
    num_samples: int | None = None
    hub: dict[str, Any] | None = None
    """For hub entries: ``kind`` (hf_hub, ms_hub, om_hub), ``repo``, ``subset``, ``split``, ``folder``, ``revision``."""
    media_dir: Path | None = None
    lf_columns: dict[str, str | None] | None = None
    lf_tags: dict[str, str | None] | None = None
    split: str | None = None
    ranking_number: int | None = None
    """``ranking`` as written where it was the number 0 or 1 (``ranking`` holds its truth value), else None."""


def entry_columns(entry: dict[str, Any]) -> dict[str, str | None]:
    """Every column key and the column LLaMA-Factory reads for it from this entry (see ``DatasetSpec.lf_columns``)."""
    if isinstance(entry.get("columns"), dict):
        return {key: entry["columns"].get(key) for key in COLUMN_KEYS}
    return {key: LF_DEFAULT_COLUMNS.get(key) for key in COLUMN_KEYS}


def media_column(spec: DatasetSpec, kind: str) -> str | None:
    """The column holding a row's ``kind`` (images, videos, audios), or None where none is read."""
    return spec.lf_columns[kind] if spec.lf_columns is not None else spec.columns.get(kind, kind)


def info_path(dataset_dir: str | os.PathLike) -> Path:
    """Where dataset_info.json lives for ``dataset_dir`` (relative folders are relative to the current one)."""
    return Path(dataset_dir).expanduser().absolute() / INFO_FILE


def load_dataset_info(dataset_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The parsed dataset_info.json of ``dataset_dir``.

    Raises:
        DatasetError: when the file is missing or not a JSON object of entries (with line and column).
    """
    return _read_info(info_path(dataset_dir))[0]


def _read_info(path: Path) -> tuple[dict[str, Any], list[str]]:
    """:func:`load_dataset_info` of the file at ``path``, with its repeated keys labelled."""
    if not path.is_file():
        raise DatasetError(f"No {INFO_FILE} in {path.parent}. Set `dataset_dir` to the folder that holds it, or give "
                           "the dataset as a path to a data file.")
    try:
        info, repeated = parse_noting_repeats(path)
    except OSError as err:  # (past is_file(): a link changed meanwhile) InfoTooLarge is a DatasetError itself
        raise DatasetError(f"{path} cannot be read ({err.strerror or err}); it must be a regular file.") from None
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at position {err.start:,}); "
                           "re-save it as UTF-8.") from None
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}.") from None
    except RecursionError:
        raise DatasetError(f"{path} nests lists or objects too deeply to be read; a {INFO_FILE} entry needs only a "
                           "few levels. Fix the file.") from None
    if not isinstance(info, dict):
        raise DatasetError(f"{path} must be a JSON object mapping dataset names to entries.")
    if repeated:
        warn_repeats(path, repeated)
    return info, repeated  # entries are checked where they are used (used_entry), as LLaMA-Factory reads only those


def broken_entry(name: str, entry: Any) -> str | None:
    """What is wrong with one entry as written (None when nothing is): not an object, or :func:`entry_problem`."""
    if not isinstance(entry, dict):
        example = json.dumps({"file_name": entry if isinstance(entry, str) else "data.json"})
        return f"dataset {name!r} is a {type(entry).__name__}, not an object; write it as \"{name}\": {example}."
    return entry_problem(name, entry)


_WARNED: set[tuple[str, str]] = set()


def used_entry(path: Path | str, info: dict[str, Any], name: str) -> dict[str, Any]:
    """The entry ``name`` of the dataset_info.json at ``path``, checked; the other entries' problems are only warned
    about (once each): LLaMA-Factory reads only the entries a config names (data/parser.py:122-152).

    Raises:
        DatasetError: naming the file, the entry, the key and the fix when the entry itself is malformed.
    """
    problem = broken_entry(name, info[name])
    if problem:
        raise DatasetError(f"{path}: {problem}")
    for other, entry in info.items():
        problem = broken_entry(other, entry) if other != name and (str(path), other) not in _WARNED else None
        if problem:
            _WARNED.add((str(path), other))
            logger.warning("%s: %s (not used here, so only a warning; LLaMA-Factory reads only the entries a config "
                           "names)", path, problem)
    return info[name]


def repeated_keys_note(dataset_dir: str | os.PathLike) -> str | None:
    """:func:`repeats_message` for the dataset_info.json of ``dataset_dir`` (None when no key repeats)."""
    path = info_path(dataset_dir)
    try:
        repeated = _listed(path)[1]
    except (OSError, DatasetError):  # no file, or not one to read: the listing says so
        repeated = []
    return repeats_message(path, repeated) if repeated else None


TEXT_FIELDS = ("file_name", "formatting", "hf_hub_url", "ms_hub_url", "om_hub_url", "subset", "split", "folder")
NOT_NULL = ("formatting", "split", "columns", "tags")


def entry_problem(name: str, entry: dict[str, Any]) -> str | None:
    """What is wrong with the types of one dataset_info.json entry (None when nothing is): the values LLaMA-Factory
    reads as text, a ``columns``/``tags`` object of names, a boolean ``ranking``, a whole ``num_samples`` of at least
    1, no null where LLaMA-Factory reads the key as given. Checked when the file is read, so that ``lf-engine check``,
    training and the board's picker all name the entry and the key instead of failing later."""
    where = f"dataset {name!r}"
    null = next((key for key in NOT_NULL if key in entry and entry[key] is None), None)
    if null is not None:  # LLaMA-Factory reads these as given when the key is there, and fails on a null
        return f"{where}: `{null}` is null; give it a value or remove the key (LLaMA-Factory fails on a null one)."
    for key in TEXT_FIELDS:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            return f"{where}: `{key}` must be text (a string), not {json.dumps(value)[:60]}."
    for key in ("columns", "tags"):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            return (f"{where}: `{key}` must be an object of names (e.g. {{\"prompt\": \"instruction\"}}), not "
                    f"{json.dumps(value)[:60]}.")
        # only the keys LLaMA-Factory reads (others are ignored there, with a warning here: entry_keys)
        bad = next((k for k, v in known_inner(entry, key).items() if not isinstance(v, str)), None)
        if bad is not None:
            return f"{where}: `{key}.{bad}` must be a column name (text), not {json.dumps(value[bad])[:60]}."
    ranking = entry.get("ranking")
    if ranking is not None and not isinstance(ranking, bool) and ranking_number(entry) is None:
        return f"{where}: `ranking` must be true or false (without quotes), not {json.dumps(ranking)[:60]}."
    samples = entry.get("num_samples")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 1):
        return (f"{where}: `num_samples` must be a whole number of at least 1 (rows to sample), not "
                f"{json.dumps(samples)[:60]}; remove it to use every row.")
    return None


def ranking_number(entry: dict[str, Any]) -> int | None:
    """``ranking`` written as the number 0 or 1 (None otherwise). LLaMA-Factory reads such a number by its truth value
    where it converts rows (data/converter.py:109,190), but its stage check tests ``ranking is True``/``is False``
    (data/loader.py:178) and so lets a number through for any stage: see
    :func:`engine.data.loader.check_stage`."""
    value = entry.get("ranking")
    return value if type(value) is int and value in (0, 1) else None


def _entry_spec(name: str, entry: dict[str, Any], dataset_dir: Path) -> DatasetSpec:
    from engine.data.hub import hub_options, hub_source

    warn_misspelt_keys(name, entry, INFO_FILE)
    hub = None
    source = hub_source(entry)  # LLaMA-Factory reads a hub URL before a `file_name` in the same entry
    if source is not None:
        hub = {"kind": source[0], "repo": source[1], **hub_options(entry)}
        if entry.get("file_name"):
            hub["local_file"] = str(entry["file_name"])
    else:
        other = next((key for key in ("script_url", "cloud_file_name") if entry.get(key)), None)
        if other and entry.get("file_name"):  # LLaMA-Factory loads it by `other`, before the file: other rows
            raise DatasetError(
                f"Dataset {name!r} in {INFO_FILE} names both `{other}` and `file_name`; LLaMA-Factory loads it by "
                f"`{other}` (which this engine does not run), so the local file could hold other rows. Remove "
                f"`{other}` from {name!r} to train on `{entry['file_name']}`."
            )
        if other:
            raise DatasetError(
                f"Dataset {name!r} is loaded by `{other}: {entry[other]}`, which this engine does not run (dataset "
                f"scripts and cloud files); download the data, then set `file_name` for {name!r} in {INFO_FILE}."
            )
        if not entry.get("file_name"):
            raise DatasetError(f"Dataset {name!r} in {INFO_FILE} has no `file_name`; add the data file's name.")
    written = str(entry.get("formatting", "alpaca"))
    formatting = written.lower()
    if formatting not in FORMATTINGS:
        raise DatasetError(f"Dataset {name!r}: unknown formatting {written!r}; use alpaca, sharegpt or openai.")
    if formatting != written:  # LLaMA-Factory looks its converter up by the name as written
        raise DatasetError(f"Dataset {name!r}: `formatting: {written}` must be written in lower case, "
                           f"`{formatting}`, in {INFO_FILE} (LLaMA-Factory has no converter named {written!r}).")
    columns = known_inner(entry, "columns")  # other keys: ignored, as in LLaMA-Factory (warned about above)
    tags = known_inner(entry, "tags")
    number = ranking_number(entry)
    if number is not None:
        logger.info("Dataset %r: `ranking: %d` is read as %s, as LLaMA-Factory reads it; write `ranking: %s` in %s.",
                    name, number, bool(number), str(bool(number)).lower(), INFO_FILE)
    exact = formatting in ("alpaca", "sharegpt", "openai")  # LLaMA-Factory's own formattings: read as it reads them
    lf = {"lf_columns": entry_columns(entry) if exact else None,
          "lf_tags": {tag: tags.get(tag) for tag in TAG_KEYS} if exact and isinstance(entry.get("tags"), dict) else None,
          "ranking_number": number}
    if hub is not None:
        return DatasetSpec(name=name, path=Path(hub["repo"]), formatting=formatting,
                           ranking=bool(entry.get("ranking", False)), columns=dict(columns), tags=dict(tags),
                           dataset_dir=dataset_dir, num_samples=entry.get("num_samples"), hub=hub, **lf)
    path = Path(entry["file_name"]).expanduser()
    path = path if path.is_absolute() else dataset_dir / path
    if not path.exists():
        raise DatasetError(
            f"Dataset {name!r}: file not found: {path}. Put the file there or fix `file_name` in {INFO_FILE}."
        )
    split = entry.get("split")
    check_split(name, split)  # datasets' split syntax; the rows are sliced as they are read
    return DatasetSpec(name=name, path=path, formatting=formatting, ranking=bool(entry.get("ranking", False)),
                       columns=dict(columns), tags=dict(tags), dataset_dir=dataset_dir,
                       num_samples=entry.get("num_samples"), split=split, **lf)


def hub_dataset_dir(value: Any) -> bool:
    """Whether a ``dataset_dir`` is LLaMA-Factory's ``ONLINE`` or ``REMOTE:owner/repo`` rather than a folder."""
    text = str(value or "").strip()
    return text == "ONLINE" or text.startswith("REMOTE:")


def _near_hint(name: str, info: dict[str, Any]) -> str:
    near = difflib.get_close_matches(name, list(info), n=3, cutoff=0.5)
    return f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def remote_dataset_info(repo: str) -> dict[str, dict[str, Any]]:
    """The dataset_info.json of hub dataset repository ``repo`` (``dataset_dir: REMOTE:repo``), from the local cache
    when downloads are off.

    Raises:
        DatasetError: the file cannot be fetched (with the reason) or is not a JSON object of entries.
    """
    from huggingface_hub import hf_hub_download

    if not repo:
        raise DatasetError("`dataset_dir: REMOTE:` names no repository; write `REMOTE:owner/name`.")
    try:
        path = hf_hub_download(repo_id=repo, filename=INFO_FILE, repo_type="dataset")
    except Exception as err:  # offline and uncached, no such repository, no network: all say why
        raise DatasetError(f"The {INFO_FILE} of the hub dataset repository {repo!r} (`dataset_dir: REMOTE:{repo}`) "
                           f"cannot be fetched ({type(err).__name__}: {str(err).splitlines()[0][:200]}). Fetch it "
                           "where there is network, or download the repository and set `dataset_dir` to its "
                           "folder.") from None
    return load_dataset_info(Path(path).parent)


def resolve_dataset(name: str, dataset_dir: str | os.PathLike) -> DatasetSpec:
    """The DatasetSpec for a registered name or a file/folder path (``dataset_dir`` may also be LLaMA-Factory's
    ``ONLINE``, every name a hub dataset, or ``REMOTE:owner/repo``, a hub repository's dataset_info.json).

    Raises:
        DatasetError: for an unknown name (with the nearest registered names), a hub entry or a missing file.
    """
    name = name.strip()
    where = str(dataset_dir).strip()
    if where == "ONLINE":  # LLaMA-Factory: every name is a dataset of the chosen hub, read with the default columns
        from engine.data.hub import use_modelscope, use_openmind

        kind = "ms_hub" if use_modelscope() else "om_hub" if use_openmind() else "hf_hub"
        spec = _entry_spec(name, {HUB_URL_KEYS[kind]: name}, Path.cwd())
        spec.hub["online"] = True  # no dataset_info.json to edit: the fix offline is a folder of its own
        return spec
    if where.startswith("REMOTE:"):  # LLaMA-Factory: the dataset_info.json of a hub dataset repository
        info = remote_dataset_info(where[len("REMOTE:"):].strip())
        if name not in info:
            raise DatasetError(f"Unknown dataset {name!r} in the {INFO_FILE} of `dataset_dir: {where}`."
                               f"{_near_hint(name, info)}")
        entry = used_entry(f"the {INFO_FILE} of `dataset_dir: {where}`", info, name)
        if entry.get("file_name") and not any(entry.get(key) for key in HUB_URL_KEYS.values()):
            raise DatasetError(f"Dataset {name!r} in the {INFO_FILE} of `dataset_dir: {where}` names only a local "
                               f"`file_name`, which has no folder here; give it a `hf_hub_url`, or download the "
                               "repository and set `dataset_dir` to its folder.")
        return _entry_spec(name, {k: v for k, v in entry.items() if k != "file_name"}, Path.cwd())  # the hub first
    folder = Path(dataset_dir).expanduser().absolute()
    has_info = info_path(folder).is_file()
    info = load_dataset_info(folder) if has_info else {}
    if name in info:
        return _entry_spec(name, used_entry(info_path(folder), info, name), folder)
    for candidate in (Path(name).expanduser(), folder / name):
        if candidate.exists():
            return DatasetSpec(name=name, path=candidate.absolute(), formatting="auto",
                               dataset_dir=candidate.absolute().parent if candidate.is_file() else candidate.absolute())
    if not folder.is_dir():
        raise DatasetError(
            f"`dataset_dir: {dataset_dir}` {'is a file, not a folder' if folder.exists() else 'does not exist'}"
            f"{'' if str(folder) == str(dataset_dir) else f' ({folder})'}. "
            f"Set it to the folder holding {INFO_FILE} and the data files, or give each dataset as a path to a "
            "data file."
        )
    if not has_info:
        if info_path(folder).exists():  # a folder, pipe or device of that name: read as none, said as what it is
            raise DatasetError(f"{info_path(folder)} is not a regular file (a folder, pipe or device); make it the "
                               f"{INFO_FILE} file of the datasets, or give a path to a data file.")
        raise DatasetError(
            f"Dataset {name!r} is neither a file nor registered: there is no {INFO_FILE} in {folder}. Set "
            "`dataset_dir` to the folder holding dataset_info.json, or give a path to a data file."
        )
    local = [key for key, entry in info.items() if isinstance(entry, dict) and entry.get("file_name")]
    raise DatasetError(
        f"Unknown dataset {name!r} in {info_path(folder)}.{_near_hint(name, info)} Datasets with local files: "
        f"{', '.join(local) or '(none)'}."
    )


def detect_kind(entry: dict[str, Any]) -> str:
    """What a registry entry is for: ``preference`` (rm/dpo), ``kto``, ``pt`` (plain text) or ``sft``."""
    columns = known_inner(entry, "columns")
    if entry.get("ranking"):
        return "preference"
    if "kto_tag" in columns:
        return "kto"
    file_name = str(entry.get("file_name") or "")
    if file_name.endswith(".txt"):
        return "pt"
    if str(entry.get("formatting", "alpaca")) == "alpaca" and columns and set(columns) <= {"prompt", "system"}:
        return "pt"
    return "sft"


_LISTED: dict[str, tuple[tuple[int, ...], dict[str, dict[str, Any]], list[str]]] = {}
"""dataset_info.json path -> (version: mtime, size, inode; entries as listed but for ``available``; repeated keys)."""


def _listed(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The entries of the dataset_info.json at ``path`` as :func:`list_datasets` lists them (without ``available``,
    which follows the data files) and its repeated keys, read again only when the file changed."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    known = _LISTED.get(str(path))
    if known is not None and known[0] == stamp:
        return known[1], known[2]
    info, repeated = _read_info(path)
    listed = {}
    for name, entry in info.items():
        problem = broken_entry(name, entry)
        if problem:  # listed as broken, with the reason, rather than breaking the list
            listed[name] = {"file_name": None, "formatting": None, "ranking": False, "columns": {}, "kind": "broken",
                            "hub": False, "problem": problem}
            continue
        file_name = entry.get("file_name")
        listed[name] = {
            "file_name": file_name,
            "formatting": entry.get("formatting", "alpaca"),
            "ranking": bool(entry.get("ranking", False)),
            "columns": known_inner(entry, "columns"),
            "kind": detect_kind(entry),
            "hub": any(entry.get(key) for key in HUB_URL_KEYS.values()) or (
                not file_name and any(entry.get(key) for key in HUB_KEYS)),
        }
    _LISTED.pop(str(path), None)
    _LISTED[str(path)] = (stamp, listed, repeated)
    while len(_LISTED) > 16:  # the board lists a folder 4 times for one change of folder (pickers and notes)
        _LISTED.pop(next(iter(_LISTED)))
    return listed, repeated


def list_datasets(dataset_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Registered datasets for the board's dropdown: name -> entry details plus ``kind`` and ``available``.

    ``available`` is true when the entry's local file exists; entries read from a hub (every entry with a hub URL,
    as LLaMA-Factory reads them, and script or cloud entries without a file) are listed with ``hub: true``. A
    malformed entry is listed with ``kind: broken`` and ``problem`` (what is wrong and the fix); {} without a file.
    """
    folder = Path(dataset_dir).expanduser().absolute()
    if not info_path(folder).is_file():
        return {}
    listed, _ = _listed(info_path(folder))
    out, seen = {}, {}  # whether each file exists (many entries may name one)
    for name, item in listed.items():
        file_name = item["file_name"]
        if file_name and file_name not in seen:
            seen[file_name] = os.path.exists(os.path.join(folder, file_name))  # False for a name with a NUL byte
        out[name] = {**item, "columns": dict(item["columns"]), "available": bool(file_name) and seen[file_name]}
    return out


def check_datasets(dataset_dir: str | os.PathLike, names: str, stage: str, key: str = "dataset") -> list[str]:
    """Problems with the datasets of a config, as messages (an empty list when all can serve ``stage``).

    Each dataset is resolved, its first row read, its layout detected and checked against the stage; the rest
    of the file is read and converted when the job starts.
    """
    from engine.data.converters import detect_format
    from engine.data.hub import iter_spec_rows
    from engine.data.loader import check_stage, ranking_for_stage, split_names, untagged_kto_sets

    problems = []
    if not split_names(names) and str(names or "").strip():  # commas and spaces only: LLaMA-Factory fails on ''
        return [f"`{key}: {str(names).strip()}` names no dataset (only commas and spaces); set it to names from "
                "dataset_info.json, separated by commas."]
    untagged = untagged_kto_sets(split_names(names), dataset_dir) if stage == "kto" else set()
    for name in split_names(names):
        try:
            spec = resolve_dataset(name, dataset_dir)
            rows = list(itertools.islice(iter_spec_rows(spec), 1))
            if not rows:
                raise DatasetError(f"Dataset {name!r} ({spec.path}) is empty; add rows to it.")
            spec = ranking_for_stage(detect_format(spec, rows), stage)
            check_stage(spec, stage, rows[0], name in untagged)
            missing_columns(spec, rows[0])
        except DatasetError as err:
            message = f"`{key}`: {err}" if not str(err).startswith("`dataset_dir") else str(err)
            if message not in problems:
                problems.append(message)
    return problems


def missing_columns(spec: DatasetSpec, first_row: dict[str, Any]) -> None:
    """Refuse a dataset whose required columns (the turns, the prompt, the chosen and rejected answers, the KTO
    label) are not in its first row, naming the entry's key and the columns there are.

    Raises:
        DatasetError: naming the missing column, the ``columns`` key that maps it and the fix.
    """
    if not isinstance(first_row, dict) or spec.formatting in ("text", "auto"):
        return
    if spec.formatting == "alpaca":
        required = {"prompt": spec.columns.get("prompt", "instruction")}
    else:
        required = {"messages": spec.columns.get("messages", "conversations")}
    if spec.ranking:
        required.update({key: spec.columns[key] for key in ("chosen", "rejected") if spec.columns.get(key)})
    if spec.columns.get("kto_tag"):
        required["kto_tag"] = spec.columns["kto_tag"]
    for key, column in required.items():
        if column in first_row:
            continue
        present = [str(name) for name in first_row]
        near = [key] if key in present else difflib.get_close_matches(column, present, n=1, cutoff=0.5)
        mapped = (f"`columns: {{\"{key}\": \"{column}\"}}`" if key in spec.columns else
                  f"the default column for `{key}`")
        if key in ("chosen", "rejected"):
            mapped += "; `ranking: true` needs chosen and rejected answers"
        hint = f" Did you mean `{near[0]}`? Set `columns: {{\"{key}\": \"{near[0]}\"}}`." if near else (
            f" Map `{key}` to one of them in `columns`.")
        raise DatasetError(f"Dataset {spec.name!r}: its rows have no column `{column}` ({mapped} in {INFO_FILE}); "
                           f"the first row has {', '.join(present) or 'no columns'}.{hint}")
