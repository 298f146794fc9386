"""Hub-hosted entries of dataset_info.json: ``hf_hub_url`` (Hugging Face, through ``datasets``), ``ms_hub_url``
(ModelScope) and ``om_hub_url`` (Modelers / OpenMind), with the entry's ``subset``, ``split`` (default ``train``),
``folder`` and ``revision``.

Which hub serves an entry follows LLaMA-Factory: ModelScope when the entry has ``ms_hub_url`` and ModelScope is
chosen (``use_modelscope_hub`` / ``USE_MODELSCOPE_HUB=1``) or there is no ``hf_hub_url``; the same for OpenMind;
else Hugging Face. Without a network the data comes from the local cache; when it is not there the error names
the entry and how to get the data. ModelScope and OpenMind need their packages (refused clearly otherwise).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterator
from typing import Any

from engine.data.errors import DatasetError

logger = logging.getLogger(__name__)

HUB_URL_KEYS = {"hf_hub": "hf_hub_url", "ms_hub": "ms_hub_url", "om_hub": "om_hub_url"}
HUB_PACKAGES = {"ms_hub": ("modelscope", "modelscope", "use_modelscope_hub"),
                "om_hub": ("openmind", "openmind", "use_openmind_hub")}
_ON = {"1", "true", "yes", "on", "y"}


def use_modelscope() -> bool:
    return os.environ.get("USE_MODELSCOPE_HUB", "").strip().lower() in _ON


def use_openmind() -> bool:
    return os.environ.get("USE_OPENMIND_HUB", "").strip().lower() in _ON


def choose_hubs(methods: Any) -> None:
    """Make the config's ``use_modelscope_hub`` / ``use_openmind_hub`` choice visible to the loaders (env, as LF)."""
    if getattr(methods, "use_modelscope_hub", False):
        os.environ["USE_MODELSCOPE_HUB"] = "1"
    if getattr(methods, "use_openmind_hub", False):
        os.environ["USE_OPENMIND_HUB"] = "1"


def hub_source(entry: dict[str, Any]) -> tuple[str, str] | None:
    """(``hf_hub`` | ``ms_hub`` | ``om_hub``, repository) for a hub entry, else None."""
    has = {kind: bool(entry.get(key)) for kind, key in HUB_URL_KEYS.items()}
    if not any(has.values()):
        return None
    if has["ms_hub"] and (use_modelscope() or not has["hf_hub"]):
        kind = "ms_hub"
    elif has["om_hub"] and (use_openmind() or not has["hf_hub"]):
        kind = "om_hub"
    else:
        kind = "hf_hub"
    return kind, str(entry[HUB_URL_KEYS[kind]])


def hub_options(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's subset / split / folder / revision (LF's defaults: split ``train``)."""
    return {"subset": entry.get("subset"), "split": entry.get("split") or "train", "folder": entry.get("folder"),
            "revision": entry.get("revision")}


def _describe(name: str, kind: str, repo: str) -> str:
    return f"Dataset {name!r} ({HUB_URL_KEYS[kind]}: {repo})"


def load_hub_rows(name: str, hub: dict[str, Any], cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Rows of a hub dataset as plain dicts (see :func:`iter_hub_rows`)."""
    return list(iter_hub_rows(name, hub, cache_dir))


