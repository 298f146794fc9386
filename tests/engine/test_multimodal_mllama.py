"""Llama 3.2 Vision (mllama): the plugin's inputs and the batches' cross-attention mask against transformers' processor
and functions; SFT with LoRA, DPO and KTO training, prediction and chat on a tiny model."""

from __future__ import annotations

import copy
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import (  # noqa: E402
    build_tiny_vlm,
    image_file,
    load_default,
    logged_losses,
    save_tiny_vlm,
    sft_config,
    write_image_dataset,
)

from engine.cli import main  # noqa: E402
from engine.multimodal.collator import MediaCollator  # noqa: E402
from engine.multimodal.plugins import PLUGINS, pack_arrays, plugin_for  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

_config = partial(sft_config, template="mllama")

PLUGIN = PLUGINS["mllama"]


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_vlm("mllama")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_tiny_vlm("mllama", tmp_path_factory.mktemp("mllama") / "mllama")






def test_placeholders_become_one_image_token_and_inputs_equal_the_processor(tiny, tmp_path):
    """Each <image> becomes one <|image|> (no expansion, as LLaMA-Factory writes it); the row's pixel values and
    aspect-ratio inputs are the processor's for the row's images."""
    _, processor = tiny
    assert plugin_for("mllama") is PLUGIN and PLUGIN.type_ids_key is None
    images = [image_file(tmp_path, "a.png"), image_file(tmp_path, "b.png", size=(40, 90))]
    messages = [{"role": "user", "content": "<image><image>Compare them."}]
    expanded, arrays = PLUGIN.process(processor, messages, images, [], [], MediaOptions())
    assert expanded[0]["content"] == "<|image|><|image|>Compare them."
    reference = processor(text=["<|image|><|image|>Compare them."], images=[[load_default(path) for path in images]],
                          return_tensors="np")
    assert sorted(arrays) == ["aspect_ratio_ids", "aspect_ratio_mask", "pixel_values"]
    assert arrays["pixel_values"].shape == (1, 2, 4, 3, 28, 28)
    for key in arrays:
        np.testing.assert_allclose(arrays[key], reference[key], rtol=1e-6, atol=1e-6)
    ids = processor.tokenizer.encode(expanded[0]["content"], add_special_tokens=False)
    assert ids.count(processor.image_token_id) == 2


def _features(processor, tmp_path: Path) -> tuple[list[dict], list[list]]:
    """Three rows: two images, one image mid-text, none (a mixed batch)."""
    a, b = image_file(tmp_path, "a.png"), image_file(tmp_path, "b.png", size=(40, 90), color=(10, 200, 10))
    c = image_file(tmp_path, "c.png", size=(30, 30), color=(10, 10, 200))
    rows = [("<image><image>Compare them.", [a, b]), ("What is <image> in the picture?", [c]), ("Say hi.", [])]
    features, images = [], []
    for text, paths in rows:
        expanded, arrays = PLUGIN.process(processor, [{"role": "user", "content": text}], paths, [], [], MediaOptions())
        ids = processor.tokenizer.encode(expanded[0]["content"], add_special_tokens=False)
        features.append({"input_ids": ids, "labels": ids, "attention_mask": [1] * len(ids),
                         "mm_inputs": pack_arrays(arrays)})
        images.append([load_default(path) for path in paths])
    return features, images


