"""What the board offers in its pickers, asked of the engine lazily (inside handlers, never at import time).

Each lookup degrades to a clear note when the engine part it needs is missing, so that the page still opens.
The device report imports torch, so it runs in a short subprocess and the board process stays light.
"""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from app.jobs import child_env

logger = logging.getLogger(__name__)

DEMO_MODEL = "demo"


class EngineMissing(RuntimeError):
    """An engine module the board needs is not importable; the message names it and the fix (English as ``str()``,
    the page's language from :meth:`text`)."""

    def __init__(self, function: str, errors: str) -> None:
        self.function, self.errors = function, errors
        super().__init__(self.text("en"))

    def text(self, lang: str | None) -> str:
        from app.i18n import t

        return t(lang, "catalog_engine_missing", function=self.function, errors=self.errors)


def _engine_attr(modules: tuple[str, ...], name: str) -> Any:
    errors = []
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            errors.append(f"{module}.{name}: {err}")
    raise EngineMissing(f"{modules[0]}.{name}", "; ".join(errors))


def models(lang: str | None = "en") -> tuple[list[tuple[str, str]], str | None]:
    """(choices as (display, hub id or `demo`), note in ``lang``) for the model picker; the demo always comes first."""
    try:
        found = _engine_attr(("engine.models.registry", "engine.models"), "list_models")()
        note = None
    except EngineMissing as err:
        found, note = {}, err.text(lang)
    try:
        media = _engine_attr(("engine.models.registry",), "model_media")
    except EngineMissing:
        media = None
    choices = [(_with_media(display, value, media), value) for display, value in found.items()]
    if not any(value == DEMO_MODEL for _, value in choices):
        choices.insert(0, ("LF-Demo", DEMO_MODEL))
    else:
        choices.sort(key=lambda c: c[1] != DEMO_MODEL)
    return choices, note


def _with_media(display: str, value: str, media: Any) -> str:
    """``display`` with the media the model takes, e.g. ``Qwen2-VL-2B-Instruct  [image, video]``."""
    try:
        kinds = media(value) if media else ()
    except Exception:  # a broken local config.json must not break the picker
        kinds = ()
    return f"{display}  [{', '.join(kinds)}]" if kinds else display


def default_template(model: str | None) -> str | None:
    """The template the engine's registry assigns to a model (None when unknown or unavailable)."""
    if not model:
        return None
    try:
        return _engine_attr(("engine.models.registry", "engine.models"), "default_template")(model)
    except EngineMissing:
        return "chatml" if model == DEMO_MODEL else None
    except Exception as err:  # a broken local config.json must not break the page
        logger.warning("No default template for %s: %s", model, err)
        return None


def templates(lang: str | None = "en") -> tuple[list[str], str | None]:
    """(template names, note in ``lang``)."""
    try:
        return list(_engine_attr(("engine.templates", "engine.templates.registry"), "list_templates")()), None
    except EngineMissing as err:
        return [], err.text(lang)


MAX_INFO_BYTES = 32 << 20
"""The largest dataset_info.json read (as the engine's ``engine.data.info_repeats.MAX_INFO_BYTES``)."""


def _read_dataset_info(dataset_dir: Path) -> dict[str, Any]:
    path = dataset_dir / "dataset_info.json"
    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as fh:  # (a regular file: is_file() above)
            raw = fh.read(MAX_INFO_BYTES + 1)
        if len(raw) > MAX_INFO_BYTES:
            raise ValueError(f"{path} is larger than {MAX_INFO_BYTES:,} bytes, more than any dataset_info.json holds; "
                             "is this the right file?")
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); fix or remove it.") from None
    return data if isinstance(data, dict) else {}


