"""The Train tab's data tools: register an uploaded file as a dataset, and preview the chosen datasets (rows as the
model sees them, with a histogram of their token lengths)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from app import catalog, dataset_preview, progress_view
from app.context import Board
from app.i18n import L, t, translate
from app.visible_text import choices as shown_choices
from app.visible_text import name_problem, reveal
from app.workspace import valid_name

HIST_TYPES = {"tokens": "int64", "rows": "int64"}


Said = dict[str, Any]
"""A message as a locale key, its parameters, and the dataset folder and picked datasets it was said over
(``{"key", "params", "folder", "picked"}``), so that the note can say it again in another language while the page
still shows them."""


def upload_dataset(board: Board, file: str | None, name: str, lang: str) -> tuple[str, str | None]:
    """Copy an uploaded file into the workspace's dataset folder and register it; (message, name or None)."""
    said, registered = upload_said(board, file, name)
    return said_text(said, lang), registered


def said_text(said: Said, lang: str) -> str:
    return translate(lang, said["key"], **said["params"])


def upload_said(board: Board, file: str | None, name: str, folder_shown: str | None = None,
                picked: list[str] | None = None) -> tuple[Said, str | None]:
    """:func:`upload_dataset`'s work, its message as :data:`Said`: over ``folder_shown`` and ``picked`` (what the page
    shows) when the file is refused; over the workspace's dataset folder and the new dataset, which the page then
    shows, when it is registered."""
    def said(key: str, **params: Any) -> tuple[Said, None]:
        return {"key": key, "params": {k: str(v) for k, v in params.items()}, "folder": folder_shown or "",
                "picked": sorted(picked or [])}, None

    if not file:
        return said("upload_no_file")
    source = Path(file)
    from app.security import upload_too_large

    size_mb = upload_too_large(source, board.max_upload_mb)
    if size_mb is not None:
        return said("upload_too_large", size=size_mb, limit=board.max_upload_mb)
    if _no_rows(source):
        return said("upload_empty", file=source.name)
    typed = bool((name or "").strip())
    name = (name or source.stem).strip()
    if name_problem(name):
        return said("name_hidden_chars", name=name, chars=name_problem(name))
    if not valid_name(name) and not typed:  # a file named in Chinese, with spaces...: the name must be typed
        return said("upload_name_from_file", name=name)
    if not valid_name(name):
        return said("upload_bad_name", name=name)
    folder = board.workspace.datasets_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}{source.suffix.lower()}"
    taken = said("upload_taken", file=target.name, name=name, folder=folder)
    if target.name == "dataset_info.json" or name in catalog.datasets(folder)[0]:
        return taken
    created = False
    try:  # created here or not at all: an upload never replaces or removes a file it did not write
        with source.open("rb") as src, target.open("xb") as dst:
            created = True
            shutil.copyfileobj(src, dst)
        info = catalog.register_dataset(folder, name, target.name)
    except FileExistsError:
        return taken
    except Exception as err:
        if created:
            target.unlink(missing_ok=True)
        return said("upload_failed", error=err)
    kind = catalog.dataset_kind(catalog.datasets(folder)[0].get(name) or info)  # as the picker shows it
    done = said("upload_done", name=name, kind=kind or "?", folder=folder)[0]
    return {**done, "folder": str(folder), "picked": [name]}, name


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


def preview_made(board: Board, mapping: dict[str, Any]) -> dict[str, Any]:
    """What a preview of the chosen datasets found, in no language: ``{"key": locale key, ...params}`` for a
    preview that could not be made, else ``{"result": the worker's result, "cutoff": cutoff_len}``. The page keeps
    it, so that a switch of its language shows the same preview in the new one (:func:`preview_shown`)."""
    def said(key: str, **params: Any) -> dict[str, Any]:
        return {"key": key, **params}

    if not mapping.get("dataset"):
        return said("preview_no_dataset")
    try:
        result = dataset_preview.run_preview(mapping, board.workspace.scratch_call("preview-"))
    except dataset_preview.PreviewError as err:
        return said("preview_failed", error=str(err))
    return {"result": result, "cutoff": mapping.get("cutoff_len") or "?"}


def preview_shown(made: dict[str, Any], lang: str) -> tuple[str, str, pd.DataFrame]:
    """(summary markdown, rows HTML, histogram frame) of :func:`preview_made`'s answer, in ``lang``."""
    empty = progress_view.typed_frame([], HIST_TYPES)
    if "result" not in made:
        return translate(lang, made["key"], **{k: v for k, v in made.items() if k != "key"}), "", empty
    result = made["result"]
    lengths = dataset_preview.lengths_of(result)
    over = dataset_preview.over_cutoff(result)
    summary = t(lang, "preview_summary", rows=len(lengths), cutoff=made["cutoff"], over="?" if over is None else over)
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


def preview_data(board: Board, mapping: dict[str, Any], lang: str) -> tuple[str, str, pd.DataFrame]:
    """(summary markdown, rows HTML, histogram frame) for the chosen datasets."""
    return preview_shown(preview_made(board, mapping), lang)


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
def dataset_choices(dataset_dir: str | None, lang: str | None = "en") -> tuple[list[tuple[str, str]], str | None]:
    found, note = catalog.datasets(dataset_dir, lang)
    choices = []
    for name, info in found.items():
        kind = catalog.dataset_kind(info)
        if kind == "broken":  # a word, not a format's name: the page shows it in its language (gradio translates the
            choices.append((reveal(f"{name} · ") + str(L("train_dataset_kind_broken")), name))  # key in the label)
            continue
        choices.append((reveal(f"{name} · {kind}" if kind else name), name))
    return choices, note


