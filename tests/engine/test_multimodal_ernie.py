"""ERNIE-4.5-VL (``ernie4_5_vl_moe``): LLaMA-Factory's image text, and the model's inputs against transformers'
processor (token types, 3D rotary positions, MoE routing); SFT with LoRA, DPO and KTO, chat, prediction and export on
a tiny model; video refused with the reason."""

from __future__ import annotations

import copy
import json
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

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
from engine.multimodal.errors import MediaError  # noqa: E402
from engine.multimodal.plugins import PLUGINS, pack_arrays, plugin_for  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

_config = partial(sft_config, template="ernie_vl")

PLUGIN = PLUGINS["ernie_vl"]
START, IMAGE, END = "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_END|>"


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_vlm("ernie_vl")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_tiny_vlm("ernie_vl", tmp_path_factory.mktemp("ernie") / "ernie_vl")






def test_images_are_numbered_pictures_as_llamafactory_writes_them(tiny, tmp_path):
    """``Picture N:<|IMAGE_START|>`` + grid.prod() // merge_size**2 image tokens + ``<|IMAGE_END|>``, N counting the
    row's images across its messages; pixel values and grids are the image processor's."""
    _, processor = tiny
    assert plugin_for("ernie4_5_vl_moe") is PLUGIN and PLUGIN.modalities == ("images",)
    images = [image_file(tmp_path, "a.png"), image_file(tmp_path, "b.png", size=(40, 90))]
    messages = [{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "Them."},
                {"role": "user", "content": "And<image>?"}]
    expanded, arrays = PLUGIN.process(processor, messages, images, [], [], MediaOptions())
    reference = processor.image_processor([load_default(path) for path in images], return_tensors="np")
    counts = [int(np.prod(grid)) // 4 for grid in reference["image_grid_thw"]]
    assert counts[0] != counts[1]
    assert expanded[0]["content"] == f"Picture 1:{START}{IMAGE * counts[0]}{END}Who?"
    assert expanded[2]["content"] == f"AndPicture 2:{START}{IMAGE * counts[1]}{END}?"
    np.testing.assert_allclose(arrays["pixel_values"], reference["pixel_values"], rtol=1e-6, atol=1e-6)
    assert arrays["image_grid_thw"].tolist() == reference["image_grid_thw"].tolist()


def _rows(processor, tmp_path: Path) -> list[tuple[dict, dict | None]]:
    """(our collator feature, transformers' processor output for the same text) for a two-image row, a one-image
    row and a text row."""
    a, b = image_file(tmp_path, "a.png"), image_file(tmp_path, "b.png", size=(40, 90), color=(10, 200, 10))
    c = image_file(tmp_path, "c.png", size=(56, 56), color=(10, 10, 200))
    out = []
    for text, paths in (("<image>Compare<image>them.", [a, b]), ("What is <image>?", [c]), ("Say hi.", [])):
        expanded, arrays = PLUGIN.process(processor, [{"role": "user", "content": text}], paths, [], [],
                                          MediaOptions())
        ids = processor.tokenizer.encode(expanded[0]["content"], add_special_tokens=False)
        feature = {"input_ids": ids, "labels": ids, "attention_mask": [1] * len(ids), "mm_inputs": pack_arrays(arrays),
                   "mm_token_type_ids": PLUGIN.type_ids(processor, ids)}
        reference = None
        if paths:  # the processor expands one image token per image itself
            raw = text
            for number in range(1, len(paths) + 1):
                raw = raw.replace("<image>", f"Picture {number}:{START}{IMAGE}{END}", 1)
            reference = processor(text=[raw], images=[load_default(path) for path in paths], return_tensors="pt")
        out.append((feature, reference))
    return out


def _language_inputs(model, batch: dict) -> tuple[dict, torch.Tensor]:
    """(the position ids and MoE token types the language model receives, the logits) for one forward."""
    seen: dict = {}

    def grab(module, args, kwargs):
        seen.update(position_ids=kwargs["position_ids"], moe=kwargs.get("moe_mm_token_type_ids"))

    handle = model.model.language_model.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            logits = model(**batch).logits
    finally:
        handle.remove()
    return seen, logits


def test_the_model_gets_the_processors_positions_and_routing(tiny, tmp_path):
    """A padded batch of our rows gives the model, row by row, what transformers' processor gives it for the same
    text: the same ids, ``mm_token_type_ids`` and ``moe_mm_token_type_ids`` (start/end tokens counted as vision), so
    its language model gets the same 3D rotary positions and MoE routing types, and the logits are the same."""
    model, processor = tiny
    rows = _rows(processor, tmp_path)
    batch = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=PLUGIN.type_ids_key,
                          extra_types=PLUGIN.extra_type_ids(processor))([copy.deepcopy(f) for f, _ in rows])
    assert set(batch) >= {"mm_token_type_ids", "moe_mm_token_type_ids", "pixel_values", "image_grid_thw"}
    seen, logits = _language_inputs(model, {k: v for k, v in batch.items() if k != "labels"})
    for index, (feature, reference) in enumerate(rows):
        n = len(feature["input_ids"])
        if reference is None:  # the text row: no vision tokens, text positions
            assert not batch["moe_mm_token_type_ids"][index].any() and not batch["mm_token_type_ids"][index].any()
            assert seen["position_ids"][:, index, :n].tolist() == [list(range(n))] * 3
            continue
        assert reference["input_ids"][0].tolist() == feature["input_ids"]
        for key in ("mm_token_type_ids", "moe_mm_token_type_ids"):
            assert batch[key][index, :n].tolist() == reference[key][0].tolist(), key
        assert bool((reference["moe_mm_token_type_ids"] != reference["mm_token_type_ids"]).any())  # start/end
        alone, single = _language_inputs(model, dict(reference))
        assert torch.equal(seen["position_ids"][:, index, :n], alone["position_ids"][:, 0])
        assert torch.equal(seen["moe"][index, :n], alone["moe"][0])
        torch.testing.assert_close(logits[index, :n], single[0], rtol=1e-4, atol=1e-5)
    # the routing column matters: without it every token would go to the text experts
    _, unrouted = _language_inputs(model, {k: v for k, v in batch.items() if k not in ("labels",
                                                                                        "moe_mm_token_type_ids")})
    assert float((unrouted - logits).abs().max()) > 1e-4


