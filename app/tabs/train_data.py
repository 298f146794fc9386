"""The Train tab's data tools: register an uploaded file as a dataset, and preview the chosen datasets (rows as the
model sees them, with a histogram of their token lengths)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from app import catalog, dataset_preview, progress_view
from app.context import Board
from app.i18n import t
from app.visible_text import name_problem
from app.workspace import valid_name

HIST_TYPES = {"tokens": "int64", "rows": "int64"}


def upload_dataset(board: Board, file: str | None, name: str, lang: str) -> tuple[str, str | None]:
    """Copy an uploaded file into the workspace's dataset folder and register it; (message, name or None)."""
    if not file:
        return t(lang, "upload_no_file"), None
    source = Path(file)
    from app.security import upload_problem

    too_large = upload_problem(source, board.max_upload_mb)
    if too_large:
        return t(lang, "upload_failed", error=too_large), None
    if _no_rows(source):
        return t(lang, "upload_empty", file=source.name), None
    typed = bool((name or "").strip())
    name = (name or source.stem).strip()
    if name_problem(name):
        return t(lang, "name_hidden_chars", name=name, chars=name_problem(name)), None
    if not valid_name(name) and not typed:  # a file named in Chinese, with spaces...: the name must be typed
        return t(lang, "upload_name_from_file", name=name), None
    if not valid_name(name):
        return t(lang, "upload_bad_name", name=name), None
    folder = board.workspace.datasets_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}{source.suffix.lower()}"
    taken = t(lang, "upload_taken", file=target.name, name=name, folder=folder)
    if target.name == "dataset_info.json" or name in catalog.datasets(folder)[0]:
        return taken, None
    created = False
    try:  # created here or not at all: an upload never replaces or removes a file it did not write
        with source.open("rb") as src, target.open("xb") as dst:
            created = True
            shutil.copyfileobj(src, dst)
        info = catalog.register_dataset(folder, name, target.name)
    except FileExistsError:
        return taken, None
    except Exception as err:
        if created:
            target.unlink(missing_ok=True)
        return t(lang, "upload_failed", error=err), None
    kind = catalog.dataset_kind(catalog.datasets(folder)[0].get(name) or info)  # as the picker shows it
    return t(lang, "upload_done", name=name, kind=kind or "?", folder=folder), name


def _no_rows(source: Path) -> bool:
    """Whether an uploaded data file is empty: no bytes, only white space, or no row (``[]``). A file that cannot be
    read is not called empty here: registering it says what is wrong with it."""
    from engine.data.rows import iter_rows

    try:
        with source.open("rb") as handle:
            head = handle.read(65536)
        if not head.strip() and len(head) == source.stat().st_size:
            return True
        return next(iter(iter_rows(source)), None) is None
    except Exception:
        return False


def preview_data(board: Board, mapping: dict[str, Any], lang: str) -> tuple[str, str, pd.DataFrame]:
    """(summary markdown, rows HTML, histogram frame) for the chosen datasets."""
    empty = progress_view.typed_frame([], HIST_TYPES)
    if not mapping.get("dataset"):
        return t(lang, "preview_no_dataset"), "", empty
    try:
        result = dataset_preview.run_preview(mapping, board.workspace.root / ".scratch")
    except dataset_preview.PreviewError as err:
        return t(lang, "preview_failed", error=err), "", empty
    lengths = dataset_preview.lengths_of(result)
    over = dataset_preview.over_cutoff(result)
    summary = t(
        lang,
        "preview_summary",
        rows=len(lengths),
        cutoff=mapping.get("cutoff_len") or "?",
        over="?" if over is None else over,
    )
    if lengths:
        summary += " " + t(
            lang, "preview_lengths", min=min(lengths), max=max(lengths), mean=round(sum(lengths) / len(lengths), 1)
        )
    labels = {name: t(lang, f"preview_{name}")
              for name in ("trained", "masked", "chosen", "rejected", "kto_tag", *dataset_preview.MEDIA_LABELS)}
    rows = dataset_preview.render_rows(result, labels)
    hist = progress_view.typed_frame(
        [{"tokens": a, "rows": n} for a, n in dataset_preview.histogram(lengths)], HIST_TYPES
    )
    return summary, rows, hist


def dataset_note(dataset_dir: str, selected: list[str] | None, lang: str) -> str:
    """The note under the dataset pickers: the folder's note (names written twice, ...) and, for each selected
    dataset whose dataset_info.json entry is malformed ("name · broken" in the picker), the engine's reason in a
    frame of ``lang``; '' when there is nothing to say."""
    from app.engine_text import note_text
    from app.visible_text import reveal

    found, note = catalog.datasets(dataset_dir, lang)
    lines = [note_text(lang, note, "data")] if note else []
    for name in dict.fromkeys(selected or []):
        info = found.get(name) or {}
        if info.get("kind") == "broken":
            lines.append(t(lang, "train_dataset_broken", name=reveal(name),
                           problem=reveal(str(info.get("problem") or t(lang, "train_dataset_broken_unknown")))))
    return "\n\n".join(lines)
