"""Media checks of a config's datasets, run by ``engine.preflight`` before any model or data is loaded.

Every problem is reported at once, each naming the dataset, the row and the fix:

- the number of ``<image>`` / ``<video>`` / ``<audio>`` placeholders differs from the number of files;
- a media file is missing or cannot be opened;
- a remote URL (never downloaded here);
- a modality the chosen model cannot take (e.g. video for Gemma 3, audio for a model without an audio encoder);
- a stage or preference loss that cannot train on media rows;
- rows with media for a model known to take text only (the text demo, a config.json without a vision or audio
  tower), refused but in pre-training, with the data loader's message (:mod:`engine.data.text_model_media`).

Rows the stage skips whatever their media (a KTO row without a boolean kto_tag, turns that do not alternate) are not
checked: LLaMA-Factory drops them before its plugin reads their media (a skipped KTO row still lends its reply's
text to a KL pair, never its media).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from pathlib import Path
from typing import Any

from engine.config.streaming_checks import media_refusal
from engine.data.embedded import embedded_image
from engine.data.registry import media_column
from engine.data.text_model_media import UNREFUSED_STAGES, text_model_refusal
from engine.demo_names import is_demo_name
from engine.multimodal.plugins import KIND_WORD, PLACEHOLDERS
from engine.multimodal.processor import TORCHVISION_FIX, MediaOptions, has_torchvision
from engine.wording import counted

logger = logging.getLogger(__name__)

MAX_LISTED = 8
"""Problems listed per dataset before the rest are counted."""
MAX_PROBED = 2000
"""Files opened per dataset to check they are readable (beyond that, only their existence is checked)."""
TEXT_COLUMNS = ("messages", "prompt", "query", "response", "history", "chosen", "rejected")
"""The columns whose placeholders are counted: the conversation's, as LLaMA-Factory counts them (its plugin gets the
prompt and reply turns; the system prompt, from the system column or a leading system turn, is not among them)."""


def _media_items(row: dict[str, Any], column: str | None) -> list[Any]:
    value = row.get(column) if column else None
    if value in (None, "", []):
        return []
    return value if isinstance(value, list) else [value]


def _item_path(item: Any) -> Any:
    return (item.get("path") or item.get("url")) if isinstance(item, dict) else item


def _row_problems(row: dict[str, Any], spec: Any, probed: list[int], allowed: tuple[str, ...] | None,
                  why_not: str = "") -> list[str]:
    defaults = ({"prompt": "instruction", "query": "input", "response": "output"} if spec.formatting == "alpaca"
                else {"messages": "conversations"})  # LLaMA-Factory's default columns
    columns = {**defaults, **spec.columns}
    read = dict.fromkeys(columns[key] for key in TEXT_COLUMNS if columns.get(key))  # each column once
    text = json.dumps([_without_system_turn(row.get(name), spec) if name == columns.get("messages") else row.get(name)
                       for name in read], ensure_ascii=False)
    problems = []
    for kind, tag in PLACEHOLDERS.items():
        items = _media_items(row, media_column(spec, kind))
        count = text.count(tag)
        if count != len(items):
            problems.append(f"{counted(count, tag + ' placeholder')} but {counted(len(items), KIND_WORD[kind] + ' file')}: put one {tag} "
                            "in the text per file")
        if items and allowed is not None and kind not in allowed:
            took = (f"it takes {', '.join(allowed)}" + (f"; {why_not}" if why_not else "") if allowed else
                    "no media plugin serves this model type yet, so it is used with text only here")
            problems.append(f"has {KIND_WORD[kind]} input, which this model cannot take ({took}): choose a model "
                            "that does or drop that column")
        for item in items:
            if kind == "videos" and isinstance(item, list):  # a video given as its frames' images, as LF takes it
                if not item:
                    problems.append("a video is an empty list of frames: give its file or its frames' image files")
                for frame in item:
                    problems += [f"a frame of a video: {p}" for p in _entry_problems("images", frame, spec, probed)]
            else:
                problems += _entry_problems(kind, item, spec, probed)
    return problems


def _without_system_turn(turns: Any, spec: Any) -> Any:
    """A sharegpt/openai turn list without its leading system turn (the converter makes it the system prompt)."""
    from engine.data.converters import OPENAI_TAGS, SHAREGPT_TAGS

    if spec.formatting not in ("sharegpt", "openai") or not isinstance(turns, list) or not turns \
            or not isinstance(turns[0], dict):
        return turns
    tags = {**(OPENAI_TAGS if spec.formatting == "openai" else SHAREGPT_TAGS), **spec.tags}
    return turns[1:] if turns[0].get(tags["role_tag"]) in (tags["system_tag"], "system") else turns


def _entry_problems(kind: str, item: Any, spec: Any, probed: list[int]) -> list[str]:
    """Why one media entry of a row cannot be used (a path, a dict naming one, or an embedded image)."""
    from engine.data.row_media import media_path
    from engine.multimodal.media import DEAD_LINK, NOT_REGULAR, absent, is_remote, probe

    problems: list[str] = []
    embedded = embedded_image(item) if kind == "images" else None
    if embedded is not None:  # bytes, a PIL image or a data URL in the row: read as LLaMA-Factory reads it
        if probed[0] < MAX_PROBED:
            probed[0] += 1
            reason = probe(kind, embedded)
            if reason:
                problems.append(f"an image embedded in the row {reason}: replace it")
        return problems
    path = _item_path(item)
    if not isinstance(path, str) or not path:
        problems.append(f"an entry of {KIND_WORD[kind]} is not a file path (embedded media are read for images "
                        "only): save it as a file and give its path")
        return problems
    if is_remote(path):
        problems.append(f"{KIND_WORD[kind]} {path} is a remote URL and downloads are off: save the file "
                        "and give its path (relative to dataset_dir)")
        return problems
    full = media_path(path, spec)
    if probed[0] >= MAX_PROBED:
        reason = None if full.is_file() else NOT_REGULAR if full.exists() else absent(full)
    else:
        probed[0] += 1
        reason = probe(kind, str(full))
    if reason:
        base = "media_dir" if spec.media_dir is not None else "dataset_dir, or set media_dir"
        problems.append(f"{KIND_WORD[kind]} file {full} {reason}" + (
            f": fix the path (relative paths are resolved against {base})" if reason == "is missing" else
            ": point the link at the file, or give the file's own path" if reason == DEAD_LINK else
            ": replace the file"))
    return problems


def _skipped_anyway(row: dict[str, Any], spec: Any, stage: str) -> bool:
    """Whether ``stage`` skips ``row`` for a reason that is not its media: it fails conversion with its media columns
    left out (a refused row, or one that converts, is checked)."""
    from engine.data.converters import CONVERTERS, finalize
    from engine.data.errors import RowError
    from engine.data.loader import STAGES
    from engine.data.null_turns import RefusedRow

    if stage not in STAGES or spec.formatting not in CONVERTERS:
        return False
    media = {media_column(spec, kind) for kind in PLACEHOLDERS} | {spec.columns.get(kind) for kind in PLACEHOLDERS}
    try:
        finalize(CONVERTERS[spec.formatting]({k: v for k, v in row.items() if k not in media}, spec), stage)
    except RefusedRow:
        return False
    except RowError:
        return True
    except Exception:  # noqa: BLE001 - the data layer reports what else goes wrong
        return False
    return False


def _model(cfg: Any) -> tuple[Any, dict[str, Any]]:
    """(media plugin, config.json) of the config's model when known here without loading anything, else (None, {})."""
    from engine.models.registry import read_local_config
    from engine.multimodal.plugins import PLUGINS, plugin_for
    from engine.multimodal.processor import media_config

    name = str(cfg.model.model_name_or_path or "").strip()
    if name.lower() == "demo-vlm":  # known without building it
        return PLUGINS["qwen2_vl"], {"vision_config": {}}
    path = Path(name).expanduser()
    if not name or not path.is_dir():
        return None, {}
    config = media_config(read_local_config(path) or {})
    if not any(config.get(key) for key in ("vision_config", "audio_config")):
        return None, {}
    return plugin_for(config.get("model_type"), cfg.model.template), config


