"""MiniCPM-V 4.6 (``minicpmv4_6``) images as LLaMA-Factory 0.9.5's ``MiniCPMV4_6Plugin`` feeds them: the placeholder
layout written out by hand, the downsample mode (processor setting and ``DOWNSAMPLE_MODE``), the refusals, batches
of NaViT-packed pixel values, and a tiny model through train (SFT, DPO, KTO), chat and export.

The rows' ids were also compared with LLaMA-Factory's own (tests/golden/compare_rows.py, by hand, with LLaMA-Factory
run under transformers 5.25): identical on mllm_demo and on image DPO and KTO rows.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm, image_file, logged_losses, save_tiny_vlm, sft_config, write_image_dataset  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.multimodal.collator import MediaCollator  # noqa: E402
from engine.multimodal.errors import MediaError  # noqa: E402
from engine.multimodal.plugins import JOIN_LAST, PLUGINS, pack_arrays, plugin_for, unpack_arrays  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

_config = partial(sft_config, template="minicpm_v_4_6")

PLUGIN = PLUGINS["minicpm_v_4_6"]
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
T = "<|image_pad|>"


@pytest.fixture(autouse=True)
def _no_env_mode(monkeypatch):
    monkeypatch.delenv("DOWNSAMPLE_MODE", raising=False)


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_vlm("minicpmv4_6")


@pytest.fixture(scope="module")
def tiny_4x():
    return build_tiny_vlm("minicpmv4_6_4x")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_tiny_vlm("minicpmv4_6", tmp_path_factory.mktemp("minicpm") / "model")




def _expand(processor, messages, images, opts=None):
    return PLUGIN.process(processor, messages, images, [], [], opts or MediaOptions())


def test_the_model_type_is_served_by_its_plugin(tiny):
    model, _ = tiny
    assert plugin_for(model.config.model_type) is PLUGIN and PLUGIN.modalities == ("images",)


def test_layout_written_out_by_hand(tiny, tmp_path):
    """scale_resolution 112, patch 14: a 224 px square is cut into 2 x 2 slices of 112 px, each and the 112 px base
    view 8 x 8 patches = 4 tokens (16x); a 40 x 36 image is upscaled to one 112 px view with no slices."""
    _, processor = tiny
    big, small = image_file(tmp_path, "big.png", (224, 224)), image_file(tmp_path, "small.png", (40, 36))
    messages = [{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "A."},
                {"role": "user", "content": "And<image>"}]
    expanded, arrays = _expand(processor, messages, [big, small])
    view = "<image>" + T * 4 + "</image>"
    one = "<slice>" + T * 4 + "</slice>"
    assert expanded[0]["content"] == "<image_id>0</image_id>" + view + one * 2 + "\n" + one * 2 + "Who?"
    assert expanded[2]["content"] == "And<image_id>1</image_id>" + view
    assert expanded[1] == messages[1]
    assert arrays["target_sizes"].tolist() == [[8, 8]] * 6
    assert arrays["pixel_values"].shape == (1, 3, 14, 6 * 64 * 14)
    assert arrays[JOIN_LAST].tolist() == ["pixel_values"]


def test_downsample_mode_from_the_environment(tiny, tmp_path, monkeypatch):
    """DOWNSAMPLE_MODE=4x counts a quarter of the patches per token (the processor's sizes stay), and every forward is
    told the mode; anything but 16x / 4x is refused."""
    _, processor = tiny
    big = image_file(tmp_path, "big.png", (224, 224))
    monkeypatch.setenv("DOWNSAMPLE_MODE", "4x")
    expanded, arrays = _expand(processor, [{"role": "user", "content": "<image>"}], [big])
    one = "<slice>" + T * 16 + "</slice>"
    assert expanded[0]["content"] == "<image_id>0</image_id><image>" + T * 16 + "</image>" + one * 2 + "\n" + one * 2
    assert PLUGIN.batch_flags(MediaOptions(), processor) == {"downsample_mode": "4x"}
    monkeypatch.setenv("DOWNSAMPLE_MODE", "")  # empty: unset
    assert PLUGIN.batch_flags(MediaOptions(), processor) == {"downsample_mode": "16x"}
    monkeypatch.setenv("DOWNSAMPLE_MODE", "8x")
    with pytest.raises(MediaError, match="DOWNSAMPLE_MODE environment variable is '8x'.*'16x'.*'4x'"):
        _expand(processor, [{"role": "user", "content": "<image>"}], [big])


def test_a_4x_processor_and_a_16x_environment_are_refused_where_the_model_cannot_merge(tiny_4x, tmp_path,
                                                                                          monkeypatch):
    _, processor = tiny_4x
    image = image_file(tmp_path, "wide.png", (100, 50))  # sized for 4x: 12 x 22 patches
    expanded, arrays = _expand(processor, [{"role": "user", "content": "<image>"}], [image])
    assert arrays["target_sizes"].tolist() == [[12, 22]]
    assert expanded[0]["content"].count(T) == 12 * 22 // 4
    assert PLUGIN.batch_flags(MediaOptions(), processor) == {"downsample_mode": "4x"}
    monkeypatch.setenv("DOWNSAMPLE_MODE", "16x")
    with pytest.raises(MediaError, match="not multiples of 4.*unset DOWNSAMPLE_MODE"):
        _expand(processor, [{"role": "user", "content": "<image>"}], [image])


def test_image_id_and_slices_follow_the_processor_settings(tmp_path):
    model, processor = build_tiny_vlm("minicpmv4_6")
    processor.default_use_image_id = False
    processor.slice_mode = False
    expanded, _ = _expand(processor, [{"role": "user", "content": "<image>"}],
                          [image_file(tmp_path, "big.png", (224, 224))])
    assert expanded[0]["content"] == "<image>" + T * 4 + "</image>"


def test_images_keep_their_size(tiny, tmp_path, caplog):
    """As LLaMA-Factory gives them: image_max_pixels does not shrink them first (a warning says so)."""
    _, processor = tiny
    big = image_file(tmp_path, "big.png", (224, 224))
    messages = [{"role": "user", "content": "<image>"}]
    default, _ = _expand(processor, messages, [big])
    with caplog.at_level(logging.WARNING, logger="engine.multimodal.plugin_minicpm"):
        small, _ = _expand(processor, messages, [big], MediaOptions(image_max_pixels=56 * 56))
    assert small == default and "slice" in default[0]["content"]


def test_exif_orientation_is_applied_as_transformers_loads_files(tiny, tmp_path):
    from PIL import Image

    _, processor = tiny
    path = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[274] = 6  # rotate 90 degrees: a 300 x 100 file shows as 100 x 300
    Image.new("RGB", (300, 100), (10, 200, 10)).save(path, exif=exif)
    _, arrays = _expand(processor, [{"role": "user", "content": "<image>"}], [str(path)])
    out = processor.image_processor([Image.open(path).transpose(Image.Transpose.ROTATE_270)], return_tensors="np")
    assert arrays["target_sizes"].tolist() == out["target_sizes"].tolist()
    assert arrays["target_sizes"][0][0] > arrays["target_sizes"][0][1]  # taller than wide


def test_video_and_mixed_rows_are_refused_with_the_reason(tiny, tmp_path):
    _, processor = tiny
    image = image_file(tmp_path, "a.png", (56, 56))
    with pytest.raises(MediaError, match="Video is refused for MiniCPM-V 4.6: LLaMA-Factory 0.9.5's plugin fails"):
        PLUGIN.process(processor, [{"role": "user", "content": "<video>"}], [], ["clip.mp4"], [], MediaOptions())
    with pytest.raises(MediaError, match="images and videos in the same row"):
        PLUGIN.process(processor, [{"role": "user", "content": "<image><video>"}], [image], ["clip.mp4"], [],
                       MediaOptions())
    with pytest.raises(MediaError, match=r"2 <image> placeholders but 1 image file;"):
        _expand(processor, [{"role": "user", "content": "<image><image>"}], [image])


def _rows(processor, tmp_path):
    from engine.templates import get_template

    template = get_template("minicpm_v_4_6")
    tokenizer = processor.tokenizer
    rows = []
    for content, images in (("<image>What is it?", [image_file(tmp_path, "a.png", (224, 224))]),
                            ("Say hi.", []),
                            ("<image>and<image>", [image_file(tmp_path, "b.png", (40, 36), (10, 10, 200)),
                                                   image_file(tmp_path, "c.png", (90, 200), (10, 200, 10))])):
        messages = [{"role": "user", "content": content}, {"role": "assistant", "content": "Red."}]
        expanded, arrays = PLUGIN.process(processor, messages, images, [], [], MediaOptions())
        ids = template.encode_prompt(tokenizer, expanded[:1]) + tokenizer.encode("Red.", add_special_tokens=False)
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": ids,
                     "mm_inputs": pack_arrays(arrays) if arrays else None})
    return rows


def test_a_batch_joins_the_pixel_values_along_the_sequence_and_each_row_sees_its_own_images(tiny, tmp_path):
    """The model reads pixel_values[:1]: a batch is one NaViT sequence of all its rows' images, their target sizes in
    row order. Each row's logits equal its logits alone (a row with another row's images would differ)."""
    import torch

    model, processor = tiny
    rows = _rows(processor, tmp_path)
    collate = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=None,
                            flags=PLUGIN.batch_flags(MediaOptions(), processor))
    batch = collate(rows)
    own = [unpack_arrays(row["mm_inputs"]) for row in rows if row["mm_inputs"]]
    np.testing.assert_array_equal(batch["pixel_values"].numpy(), np.concatenate([a["pixel_values"] for a in own], -1))
    np.testing.assert_array_equal(batch["target_sizes"].numpy(), np.concatenate([a["target_sizes"] for a in own]))
    assert batch["pixel_values"].shape[:3] == (1, 3, 14) and len(batch["target_sizes"]) == 5 + 1 + 3
    assert batch["downsample_mode"] == "16x" and JOIN_LAST not in batch
    with torch.no_grad():
        out = model(**batch)
        assert math.isfinite(float(out.loss))
        for index in (0, 2):
            alone = collate([rows[index]])
            logits = model(**alone).logits[0]
            length = len(rows[index]["input_ids"])
            torch.testing.assert_close(out.logits[index, :length], logits[:length], rtol=1e-4, atol=1e-4)
        wrong = dict(batch, target_sizes=batch["target_sizes"].flip(0))  # the images in the wrong rows
        assert not torch.allclose(model(**wrong).logits[0], out.logits[0], atol=1e-4)






def test_lora_trains_on_images_and_leaves_the_vision_tower_and_merger_alone(folder, tmp_path):
    from safetensors import safe_open

    data = write_image_dataset(tmp_path / "data", with_text_row=True)
    assert main(["train", str(_config(tmp_path, folder, data))]) == 0
    losses = logged_losses(tmp_path / "out")
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    with safe_open(str(tmp_path / "out" / "adapter_model.safetensors"), "pt") as handle:
        names = list(handle.keys())
    assert names and all(".language_model." in name for name in names), names[:5]


@pytest.mark.parametrize("stage", ["dpo", "kto"])
def test_preference_stages_train(folder, tmp_path, stage):
    from test_multimodal_preference import _pairwise

    data = _pairwise(tmp_path / "data")
    extra = {"stage": "kto", "dataset": "colors_kto"} if stage == "kto" else {"stage": "dpo", "dataset": "pairs"}
    assert main(["train", str(_config(tmp_path, folder, data, per_device_train_batch_size=2, **extra))]) == 0
    assert len(logged_losses(tmp_path / "out")) == 2


def test_chat_with_an_image_then_export_reloads_in_transformers(folder, tmp_path, capsys):
    import torch
    import yaml
    from transformers import AutoModelForImageTextToText

    png = image_file(tmp_path, "red.png", (120, 80))
    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"model_name_or_path": str(folder), "template": "minicpm_v_4_6",
                                    "do_sample": False, "max_new_tokens": 3}))
    assert main(["chat", str(chat), "--query", "What is it?", "--image", png]) == 0
    assert capsys.readouterr().out.strip()
    export = tmp_path / "export.yaml"
    export.write_text(yaml.safe_dump({"model_name_or_path": str(folder), "template": "minicpm_v_4_6",
                                      "export_dir": str(tmp_path / "merged")}))
    assert main(["export", str(export)]) == 0
    saved = json.loads((tmp_path / "merged" / "processor_config.json").read_text())
    assert saved["processor_class"] == "MiniCPMV4_6Processor"
    video = saved["video_processor"]  # transformers' own class, with the settings the processor reads at init
    assert video["video_processor_type"] == "MiniCPMV4_6VideoProcessor" and video["downsample_mode"] == "16x"
    assert video["slice_mode"] is True
    from engine.config import build_config
    from engine.multimodal.processor import load_media_processor

    processor = load_media_processor(build_config({"model_name_or_path": str(tmp_path / "merged")}).model)
    model = AutoModelForImageTextToText.from_pretrained(tmp_path / "merged").eval()
    expanded, arrays = _expand(processor, [{"role": "user", "content": "<image>What?"}], [png])
    ids = processor.tokenizer(expanded[0]["content"], return_tensors="pt", add_special_tokens=False)
    pixels = {key: torch.from_numpy(arrays[key]) for key in ("pixel_values", "target_sizes")}
    with torch.no_grad():
        out = model.generate(**ids, **pixels, downsample_mode="16x", max_new_tokens=2, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]


@pytest.mark.skipif(not (SHARED / "mllm_video_demo.json").is_file(), reason="shared data absent")
def test_check_refuses_video_rows_with_the_reason(folder, tmp_path, capsys):
    config = _config(tmp_path, folder, SHARED, dataset="mllm_video_demo")
    assert main(["check", str(config)]) == 2
    err = capsys.readouterr().err
    assert "has video input" in err and "LLaMA-Factory 0.9.5's plugin fails on every video row" in err