def datasets(dataset_dir: str | Path | None, lang: str | None = "en") -> tuple[dict[str, dict[str, Any]], str | None]:
    """(name -> info, note in ``lang``) for the datasets of a folder with a dataset_info.json (an engine message in
    a note stays as the engine wrote it)."""
    from app.i18n import t

    if not dataset_dir:
        return {}, None
    text = str(dataset_dir).strip()
    if text == "ONLINE":  # LLaMA-Factory's: every dataset name is a hub dataset
        return {}, t(lang, "catalog_ds_online")
    if text.startswith("REMOTE:"):  # LLaMA-Factory's: the dataset_info.json of a hub dataset repository
        try:
            remote = _engine_attr(("engine.data.registry",), "remote_dataset_info")(text[len("REMOTE:"):].strip())
        except Exception as err:  # the engine's message (or EngineMissing's) says why and what to do
            return {}, str(err)
        return {str(name): dict(entry) for name, entry in remote.items()}, None
    folder = Path(dataset_dir).expanduser()
    try:
        is_file, is_dir = folder.is_file(), folder.is_dir()
    except OSError as err:  # a name too long for the system, say
        return {}, t(lang, "catalog_ds_unreadable", reason=err.strerror or err)
    if is_file:
        return {}, t(lang, "catalog_ds_is_file", folder=folder)
    if not is_dir:
        return {}, t(lang, "catalog_ds_missing", folder=folder)
    info = folder / "dataset_info.json"
    if not info.is_file():  # none, or a folder, pipe or device of that name (never opened: a pipe would block)
        return {}, t(lang, "catalog_ds_info_not_file" if info.exists() else "catalog_ds_no_info", folder=folder, file=info)
    try:
        lister = _engine_attr(("engine.data.registry", "engine.data"), "list_datasets")
    except EngineMissing as err:
        try:
            return _read_dataset_info(folder), err.text(lang)
        except ValueError as bad:
            return {}, str(bad)
    try:
        found = lister(str(folder))
    except Exception as err:
        return {}, t(lang, "catalog_ds_list_failed", folder=folder, error=err)
    try:  # a name or column written twice: the engine uses the last, as LLaMA-Factory does; say so here too
        note = _engine_attr(("engine.data.registry",), "repeated_keys_note")(str(folder))
    except Exception:
        note = None
    if isinstance(found, dict):
        return {str(k): (v if isinstance(v, dict) else {"info": v}) for k, v in found.items()}, note
    return {str(name): {} for name in found}, note


def kept_datasets(dataset_dir: str, choices: list[tuple[str, str]], selected: list[str] | None) -> list[str]:
    """The selected datasets that stay selected in a newly chosen dataset folder: those it lists; under ``ONLINE``
    (hub names are typed, not listed) the typed hub names (owner/name), not the names of the folder left behind."""
    if str(dataset_dir or "").strip() == "ONLINE":
        return [name for name in selected or [] if "/" in str(name).strip("/")]
    names = {value for _, value in choices}
    return [name for name in selected or [] if name in names]


def dataset_kind(info: dict[str, Any]) -> str:
    """A short description of a dataset's detected kind for the picker."""
    for key in ("kind", "detected_kind", "stage", "formatting"):
        if info.get(key):
            return str(info[key])
    if info.get("ranking"):
        return "preference"
    return ""


def register_dataset(dataset_dir: Path, name: str, file_name: str) -> dict[str, Any]:
    """Register an uploaded file in ``dataset_dir/dataset_info.json`` through the engine."""
    register = _engine_attr(("engine.data.register", "engine.data"), "register_dataset")
    result = register(str(dataset_dir), name, file_name)
    return result if isinstance(result, dict) else {}


def preflight(cfg: Any, command: str) -> list[str]:
    """The engine's checks before a job starts (files, data, memory); [] when the checker is unavailable."""
    try:
        check = _engine_attr(("engine.preflight",), "check")
    except EngineMissing as err:
        logger.warning("%s", err)
        return []
    # the board's jobs have no terminal to ask on; the devices come from the environment report (a subprocess), so
    # that checking a config never imports torch or transformers into the board (the job checks again at its start)
    report, _ = ENVIRONMENT.get()
    device = {"type": report.get("accelerator"), "label": report.get("accelerator_label") or "",
              "memory": _first_device_memory(report)} if report else {}
    from app.prequantized import prequantized_problems

    problems = list(check(cfg, command, interactive=False, device=device))
    return problems + (prequantized_problems(cfg) if command != "data" else [])  # asked in a child interpreter


def _first_device_memory(report: dict[str, Any]) -> tuple[int, int] | None:
    """(free, total) bytes of the report's first accelerator (the memory check's budget), None when it has none."""
    found = report.get("devices") or []
    entry = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    free, total = entry.get("memory_free_gib"), entry.get("memory_total_gib")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (free, total)):
        return None
    return int(free * 2**30), int(total * 2**30)


class EnvironmentReport:
    """The devices and memory, from ``engine.devices.environment_report()`` run once in a subprocess."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._report: dict[str, Any] | None = None
        self._error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin collecting in the background (called once the page is served)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._collect, name="lfboard-env", daemon=True)
                self._thread.start()

    def _collect(self) -> None:
        code = "import json; from engine.devices import environment_report; print(json.dumps(environment_report()))"
        try:
            out = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=180,
                env=child_env(),
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            self._error = str(err)
            return
        if out.returncode != 0:
            self._error = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["unknown error"]
            self._error = self._error[0]
            return
        try:
            self._report = json.loads(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as err:
            self._error = f"unreadable report: {err}"

    def get(self) -> tuple[dict[str, Any] | None, str | None]:
        """(report or None while collecting, error or None)."""
        self.start()
        return self._report, self._error


ENVIRONMENT = EnvironmentReport()