def known_text_only(cfg: Any) -> bool:
    """Whether the config's model is known, without loading anything, to take text only, as the run's media context
    judges it (engine.multimodal.media_context): the text demo, or a model whose config.json (a local folder's, or
    the hub cache's) names no vision or audio tower. False when it is not known here (a hub id not in the cache, a
    config.json that cannot be read: the model check names that)."""
    from engine.hub_reach import HUB_ID, cached_hub_config
    from engine.models.registry import read_local_config
    from engine.multimodal.processor import media_config

    name = str(cfg.model.model_name_or_path or "").strip()
    if not name:
        return False
    if is_demo_name(name):
        return name.lower() != "demo-vlm"
    path = Path(name).expanduser()
    if not path.is_dir():
        try:
            cached = cached_hub_config(cfg, name) if HUB_ID.match(name) else None
        except Exception:  # noqa: BLE001 - an id the cache cannot hold: the model check names it
            cached = None
        if cached is None:
            return False
        path = Path(cached).parent
    config = read_local_config(path)
    return config is not None and not any(media_config(config).get(key) for key in ("vision_config", "audio_config"))


def _known_locally(cfg: Any) -> bool:
    """Whether the config's model is known without loading anything (the demo VLM, a local folder)."""
    name = str(cfg.model.model_name_or_path or "").strip()
    return is_demo_name(name) or (bool(name) and Path(name).expanduser().is_dir())


