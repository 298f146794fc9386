"""Stand-in media for batches without some kind of media, on runs of more than one process (LLaMA-Factory's guard,
taken one kind further).

Under FSDP and DeepSpeed ZeRO-3 a vision (or audio) tower's parameters are sharded, and each rank gathers them from
all the others each time the tower runs. When one rank's batch has an image and another's has none, only the first
runs the tower, the ranks' collectives stop pairing up, and the run dies ("Received data size doesn't match expected
size" over gloo) or hangs (NCCL). LLaMA-Factory's collator therefore gives a batch without images or videos one blank
64 x 64 white image, and a batch without audio (on a model that hears) 0.1 s of silence. Here each kind the model
takes is checked on its own: a batch without images gets the image, one without videos a two-frame white clip, one
without audio the silence. Models such as Qwen2-VL run their tower once for a batch's images and once more for its
videos, so with LLaMA-Factory's rule a rank whose batch held both kinds still ran the tower once more than a rank
whose batch held one. The stand-ins' soft tokens go after the batch's first row, outside attention (mask 0; their
own position run in packed rows) and outside the loss (labels -100): the loss and gradients stay those of the real
tokens, and packed batches report them so that they are not counted as tokens seen (engine.train.stand_in_count).
They make a batch longer than its rows by their own tokens, beyond ``cutoff_len`` and a token budget by that much.
On one process nothing could mismatch, so nothing is added there (LLaMA-Factory adds its stand-in there too).

With Qwen-Omni's ``use_audio_in_video`` the stand-in video comes with one second of silence as its sound track (each
video must have one). Not covered: families whose video needs torchvision where it is not installed (no video is read
there at all).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from engine.data.collator import IGNORE
from engine.multimodal.errors import MediaError
from engine.multimodal.plugins import PLACEHOLDERS, model_modalities

logger = logging.getLogger(__name__)

STAND_IN_SIZE = 64
STAND_IN_AUDIO_SAMPLES = 1600


@dataclass(frozen=True)
class StandIn:
    """One kind's stand-in: its tokens, token types and processed inputs, and the input keys that show a row has
    media of that kind."""

    kind: str  # "images", "videos" or "audios"
    ids: list[int]
    type_ids: list[int]
    arrays: dict[str, Any] = field(repr=False)
    marks: tuple[str, ...]
    covers: tuple[str, ...] = ()  # further kinds it stands in for (Qwen-Omni's video with its audio)

    def present(self, row: dict[str, Any]) -> bool:
        """Whether a row's media inputs already hold this kind."""
        return any(key in row for key in self.marks)


def stand_ins_for_ranks(ctx: Any, tokenizer: Any, model: Any) -> list[StandIn] | None:
    """The stand-ins of a multi-process run's media collator (None on one process)."""
    from engine.ranks import world_size

    if world_size() <= 1:
        return None
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    stand_ins = build_stand_ins(ctx, tokenizer, getattr(base, "config", None))
    logger.info("%d processes: a batch without %s gets a stand-in (as LLaMA-Factory does), outside attention and the "
                "loss, so every rank runs the same towers.", world_size(),
                " or without ".join(s.kind.removesuffix("s") if s.kind != "audios" else "audio" for s in stand_ins))
    return stand_ins


def build_stand_ins(ctx: Any, tokenizer: Any, config: Any = None) -> list[StandIn]:
    """The stand-ins of a model's plugin (``ctx``: engine.multimodal.dataset.MediaContext), one per kind the model
    takes (its config without an audio tower: no audio)."""
    kinds = model_modalities(ctx.plugin, config) if config is not None else ctx.plugin.modalities
    out = []
    for kind in ("images", "videos", "audios"):
        if kind not in kinds:
            continue
        try:
            out.append(_stand_in(ctx, tokenizer, kind))
        except MediaError as err:  # video without torchvision: then no video row is read in this run either
            logger.warning("No stand-in %s for batches without one (%s); should rows with one train beside rows "
                           "without, the ranks' towers would run unevenly.", kind[:-1], err)
    return out