def iter_hub_rows(name: str, hub: dict[str, Any], cache_dir: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a hub dataset as plain dicts, one at a time (the dataset itself stays in its Arrow cache).

    Raises:
        DatasetError: the hub's package is missing, or the data is neither cached nor downloadable; the message
            names the entry.
    """
    kind, repo = hub["kind"], hub["repo"]
    what = _describe(name, kind, repo)
    if kind in HUB_PACKAGES:
        module, pip_name, key = HUB_PACKAGES[kind]
        if importlib.util.find_spec(module) is None:
            raise DatasetError(f"{what} is served by {'ModelScope' if kind == 'ms_hub' else 'OpenMind'}, which needs "
                               f"the `{pip_name}` package: `pip install {pip_name}`, or turn `{key}` off when the "
                               "entry also has an `hf_hub_url`.")
    try:
        if kind == "ms_hub":
            from modelscope import MsDataset

            data = MsDataset.load(dataset_name=repo, subset_name=hub["subset"], data_dir=hub["folder"],
                                  split=hub["split"], cache_dir=cache_dir, version=hub["revision"] or None)
            data = data.to_hf_dataset() if hasattr(data, "to_hf_dataset") else data
        elif kind == "om_hub":
            from openmind import OmDataset

            data = OmDataset.load_dataset(path=repo, name=hub["subset"], data_dir=hub["folder"], split=hub["split"],
                                          cache_dir=cache_dir, revision=hub["revision"])
        else:
            import datasets

            data = datasets.load_dataset(repo, name=hub["subset"], data_dir=hub["folder"], split=hub["split"],
                                         revision=hub["revision"], cache_dir=cache_dir)
    except DatasetError:
        raise
    except Exception as err:  # offline without a cache (ConnectionError), unknown repo, subset or split
        offline = os.environ.get("HF_DATASETS_OFFLINE", "").lower() in _ON or os.environ.get(
            "HF_HUB_OFFLINE", "").lower() in _ON
        where = " and the hub cannot be reached (offline)" if offline or "offline" in str(err).lower() or \
            "connect" in str(err).lower() else ""
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
        if hub.get("local_file"):  # LLaMA-Factory reads the hub first too; the local file is one edit away
            fix = (f"The entry also names `file_name: {hub['local_file']}`, which is not read while it has a hub URL "
                   f"(LLaMA-Factory does the same): remove `{HUB_URL_KEYS[kind]}` (and any other hub URL) from "
                   f"{name!r} in dataset_info.json to train on that file, or download the data on a machine with "
                   "access.")
        elif hub.get("online"):  # `dataset_dir: ONLINE`: there is no dataset_info.json
            fix = (f"Download it on a machine with access (e.g. `hf download {repo} --repo-type dataset --local-dir "
                   "<folder>`), then set `dataset_dir` to a folder whose dataset_info.json names its data file "
                   "(`file_name`), or give the data file's path as the dataset.")
        else:
            fix = (f"Download it on a machine with access (e.g. `hf download {repo} --repo-type dataset --local-dir "
                   f"<folder>`), then set `file_name` for {name!r} in dataset_info.json to that folder's data file, "
                   "with no hub URL in the entry.")
        raise DatasetError(
            f"{what} could not be loaded (subset {hub['subset'] or '-'}, split {hub['split']}): it is not in the "
            f"local cache{where}. {fix} ({type(err).__name__}: {first})"
        ) from None
    logger.info("Loading %s rows of %s from the %s.", _size(data), name, kind.replace("_", " "))
    return (dict(row) for row in data)


def _size(data: Any) -> str:
    try:
        return str(len(data))
    except TypeError:  # a streamed dataset has no length
        return "the"


def spec_rows(spec: Any) -> list[dict[str, Any]]:
    """The rows of a resolved dataset: from the hub for hub entries, else from its file or folder."""
    return list(iter_spec_rows(spec))


def iter_spec_rows(spec: Any) -> Iterator[dict[str, Any]]:
    """:func:`spec_rows` one row at a time (a data file is parsed as it is read, see :mod:`engine.data.rows`); a
    local file's ``split`` selects rows as ``datasets`` does (:mod:`engine.data.slices`)."""
    hub = getattr(spec, "hub", None)
    return iter_hub_rows(spec.name, hub) if hub else iter_local_rows(spec)


def iter_local_rows(spec: Any) -> Iterator[dict[str, Any]]:
    """The rows of a local dataset's file or folder that its ``split`` selects (all of them without one)."""
    from engine.data.rows import iter_rows
    from engine.data.slices import split_rows

    def read() -> Iterator[dict[str, Any]]:
        rows = iter_rows(spec.path)  # the path is checked before the first row
        if spec.formatting == "openai" and spec.lf_columns is not None:  # typed as LLaMA-Factory's loader types them
            from engine.data.arrow_typing import typed_rows

            messages = (spec.columns or {}).get("messages") or "messages"
            return typed_rows(rows, lambda: iter_rows(spec.path), spec.path, messages, spec.lf_columns.get("tools"))
        return rows

    rows = read()
    split = getattr(spec, "split", None)
    return split_rows(read, split, spec.name) if split else rows