def test_video_and_a_foreign_tokenizer_are_refused(tiny, tmp_path):
    _, processor = tiny
    with pytest.raises(MediaError, match="takes images, not videos .ERNIE-4.5-VL video is refused.*torchvision.*images "
                                         "train.; choose a model that does or drop those columns"):
        PLUGIN.process(processor, [{"role": "user", "content": "<video>What happens?"}], [], ["clip.mp4"], [],
                       MediaOptions())
    other = copy.copy(processor)
    other.image_start_token_id = processor.image_end_token_id  # a tokenizer whose <|IMAGE_START|> is another id
    with pytest.raises(MediaError, match=r"does not map <\|IMAGE_START\|>.*model's own tokenizer files"):
        PLUGIN.process(other, [{"role": "user", "content": "<image>Hi"}], [image_file(tmp_path, "a.png")], [], [],
                       MediaOptions())


def test_preference_batches_route_the_rows_and_the_kl_rows(tiny, tmp_path):
    """DPO/KTO batches carry ``moe_mm_token_type_ids`` for the rows and ``KL_moe_mm_token_type_ids`` for the KL rows
    (their own widths), by the processor's rule."""
    from engine.multimodal.plugin_ernie import moe_token_types
    from engine.multimodal.preference import MediaPreferenceCollator, token_types

    _, processor = tiny
    features = [feature for feature, _ in _rows(processor, tmp_path)]

    def text_collator(rows):
        width = max(len(r["input_ids"]) for r in rows) + 2
        ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in rows])
        kl = torch.tensor([r["input_ids"][:-1] + [0] * (width - len(r["input_ids"]) + 4) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long(), "KL_input_ids": kl,
                "KL_attention_mask": (kl != 0).long()}

    collate = MediaPreferenceCollator(text_collator=text_collator, pairwise=False,
                                      types=token_types(PLUGIN, processor),
                                      extra_types=PLUGIN.extra_type_ids(processor))
    batch = collate([{"input_ids": f["input_ids"], "mm_inputs": f["mm_inputs"]} for f in features])
    assert moe_token_types(processor) == {processor.image_token_id: 1, processor.image_start_token_id: 1,
                                          processor.image_end_token_id: 1, processor.video_token_id: 2,
                                          processor.video_start_token_id: 2, processor.video_end_token_id: 2}
    for prefix in ("", "KL_"):
        ids = batch[prefix + "input_ids"]
        expected = processor.create_moe_mm_token_type_ids(ids.numpy())
        assert batch[prefix + "moe_mm_token_type_ids"].tolist() == expected.tolist()
        assert batch[prefix + "mm_token_type_ids"].tolist() == processor.create_mm_token_type_ids(ids.tolist())






@pytest.fixture
def routed(monkeypatch):
    """Every language-model forward: (its batch and length, the MoE routing types it got or None)."""
    from transformers.models.ernie4_5_vl_moe import modeling_ernie4_5_vl_moe as modeling

    calls = []
    original = modeling.Ernie4_5_VLMoeTextModel.forward

    def forward(self, *args, **kwargs):
        embeds, moe = kwargs.get("inputs_embeds"), kwargs.get("moe_mm_token_type_ids")
        calls.append((tuple(embeds.shape[:2]), None if moe is None else moe.clone()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(modeling.Ernie4_5_VLMoeTextModel, "forward", forward)
    return calls


def _all_routed(calls: list) -> None:
    assert calls and all(moe is not None and tuple(moe.shape) == shape for shape, moe in calls), \
        [(shape, None if moe is None else tuple(moe.shape)) for shape, moe in calls]
    assert any(bool(moe.any()) for _, moe in calls)


def test_lora_trains_on_images_routed_and_leaves_the_towers_alone(folder, tmp_path, routed):
    """SFT with LoRA (``lora_target: all``) on image rows mixed with text rows: two finite steps, every forward routed
    by ``moe_mm_token_type_ids``; the adapter is on the language model only (not the vision tower or resampler)."""
    import math

    from safetensors import safe_open

    data = write_image_dataset(tmp_path / "data", with_text_row=True)
    assert main(["train", str(_config(tmp_path, folder, data))]) == 0
    losses = logged_losses(tmp_path / "out")
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    _all_routed(routed)
    with safe_open(str(tmp_path / "out" / "adapter_model.safetensors"), "pt") as handle:
        names = list(handle.keys())
    assert names and all(".language_model." in name for name in names), names[:5]


@pytest.mark.parametrize("stage", ["dpo", "kto"])
def test_preference_stages_train_routed(folder, tmp_path, stage, routed):
    """DPO (chosen and rejected rows share the images) and KTO (the KL rows get their own routing types)."""
    from test_multimodal_preference import _pairwise

    data = _pairwise(tmp_path / "data")
    extra = {"stage": "kto", "dataset": "colors_kto"} if stage == "kto" else {"stage": "dpo", "dataset": "pairs"}
    assert main(["train", str(_config(tmp_path, folder, data, per_device_train_batch_size=2, **extra))]) == 0
    assert len(logged_losses(tmp_path / "out")) == 2
    _all_routed(routed)


def test_chat_prediction_and_export(folder, tmp_path, capsys):
    """`lf-engine chat --image` answers; prediction batches (left-padded) carry the routing types on their tokens;
    a merged export keeps the processor files and chats with an image."""
    import yaml

    from engine.config import load_config
    from engine.models.loader import load_tokenizer
    from engine.multimodal import media_context
    from engine.multimodal.predict import batch_media_inputs, media_prompt_row
    from engine.templates import get_template

    png = image_file(tmp_path, "red.png", size=(56, 56))
    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"model_name_or_path": str(folder), "template": "ernie_vl", "do_sample": False,
                                    "max_new_tokens": 4}))
    assert main(["chat", str(chat), "--query", "What is it?", "--image", png]) == 0
    assert capsys.readouterr().out.strip()

    cfg = load_config(None, {"model_name_or_path": str(folder), "template": "ernie_vl"})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template("ernie_vl")
    template.fix_tokenizer(tokenizer)
    ctx = media_context(cfg, tokenizer)
    rows = [media_prompt_row({"images": [png]}, [{"role": "user", "content": "<image>What is it?"}], tokenizer,
                             template, ctx, 256),
            {"prompt_ids": template.encode_prompt(tokenizer, [{"role": "user", "content": "Say hi, please now."}])}]
    width = max(len(row["prompt_ids"]) for row in rows)
    extra = batch_media_inputs(rows, width, "cpu", None)
    ids = rows[0]["prompt_ids"]
    expected = ctx.processor.create_moe_mm_token_type_ids(np.array([ids]))[0].tolist()
    assert extra["moe_mm_token_type_ids"][0, width - len(ids):].tolist() == expected and sum(expected) > 0
    assert not extra["moe_mm_token_type_ids"][0, :width - len(ids)].any() and not extra["moe_mm_token_type_ids"][1].any()

    data = write_image_dataset(tmp_path / "data")
    assert main(["train", str(_config(tmp_path, folder, data, max_steps=1))]) == 0
    export = tmp_path / "export.yaml"
    export.write_text(yaml.safe_dump({"model_name_or_path": str(folder), "template": "ernie_vl",
                                      "adapter_name_or_path": str(tmp_path / "out"), "finetuning_type": "lora",
                                      "export_dir": str(tmp_path / "merged")}))
    assert main(["export", str(export)]) == 0
    saved = json.loads((tmp_path / "merged" / "processor_config.json").read_text())
    assert saved["processor_class"] == "Ernie4_5_VLMoeProcessor"
    assert saved["video_processor"]["video_processor_type"] == "Ernie4_5_VLMoeVideoProcessor"
    chat.write_text(yaml.safe_dump({"model_name_or_path": str(tmp_path / "merged"), "template": "ernie_vl",
                                    "do_sample": False, "max_new_tokens": 4}))
    assert main(["chat", str(chat), "--query", "What is it?", "--image", png]) == 0


def test_a_real_folders_timestamp_font_goes_with_its_processor_files(tmp_path):
    """ERNIE-4.5-VL's video processor loads the font its config names from the model folder: checkpoints and
    exports copy it with the processor files."""
    from engine.multimodal.processor import copy_processor_files

    source, target = tmp_path / "src", tmp_path / "dst"
    source.mkdir()
    target.mkdir()
    (source / "processor_config.json").write_text(json.dumps({
        "processor_class": "Ernie4_5_VLMoeProcessor",
        "video_processor": {"video_processor_type": "Ernie4_5_VLMoeVideoProcessor", "font": "Roboto-Regular.ttf",
                            "draw_on_frames": True}}))
    (source / "Roboto-Regular.ttf").write_bytes(b"font bytes")
    assert copy_processor_files(source, target) == ["processor_config.json", "Roboto-Regular.ttf"]
    assert (target / "Roboto-Regular.ttf").read_bytes() == b"font bytes"