def _white_clip() -> bytes:
    """Two white 64 x 64 frames, one second, as an MPEG-4 file in memory."""
    import io

    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=2)
        stream.width = stream.height = STAND_IN_SIZE
        stream.pix_fmt = "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.full((STAND_IN_SIZE, STAND_IN_SIZE, 3), 255, np.uint8), format="rgb24")
        for _ in range(2):
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def _stand_in(ctx: Any, tokenizer: Any, kind: str) -> StandIn:
    import numpy as np
    from PIL import Image

    media: dict[str, list[Any]] = {"images": [], "videos": [], "audios": []}
    content, covers = PLACEHOLDERS[kind], ()
    if kind == "images":
        media[kind] = [Image.new("RGB", (STAND_IN_SIZE, STAND_IN_SIZE), (255, 255, 255))]
    elif kind == "videos":
        media[kind] = [_white_clip()]
        if ctx.options.use_audio_in_video:  # Qwen-Omni: each video comes with its sound track, one second of silence
            media["audios"] = [np.zeros(int(ctx.options.audio_sampling_rate), dtype=np.float32)]
            content, covers = PLACEHOLDERS["videos"] + PLACEHOLDERS["audios"], ("audios",)
    else:
        media[kind] = [np.zeros(STAND_IN_AUDIO_SAMPLES, dtype=np.float32)]
    messages, arrays = ctx.plugin.process(ctx.processor, [{"role": "user", "content": content}],
                                          media["images"], media["videos"], media["audios"], ctx.options)
    ids = ctx.plugin.prefix_ids(ctx.processor, len(media["images"])) + list(
        tokenizer.encode(messages[0]["content"], add_special_tokens=False))
    type_ids = ctx.plugin.type_ids(ctx.processor, ids) if ctx.plugin.type_ids_key else []
    marks = tuple(key for key in arrays if key.startswith("pixel_values")) if kind != "audios" else tuple(arrays)
    return StandIn(kind=kind, ids=ids, type_ids=list(type_ids), arrays=arrays, marks=marks, covers=covers)


def _missing(arrays: list[dict[str, Any]], stand_ins: list[StandIn]) -> tuple[list[StandIn], list[dict[str, Any]]]:
    """The stand-ins a batch's rows (their media inputs) lack, and the rows' media inputs with the lacking kinds'
    put on the first row (unchanged when none is lacking)."""
    from engine.multimodal.collator import join_numpy

    missing: list[StandIn] = []
    covered: set[str] = set()
    for stand_in in stand_ins:
        if stand_in.kind not in covered and not any(stand_in.present(row) for row in arrays):
            missing.append(stand_in)
            covered.update(stand_in.covers)
    if not missing or not arrays:
        return [], arrays
    media = dict(arrays[0])
    for stand_in in missing:  # after the first row's own inputs of the same name, as its tokens come after its own
        shared = [key for key in stand_in.arrays if key in media]
        joined = join_numpy([{key: media[key] for key in shared}, {key: stand_in.arrays[key] for key in shared}])
        media.update({**stand_in.arrays, **joined})
    return missing, [media, *arrays[1:]]


def add_stand_ins(features: list[dict[str, Any]], arrays: list[dict[str, Any]], type_ids: list[Any],
                  stand_ins: list[StandIn]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any], int]:
    """The batch's rows, media inputs and token types with the stand-ins its rows lack put after its first row's
    tokens, and how many tokens they added (unchanged, 0, when it lacks none)."""
    missing, arrays = _missing(arrays, stand_ins)
    if not missing or not features:
        return features, arrays, type_ids, 0
    first = dict(features[0])
    real = len(first["input_ids"])
    ids = [token for stand_in in missing for token in stand_in.ids]
    first["input_ids"] = list(first["input_ids"]) + ids
    first["labels"] = list(first.get("labels", first["input_ids"][:real])) + [IGNORE] * len(ids)
    first["attention_mask"] = list(first.get("attention_mask") or [1] * real) + [0] * len(ids)
    if "position_ids" in first:  # packed rows: a run of its own, so no packed example reaches it
        first["position_ids"] = list(first["position_ids"]) + list(range(len(ids)))
    types = list(type_ids)
    if types and any(stand_in.type_ids for stand_in in missing):
        base = list(types[0]) if types[0] is not None else [0] * real
        types[0] = base + [t for stand_in in missing for t in (stand_in.type_ids or [0] * len(stand_in.ids))]
    return [first, *features[1:]], arrays, types, len(ids)


def add_stand_ins_to_batch(batch: dict[str, Any], arrays: list[dict[str, Any]], stand_ins: list[StandIn],
                           pad_id: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """For a DPO/KTO batch TRL's collator built (right-padded tensors, ``KL_`` rows beside the rows): the stand-ins
    its rows (``arrays``, in the batch's row order) lack, put after the first row's tokens of each part, outside
    attention and the completion. Returns the rows' media inputs with the stand-ins' on the first row, and per part
    prefix where the first row's stand-in tokens end (empty when none was added)."""
    import torch

    missing, arrays = _missing(arrays, stand_ins)
    if not missing:
        return arrays, {}
    ids = torch.tensor([token for stand_in in missing for token in stand_in.ids])
    reach = {}
    for prefix in ("", "KL_"):
        input_ids, mask = batch.get(prefix + "input_ids"), batch.get(prefix + "attention_mask")
        if input_ids is None or mask is None:
            continue
        real = int(mask[0].sum())
        for name, fill in (("input_ids", pad_id), ("attention_mask", 0), ("completion_mask", 0)):
            key = prefix + name
            if key not in batch:
                continue
            value = batch[key]
            wider = torch.cat([value, value.new_full((value.shape[0], len(ids)), fill)], dim=1)
            if name == "input_ids":
                wider[0, real:real + len(ids)] = ids.to(value.dtype)
            batch[key] = wider
        reach[prefix] = real + len(ids)
    return arrays, reach
