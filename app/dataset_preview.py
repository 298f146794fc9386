"""Runs the dataset preview worker and turns its result into HTML rows and a token-length histogram."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from app.forms import yaml_text
from app.visible_text import reveal
from app.worker_process import log_tail, run_worker

PREVIEW_TIMEOUT = 600


class PreviewError(RuntimeError):
    """The preview could not be made; the message says why."""


def run_preview(mapping: dict[str, Any], scratch_dir: Path, n: int = 5) -> dict[str, Any]:
    """Write the config to ``scratch_dir`` (a new private folder of this call's, :meth:`Workspace.scratch_call`,
    removed afterwards), run the worker, and return its result (PreviewError on failure)."""
    stem = scratch_dir / "preview"
    config, out, log = stem.with_suffix(".yaml"), stem.with_suffix(".json"), stem.with_suffix(".log")
    try:
        config.write_text(yaml_text(mapping), encoding="utf-8")
        code = run_worker("app.preview_worker", [str(config), str(out), str(n)], log, PREVIEW_TIMEOUT)
        result = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
        if result is None or code not in (0, 2):
            raise PreviewError(log_tail(log, 12) or f"the preview worker exited with code {code}")
        if "error" in result:
            raise PreviewError(str(result["error"]))
        return result
    except subprocess.TimeoutExpired:
        raise PreviewError(f"the preview took longer than {PREVIEW_TIMEOUT} s") from None
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)


def _spans(row: Any) -> list[tuple[str, bool]]:
    if isinstance(row, dict):
        row = row.get("spans") or row.get("segments") or []
    spans = []
    for item in row or []:
        if isinstance(item, dict):
            spans.append((str(item.get("text", "")), bool(item.get("trained", item.get("train", False)))))
        elif isinstance(item, (list, tuple)) and len(item) >= 2:
            spans.append((str(item[0]), bool(item[1])))
    return spans


def rows_of(result: dict[str, Any]) -> list[list[tuple[str, bool]]]:
    """The preview rows as lists of (text, trained) spans."""
    rows = result.get("rows") or result.get("examples") or []
    return [_spans(row) for row in rows]


def _extras(row: Any) -> tuple[list[tuple[str, bool]], Any]:
    """(rejected spans of a preference row, KTO tag) when present."""
    if not isinstance(row, dict):
        return [], None
    return _spans(row.get("rejected_spans") or []), row.get("kto_tag")


def lengths_of(result: dict[str, Any]) -> list[int]:
    for key in ("lengths", "token_lengths", "lens"):
        if isinstance(result.get(key), list):
            return [int(x) for x in result[key] if isinstance(x, (int, float))]
    return []


def over_cutoff(result: dict[str, Any]) -> int | None:
    for key in ("over_cutoff", "truncated", "num_truncated", "count_over_cutoff"):
        if isinstance(result.get(key), (int, float)):
            return int(result[key])
    return None


def _spans_html(spans: list[tuple[str, bool]]) -> str:
    return "".join(
        f'<span class="{"lf-trained" if trained else "lf-masked"}">{html.escape(reveal(text, names=False))}</span>'
        for text, trained in spans
    )


MEDIA_LABELS = ("soft_tokens", "image", "video", "audio", "frames")


def _media_html(media: Any, labels: dict[str, str]) -> str:
    """Thumbnails, video frame counts and soft-token counts of one row (the worker's ``media`` entry)."""
    if not isinstance(media, dict):
        return ""
    word = {kind: labels.get(key, key) for kind, key in (("images", "image"), ("videos", "video"), ("audios", "audio"))}
    items = []
    for image in media.get("images") or []:
        name = html.escape(str(image.get("name", "")))
        thumb = str(image.get("thumb") or "")
        if thumb.startswith("data:image/png;base64,"):
            items.append(f'<figure class="lf-thumb"><img src="{html.escape(thumb)}" alt="{name}" title="{name}">'
                         f"<figcaption>{name}</figcaption></figure>")
        else:
            items.append(f'<span class="lf-media-chip lf-media-error">{name}: {html.escape(str(image.get("error")))}</span>')
    for video in media.get("videos") or []:
        name = html.escape(str(video.get("name", "")))
        if "frames" in video:
            detail = f'{int(video["frames"])} {html.escape(labels.get("frames", "frames"))}'
            items.append(f'<span class="lf-media-chip">{html.escape(word["videos"])} {name} · {detail}</span>')
        else:
            items.append(f'<span class="lf-media-chip lf-media-error">{name}: {html.escape(str(video.get("error")))}</span>')
    for audio in media.get("audios") or []:
        items.append(f'<span class="lf-media-chip">{html.escape(word["audios"])} {html.escape(str(audio.get("name")))}</span>')
    counts = media.get("soft_tokens")
    note = ""
    if isinstance(counts, dict) and counts:
        parts = " · ".join(f"{html.escape(word.get(kind, kind))} {int(n)}" for kind, n in counts.items())
        note = f'<div class="lf-soft-tokens">{html.escape(labels.get("soft_tokens", "soft tokens"))}: {parts}</div>'
    if media.get("error"):
        note += f'<div class="lf-media-error">{html.escape(str(media["error"]))}</div>'
    return f'<div class="lf-media">{"".join(items)}</div>{note}'


def render_rows(result: dict[str, Any], labels: dict[str, str]) -> str:
    """HTML: each row's text with the trained tokens highlighted and the masked ones dimmed.

    ``labels`` holds the translated words ``trained``, ``masked``, ``chosen``, ``rejected``, ``kto_tag``.
    """
    parts = [
        f'<div class="lf-legend"><span class="lf-trained">{html.escape(labels["trained"])}</span> '
        f'<span class="lf-masked">{html.escape(labels["masked"])}</span></div>'
    ]
    raw_rows = result.get("rows") or result.get("examples") or []
    for index, spans in enumerate(rows_of(result), 1):
        rejected, kto_tag = _extras(raw_rows[index - 1])
        head = f"#{index}"
        if kto_tag is not None:
            head += f" · {html.escape(labels['kto_tag'])}: {'✓' if kto_tag else '✗'}"
        if rejected:
            body = (
                f'<div class="lf-row-num">{html.escape(labels["chosen"])}</div><pre>{_spans_html(spans)}</pre>'
                f'<div class="lf-row-num">{html.escape(labels["rejected"])}</div><pre>{_spans_html(rejected)}</pre>'
            )
        else:
            body = f"<pre>{_spans_html(spans)}</pre>"
        raw = raw_rows[index - 1]
        if isinstance(raw, dict) and raw.get("media"):
            body = _media_html(raw["media"], labels) + body
        parts.append(f'<div class="lf-row"><div class="lf-row-num">{head}</div>{body}</div>')
    return "\n".join(parts)


def histogram(lengths: list[int], bins: int = 20) -> list[tuple[int, int]]:
    """(bin start, rows) pairs for a bar chart of token lengths."""
    if not lengths:
        return []
    lo, hi = min(lengths), max(lengths)
    width = max(1, -(-(hi - lo + 1) // bins))
    counts: dict[int, int] = {}
    for length in lengths:
        start = lo + (length - lo) // width * width
        counts[start] = counts.get(start, 0) + 1
    return sorted(counts.items())