def model_media(cfg: Any) -> tuple[str, ...] | None:
    """The media kinds the config's model takes (() for a multimodal model no plugin serves yet); None when unknown
    here: a text-only model, or one that is not a local folder (nothing is built or downloaded for a check; the data
    map still refuses bad rows by name)."""
    from engine.multimodal.plugins import model_modalities

    plugin, config = _model(cfg)
    if plugin is None and config:  # a multimodal model no plugin serves yet: its rows' media are refused
        return ()
    return model_modalities(plugin, config) if plugin is not None else None


def check_media(cfg: Any) -> list[str]:
    """Every media problem of the config's datasets (empty when none; datasets that fail to load are skipped,
    the dataset checks report those)."""
    from engine.data.converters import detect_format
    from engine.data.errors import DatasetError
    from engine.data.hub import iter_local_rows
    from engine.data.loader import split_names
    from engine.data.registry import resolve_dataset

    names = [n for key in ("dataset", "eval_dataset") for n in split_names(getattr(cfg.data, key) or "")]
    allowed = model_media(cfg)
    plugin = _model(cfg)[0]
    problems: list[str] = []
    if getattr(cfg.data, "use_audio_in_video", False) and _known_locally(cfg) and (
            plugin is None or not plugin.batch_flags(MediaOptions(use_audio_in_video=True))):
        problems.append("`use_audio_in_video: true` lays a video's sound track into its frames for Qwen2.5-Omni and "
                        "Qwen3-Omni; this model does not take it. Remove it (give the audio as its own <audio>).")
    streaming = bool(getattr(cfg.data, "streaming", False))  # media rows do not stream, whatever the model
    # a text-only model: its media rows are refused (as the data loader refuses them) but in pre-training
    text_only = (allowed is None and not streaming and cfg.finetuning.stage not in UNREFUSED_STAGES
                 and known_text_only(cfg))
    if allowed is None and not streaming and not text_only:  # not known here, or pre-training (it reads the text)
        return problems
    with_media = False
    refused: dict[str, int] = {}  # dataset -> its rows with media, for a text-only model
    for name in dict.fromkeys(names):
        try:
            spec = resolve_dataset(name, cfg.data.dataset_dir)
            if getattr(cfg.data, "media_dir", None):
                spec = dataclasses.replace(spec, media_dir=Path(cfg.data.media_dir).expanduser().absolute())
            stream = iter_local_rows(spec)  # the rows its `split` selects
            rows = list(itertools.islice(stream, 1))  # the layout comes from the first row
            spec = detect_format(spec, rows) if rows else spec
            if not any(kind in spec.columns for kind in PLACEHOLDERS):
                continue  # no media columns: the rest of the file is not read
            rows += stream
        except DatasetError:
            continue
        if cfg.data.max_samples:
            rows = rows[:cfg.data.max_samples]
        here = any(_has_media(row, spec) for row in rows if isinstance(row, dict))
        if streaming and here:
            problems.append(media_refusal(name))
        if allowed is None:
            if text_only and here:  # rows the stage skips anyway (an untagged KTO set's) are never formatted
                count = sum(isinstance(row, dict) and _has_media(row, spec) and
                            not _skipped_anyway(row, spec, cfg.finetuning.stage) for row in rows)
                if count:
                    refused[name] = count
            continue
        found: list[str] = []
        probed = [0]
        for index, row in enumerate(rows):
            if isinstance(row, dict) and not _skipped_anyway(row, spec, cfg.finetuning.stage):
                problems_here = _row_problems(row, spec, probed, allowed, getattr(plugin, "why_not", ""))
                found += [f"Dataset `{name}` row {index}: {p}." for p in problems_here]
        videos = sum(bool(_media_items(row, media_column(spec, "videos"))) for row in rows
                     if isinstance(row, dict))
        if videos and "videos" in allowed and not has_torchvision() and not getattr(plugin, "pil_video", False):
            found.append(f"Dataset `{name}`: {counted(videos, 'row')} {'has' if videos == 1 else 'have'} video, and {TORCHVISION_FIX}.")
        if len(found) > MAX_LISTED:
            found = found[:MAX_LISTED] + [f"Dataset `{name}`: {len(found) - MAX_LISTED} more media problems."]
        problems += found
        with_media = with_media or here
    if with_media:
        problems += _stage_problems(cfg)
    if refused:
        count = sum(refused.values())
        problems.append(text_model_refusal(f"{counted(count, 'row')} of {', '.join(sorted(refused))} "
                                           f"{'has' if count == 1 else 'have'}", cfg.model.template))
    return problems


def _has_media(row: dict[str, Any], spec: Any) -> bool:
    return any(_media_items(row, media_column(spec, kind)) for kind in PLACEHOLDERS)


def _stage_problems(cfg: Any) -> list[str]:
    """The stage and preference-loss settings that cannot train on media rows."""
    from engine.multimodal.dataset import stage_problem

    problem = stage_problem(cfg.finetuning.stage, getattr(cfg.finetuning, "pref_loss", None))
    return [problem] if problem else []
