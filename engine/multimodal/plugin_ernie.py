"""ERNIE-4.5-VL (transformers' ``ernie4_5_vl_moe``) media, as LLaMA-Factory 0.9.5's ``ErnieVLPlugin`` writes them.

Each image becomes ``Picture N:<|IMAGE_START|>`` + one ``<|IMAGE_PLACEHOLDER|>`` per merged patch
(``image_grid_thw.prod() // merge_size**2``) + ``<|IMAGE_END|>``, N counting the row's images from 1.

The model takes two token-type inputs, both functions of the token ids, which transformers' processor builds beside
``input_ids`` (``processing_ernie4_5_vl_moe.py``): ``mm_token_type_ids`` (1 on the image tokens, 2 on the video
tokens), from which it computes its 3D rotary positions, and ``moe_mm_token_type_ids``, the same with the start / end
tokens of each image or video counted as vision, which sends those tokens to the vision experts of each MoE layer.
LLaMA-Factory 0.9.5 gives the model neither column (its collator computes the positions itself, and without the
routing column every token goes to the text experts); here both are given, as the processor gives them.

Video is refused: transformers' ERNIE video processor needs torchvision (and draws each frame's timestamp with a font
file); LLaMA-Factory 0.9.5 makes no ERNIE video row to match (with its transformers 5.6 and torchvision, tokenizing
mllm_video_demo fails: it calls the video processor with ``images=None``, which that processor refuses), and its count
``video_grid_thw.prod() // merge_size**2`` is twice the features the model makes of a video (the resampler merges
frame pairs).
"""

from __future__ import annotations

from typing import Any

from engine.multimodal.errors import MediaError

IMAGE_TOKENS = {"image_start_token": "<|IMAGE_START|>", "image_token": "<|IMAGE_PLACEHOLDER|>",
                "image_end_token": "<|IMAGE_END|>"}
"""The tokens LLaMA-Factory's ``ernie_vl`` template writes around and for each image (processor attribute -> text)."""

VIDEO_REFUSED = ("ERNIE-4.5-VL video is refused here: transformers' ERNIE video processor needs torchvision and a "
                 "timestamp font, and LLaMA-Factory 0.9.5 has no ERNIE video rows to match (its video call fails "
                 "with transformers 5.6, and its token count is twice the features the model makes of a video); "
                 "images train")
"""Why video is refused (said in the pre-flight check and by the data layer)."""


def check_tokens(processor: Any) -> None:
    """Refuse a tokenizer whose ERNIE image tokens are not the ones LLaMA-Factory writes.

    Raises:
        MediaError: naming the token and the fix.
    """
    tokenizer = processor.tokenizer
    for name, text in IMAGE_TOKENS.items():
        expected = getattr(processor, f"{name}_id", None)
        found = tokenizer.convert_tokens_to_ids(text)
        if found is None or found == tokenizer.unk_token_id or found != expected:
            raise MediaError(f"This ERNIE-4.5-VL tokenizer does not map {text} to the model's {name} ({expected}); "
                             "LLaMA-Factory's ernie_vl template writes that token for each image. Use the model's own "
                             "tokenizer files (tokenizer.json, tokenizer_config.json).")


def image_text(processor: Any, features: dict[str, Any], index: int) -> str:
    """The text of image ``index`` (0-based in its row) of the processed ``features``."""
    count = int(features["image_grid_thw"][index].prod()) // int(processor.image_processor.merge_size) ** 2
    return (f"Picture {index + 1}:{IMAGE_TOKENS['image_start_token']}{IMAGE_TOKENS['image_token'] * count}"
            f"{IMAGE_TOKENS['image_end_token']}")


def moe_token_types(processor: Any) -> dict[int, int]:
    """Token id -> ``moe_mm_token_type_ids`` value (other tokens 0), by the processor's own rule: its
    ``create_moe_mm_token_type_ids`` applied to the image and video tokens and their start / end tokens."""
    ids = [int(value) for name in ("image", "image_start", "image_end", "video", "video_start", "video_end")
           if (value := getattr(processor, f"{name}_token_id", None)) is not None]
    kinds = processor.create_moe_mm_token_type_ids([ids])[0]
    return {token: int(kind) for token, kind in zip(ids, kinds) if int(kind)}