def note_update(dataset_dir: str, selected: list[str], said: Said | None, lang: str) -> Any:
    """The note under the pickers, in ``lang``: what the last upload said while the page shows the folder and the
    picks it was said over, else :func:`dataset_note` for the picked datasets."""
    import gradio as gr

    if said and said.get("folder") == (dataset_dir or "") and said.get("picked") == sorted(set(selected or [])):
        return gr.update(value=said_text(said, lang), visible=True)
    note = dataset_note(dataset_dir, selected, lang)
    return gr.update(value=note, visible=bool(note))


def wire(tab: Any, top: Any, board: Board, form: list[Any], mapping_of: Any) -> None:
    """The Train tab's data events: the folder and the pickers, the note under them (composed again in the new
    language when the page's language changes), the upload and the preview. ``form``: the tab's inputs, which
    ``mapping_of(tab.keys, values)`` turns into the config mapping."""
    import gradio as gr

    private = {"api_visibility": "private"}
    said = gr.State(None)  # what the last upload said (Said), until a dataset is picked

    def on_dataset_dir(dataset_dir: str, selected: list[str], selected_eval: list[str], said: Said | None, lang: str):
        choices, _ = dataset_choices(dataset_dir, lang)
        keep = catalog.kept_datasets(dataset_dir, choices, selected)
        keep_eval = catalog.kept_datasets(dataset_dir, choices, selected_eval)
        return gr.update(choices=choices, value=keep), gr.update(choices=choices, value=keep_eval), note_update(
            dataset_dir, [*keep, *keep_eval], said, lang)

    def on_picked(dataset_dir: str, selected: list[str], selected_eval: list[str], lang: str):
        # a malformed dataset_info.json entry ("name · broken") shows why, where it is picked
        return note_update(dataset_dir, [*(selected or []), *(selected_eval or [])], None, lang), None

    def on_lang(dataset_dir: str, selected: list[str], selected_eval: list[str], said: Said | None, lang: str):
        return note_update(dataset_dir, [*(selected or []), *(selected_eval or [])], said, lang)

    pickers = [tab.dataset_dir, tab.dataset, tab.eval_dataset]
    for picker in (tab.dataset, tab.eval_dataset):
        picker.input(on_picked, [*pickers, top.lang], [tab.dataset_note, said], **private)
    tab.dataset_dir.change(on_dataset_dir, [*pickers, said, top.lang], [tab.dataset, tab.eval_dataset, tab.dataset_note],
                           **private)
    top.lang.change(on_lang, [*pickers, said, top.lang], tab.dataset_note, show_progress="hidden", **private)

    def on_upload(file, name, dataset_dir, selected, selected_eval, lang):
        message, registered = upload_said(board, file, name, dataset_dir, sorted({*(selected or []),
                                                                                   *(selected_eval or [])}))
        if registered is None:
            return gr.update(value=said_text(message, lang), visible=True), gr.skip(), gr.skip(), message, False
        folder = str(board.workspace.datasets_dir)
        message["picked"] = sorted({registered, *(selected_eval or [])})  # as the pickers show them now
        choices, _ = dataset_choices(folder, lang)
        return (
            gr.update(value=said_text(message, lang), visible=True),
            gr.update(value=folder, choices=shown_choices(board.workspace.dataset_dirs())),
            gr.update(choices=choices, value=[registered]),
            message,
            True,
        )

    def on_preview_uploaded(registered, *values):
        # a refused file leaves the preview as it was: a preview of the datasets still selected would look like
        # the preview of the file just uploaded
        if not registered:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return on_preview(*values)

    def shown(made: dict[str, Any], lang: str) -> tuple[Any, ...]:
        summary, rows, hist = preview_shown(made, lang)
        # the chart's axis titles are plain text in the page's language (an I18n title would show as raw JSON);
        # no rows: no chart (None), as the page starts, rather than empty axes
        return summary, rows, gr.update(value=hist if len(hist) else None, x_title=t(lang, "axis_tokens"),
                                        y_title=t(lang, "axis_rows"))

    def on_preview(*values):
        *values, lang = values
        made = preview_made(board, mapping_of(tab.keys, list(values)))
        return (*shown(made, lang), made)

    def on_preview_lang(made: dict[str, Any] | None, lang: str):
        # the summary, the rows' legend and the chart's axes follow a switch of the page's language
        return shown(made, lang) if made else (gr.skip(), gr.skip(), gr.skip())

    registered = gr.State(False)
    made = gr.State(None)  # the preview shown (preview_made), to show it again in another language
    previewed = [tab.preview_summary, tab.preview_rows, tab.preview_hist]
    tab.upload_btn.click(
        on_upload,
        [tab.upload_file, tab.upload_name, *pickers, top.lang],
        [tab.dataset_note, tab.dataset_dir, tab.dataset, said, registered],
        **private,
    ).then(
        # the preview follows the new selection (the registered dataset) without another click
        on_preview_uploaded, [registered, *form, top.lang], [*previewed, made], **private,
    )
    tab.preview_btn.click(on_preview, [*form, top.lang], [*previewed, made], **private)
    top.lang.change(on_preview_lang, [made, top.lang], previewed, show_progress="hidden", **private)