@pytest.mark.parametrize("side", ["right", "left"])
def test_collator_cross_attention_mask_equals_transformers(tiny, tmp_path, side):
    """A mixed batch: per-row images padded as the image processor pads a batch of them; the cross-attention mask is
    transformers' (get_cross_attention_token_mask, convert_sparse_cross_attention_mask_to_dense): with right padding
    of each row's own ids, as LLaMA-Factory builds it (then zeros to the padded length), with left padding of the
    padded ids, so it stays on the tokens; the model takes the batch."""
    import torch
    from transformers.models.mllama.processing_mllama import (
        convert_sparse_cross_attention_mask_to_dense,
        get_cross_attention_token_mask,
    )

    model, processor = tiny
    tokenizer = copy.deepcopy(processor.tokenizer)
    tokenizer.padding_side = side
    features, images = _features(processor, tmp_path)
    cross = PLUGIN.cross_attention(processor)
    batch = MediaCollator(tokenizer=tokenizer, type_ids_key=None, cross=cross)(copy.deepcopy(features))
    length = batch["input_ids"].shape[1]
    assert length % 8 == 0 and length > max(len(f["input_ids"]) for f in features)  # pad_to_multiple_of=8 pads
    reference = processor.image_processor(images, return_tensors="np")
    for key in ("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask"):
        np.testing.assert_allclose(batch[key].numpy(), reference[key], rtol=1e-6, atol=1e-6)
    image_id = processor.image_token_id
    if side == "right":
        rows = [f["input_ids"] for f in features]
        longest = max(len(ids) for ids in rows)
        expected = convert_sparse_cross_attention_mask_to_dense(
            [get_cross_attention_token_mask(ids, image_id) for ids in rows], reference["num_tiles"], 4, longest)
        expected = np.pad(expected, ((0, 0), (0, length - longest), (0, 0), (0, 0)))
    else:
        padded = batch["input_ids"].tolist()
        assert padded[0][-1] != tokenizer.pad_token_id
        expected = convert_sparse_cross_attention_mask_to_dense(
            [get_cross_attention_token_mask(ids, image_id) for ids in padded], reference["num_tiles"], 4, length)
    assert batch["cross_attention_mask"].shape == (3, length, 2, 4)
    assert np.array_equal(batch["cross_attention_mask"].numpy(), expected)
    assert batch["cross_attention_mask"][2].sum() == 0 and batch["cross_attention_mask"][0].sum() > 0
    with torch.no_grad():
        out = model(**{k: v for k, v in batch.items() if k != "labels"}, labels=batch["labels"])
    assert torch.isfinite(out.loss)
    # the image rows' logits equal their own, unbatched, with the image processor's inputs and transformers' mask
    for row in (0, 1) if side == "right" else ():
        ids = features[row]["input_ids"]
        alone = dict(processor.image_processor([images[row]], return_tensors="pt"))
        tiles = alone.pop("num_tiles")
        alone["cross_attention_mask"] = torch.from_numpy(convert_sparse_cross_attention_mask_to_dense(
            [get_cross_attention_token_mask(ids, image_id)], tiles, 4, len(ids)))
        with torch.no_grad():
            single = model(input_ids=torch.tensor([ids]), **alone).logits[0]
        torch.testing.assert_close(out.logits[row, :single.shape[0]], single, rtol=1e-4, atol=1e-4)


def test_text_only_batches_get_no_media_inputs(tiny, tmp_path):
    _, processor = tiny
    features, _ = _features(processor, tmp_path)
    batch = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=None,
                          cross=PLUGIN.cross_attention(processor))([features[2]])
    assert set(batch) == {"input_ids", "labels", "attention_mask"}






def test_lora_trains_on_images_and_leaves_the_vision_model_alone(folder, tmp_path):
    """SFT with LoRA (``lora_target: all``) on image rows mixed with text rows (batches of three, so some mix them):
    two steps with finite losses; the adapter touches the language model only (as LLaMA-Factory's mllama composite
    keys: vision_model and multi_modal_projector are left alone)."""
    import math

    from safetensors import safe_open

    data = write_image_dataset(tmp_path / "data", with_text_row=True)
    assert main(["train", str(_config(tmp_path, folder, data, save_strategy="no"))]) == 0
    losses = logged_losses(tmp_path / "out")
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    with safe_open(str(tmp_path / "out" / "adapter_model.safetensors"), "pt") as handle:
        names = list(handle.keys())
    assert names and all(".language_model." in name for name in names), names[:5]
    assert any("cross_attn" in name for name in names)  # the cross-attention layers are adapted


def test_packing_is_refused(folder, tmp_path, capsys):
    data = write_image_dataset(tmp_path / "data")
    assert main(["check", str(_config(tmp_path, folder, data, packing=True))]) == 2
    assert "cross-attends to the images" in capsys.readouterr().err


@pytest.mark.parametrize("stage", ["dpo", "kto"])
def test_preference_stages_train(folder, tmp_path, stage):
    """DPO (chosen and rejected rows share the images) and KTO (the KL rows get their own cross-attention mask)."""
    from test_multimodal_preference import _pairwise

    data = _pairwise(tmp_path / "data")
    extra = {"stage": "kto", "dataset": "colors_kto"} if stage == "kto" else {"stage": "dpo", "dataset": "pairs"}
    assert main(["train", str(_config(tmp_path, folder, data, per_device_train_batch_size=2, **extra))]) == 0
    assert len(logged_losses(tmp_path / "out")) == 2


def test_kto_collator_gives_the_kl_rows_their_own_mask(tiny, tmp_path):
    from engine.multimodal.preference import MediaPreferenceCollator

    _, processor = tiny
    features, _ = _features(processor, tmp_path)

    def text_collator(rows):
        import torch

        width = max(len(r["input_ids"]) for r in rows) + 2
        ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in rows])
        kl = torch.tensor([r["input_ids"][:-1] + [0] * (width - len(r["input_ids"]) + 4) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long(), "KL_input_ids": kl,
                "KL_attention_mask": (kl != 0).long()}

    collate = MediaPreferenceCollator(text_collator=text_collator, pairwise=False,
                                      cross=PLUGIN.cross_attention(processor), type_ids_key=None)
    batch = collate([{"input_ids": f["input_ids"], "mm_inputs": f["mm_inputs"]} for f in features])
    assert batch["cross_attention_mask"].shape[:2] == batch["input_ids"].shape
    assert batch["KL_cross_attention_mask"].shape[:2] == batch["KL_input_ids"].shape
    assert batch["pixel_values"].shape[0] == 3


def test_chat_and_prediction_prompts_carry_the_cross_attention_mask(folder, tmp_path, capsys):
    """`lf-engine chat --image` answers; prediction batches (left-padded) get the prompts' mask."""
    import yaml

    from engine.config import load_config
    from engine.models.loader import load_tokenizer
    from engine.multimodal import media_context
    from engine.multimodal.predict import batch_media_inputs, media_prompt_row
    from engine.templates import get_template

    png = image_file(tmp_path, "red.png", size=(56, 56))
    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"model_name_or_path": str(folder), "template": "mllama", "do_sample": False,
                                    "max_new_tokens": 4}))
    assert main(["chat", str(chat), "--query", "What is it?", "--image", png]) == 0
    assert capsys.readouterr().out.strip()
    cfg = load_config(None, {"model_name_or_path": str(folder), "template": "mllama"})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template("mllama")
    template.fix_tokenizer(tokenizer)
    ctx = media_context(cfg, tokenizer)
    rows = [media_prompt_row({"images": [png]}, [{"role": "user", "content": "<image>What is it?"}], tokenizer,
                             template, ctx, 256),
            {"prompt_ids": template.encode_prompt(tokenizer, [{"role": "user", "content": "Say hi, please."}])}]
    width = max(len(row["prompt_ids"]) for row in rows)
    extra = batch_media_inputs(rows, width, "cpu", None)
    mask = extra["cross_attention_mask"]
    assert mask.shape == (2, width, 1, 4) and mask[1].sum() == 0
    image_at = width - len(rows[0]["prompt_ids"]) + rows[0]["prompt_ids"].index(ctx.processor.image_token_id)
    assert mask[0, :image_at].sum() == 0 and bool(mask[0, image_at:, 0, 0].all())
    assert extra["pixel_values"].shape[:2] == (2, 1)
