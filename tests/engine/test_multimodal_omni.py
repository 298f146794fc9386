"""Qwen2.5-Omni / Qwen3-Omni media (the qwen2_omni and qwen3_omni plugins), as LLaMA-Factory 0.9.5's Qwen2OmniPlugin
writes them: images, audio, video and ``use_audio_in_video``; the thinker trains on them and chats with them.

The rows equal LLaMA-Factory's own on its mllm_demo, mllm_audio_demo, mllm_video_demo and mllm_video_audio_demo (by
hand: tests/golden/compare_rows.py); here the rules are checked on small generated media, offline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_multimodal_plugins import _write_video, _write_wav  # noqa: E402
from tinyvlms import build_tiny_vlm, save_tiny_vlm  # noqa: E402

from engine.multimodal import media  # noqa: E402
from engine.multimodal.errors import MediaError  # noqa: E402
from engine.multimodal.plugins import PLUGINS, plugin_for  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

PLUGIN = PLUGINS["qwen2_omni"]


@pytest.fixture(scope="module")
def omni():
    return build_tiny_vlm("qwen2_5_omni")


def _tone(path: Path, seconds: float) -> str:
    rate = 16000
    _write_wav(path, [np.sin(np.arange(int(rate * seconds)) / 10) * 0.25], rate)
    return str(path)


def _png(path: Path, size=(100, 60)) -> str:
    from PIL import Image

    Image.new("RGB", size, (200, 30, 30)).save(path)
    return str(path)


def _ids(processor, messages) -> list[int]:
    return processor.tokenizer("".join(m["content"] for m in messages), add_special_tokens=False)["input_ids"]


def test_the_omni_model_types_and_templates_take_this_plugin():
    assert plugin_for("qwen2_5_omni") is plugin_for("qwen2_5_omni_thinker") is PLUGIN
    assert plugin_for("qwen3_omni_moe_thinker") is plugin_for("qwen3_omni_moe") is PLUGINS["qwen3_omni"]
    assert PLUGIN.modalities == ("images", "videos", "audios")
    # LLaMA-Factory's mm_plugin tokens of the qwen2_omni template, and its defaults for the qwen3_omni ones
    assert PLUGIN.image_wrap == PLUGIN.video_wrap == ("<|vision_bos|>", "<|vision_eos|>")
    assert PLUGIN.audio_wrap == ("<|audio_bos|>", "<|audio_eos|>")
    assert PLUGINS["qwen3_omni"].video_wrap == ("<|vision_start|>", "<|vision_end|>")
    assert PLUGINS["qwen3_omni"].audio_wrap == ("<|audio_start|>", "<|audio_end|>")


def test_a_whole_omni_checkpoint_reads_its_thinker_config():
    """A Qwen2.5-Omni checkpoint (thinker, talker, token2wav) keeps its towers under thinker_config."""
    from engine.multimodal.processor import media_config

    whole = {"model_type": "qwen2_5_omni", "thinker_config": {"model_type": "qwen2_5_omni_thinker",
                                                              "vision_config": {"depth": 1}, "audio_config": {"d": 1}}}
    config = media_config(whole)
    assert config["vision_config"] and config["audio_config"] and config["model_type"] == "qwen2_5_omni"
    assert media_config({"model_type": "qwen2_vl", "vision_config": {}}) == {"model_type": "qwen2_vl",
                                                                             "vision_config": {}}


def test_audio_token_counts_follow_llamafactory():
    """LLaMA-Factory's counts from the mask's feature frames: Qwen2.5-Omni's two stride-2 steps, and Qwen3-Omni's
    13 tokens per full 100-frame window plus the rest's (as its Qwen2OmniPlugin computes them)."""
    import torch

    frames = torch.tensor([100, 150, 250, 3000, 99])
    assert PLUGIN.audio_tokens(frames) == [25, 37, 62, 750, 25]
    assert PLUGINS["qwen3_omni"].audio_tokens(frames) == [13, 20, 33, 390, 13]


@pytest.mark.parametrize(("family", "plugin", "tokens"), [("qwen2_5_omni", "qwen2_omni", 25),
                                                          ("qwen3_omni", "qwen3_omni", 13)])
def test_image_and_audio_expansion_and_features_equal_the_processor(tmp_path, family, plugin, tokens):
    """Images: the grid's tokens between the vision bos/eos tokens; audio: LLaMA-Factory's count between the audio
    bos/eos tokens, with Whisper features padded to 30 s and their mask. Tokens and features equal what transformers'
    Qwen2_5OmniProcessor / Qwen3OmniMoeProcessor makes of the same media."""
    model, processor = build_tiny_vlm(family)
    plugin = PLUGINS[plugin]
    image, audio = _png(tmp_path / "a.png"), _tone(tmp_path / "a.wav", 1.0)
    messages = [{"role": "user", "content": "<image>Look and<audio>listen."}]
    expanded, arrays = plugin.process(processor, messages, [image], [], [audio], MediaOptions())
    ours = _ids(processor, expanded)
    raw = (plugin.image_wrap[0] + processor.image_token + plugin.image_wrap[1] + "Look and" + plugin.audio_wrap[0]
           + processor.audio_token + plugin.audio_wrap[1] + "listen.")
    loaded = media.load_image(image, MediaOptions().image_max_pixels, MediaOptions().image_min_pixels)
    reference = processor(text=[raw], images=[loaded], audio=[media.read_audio(audio, 16000)], return_tensors="np")
    assert ours == reference["input_ids"][0].tolist()
    assert sum(t == processor.audio_token_id for t in ours) == tokens  # 1 s: 100 frames
    assert sum(t == processor.image_token_id for t in ours) > 2
    for key in ("pixel_values", "image_grid_thw"):
        np.testing.assert_allclose(arrays[key], reference[key], rtol=1e-5, atol=1e-5)
    # padded to the 30 s window, as LLaMA-Factory pads it (Qwen3-Omni's processor pads to the longest audio only, so
    # there the last frame, whose window reaches into the padding, differs; the audio tower reads the masked frames)
    width = reference["input_features"].shape[-1]
    assert arrays["input_features"].shape[-1] == arrays["feature_attention_mask"].shape[-1] == 3000
    np.testing.assert_allclose(arrays["input_features"][..., :width - 1], reference["input_features"][..., :width - 1],
                               rtol=1e-5, atol=1e-5)
    assert arrays["feature_attention_mask"][:, :width].tolist() == reference["feature_attention_mask"].tolist()
    assert arrays["feature_attention_mask"][:, width:].sum() == 0
    assert "num_audio_tokens" not in arrays


def test_video_expansion_and_time_scale(omni, tmp_path):
    """A video: Qwen2-VL's grid tokens between the vision tokens, the video processor's pixels, and
    ``video_second_per_grid`` = temporal patch / sampled frame rate (LLaMA-Factory's)."""
    model, processor = omni
    video = _write_video(tmp_path / "v.mp4")  # 3 s at 10 fps, 64x48: 6 frames at 2 fps
    expanded, arrays = PLUGIN.process(processor, [{"role": "user", "content": "<video>What?"}], [], [video], [],
                                      MediaOptions())
    clip = media.read_video(video, 2.0, 128, 256 * 256, 16 * 16)
    reference = processor.video_processor(videos=[clip.frames], return_tensors="np")
    assert arrays["video_grid_thw"].tolist() == reference["video_grid_thw"].tolist() == [[3, 4, 4]]
    np.testing.assert_allclose(arrays["pixel_values_videos"], reference["pixel_values_videos"], rtol=1e-5, atol=1e-5)
    assert arrays["video_second_per_grid"].tolist() == [1.0]  # 2 frames per grid at 2 frames a second
    assert expanded[0]["content"] == "<|vision_bos|>" + "<|VIDEO|>" * 12 + "<|vision_eos|>What?"


def test_use_audio_in_video_interleaves_2_second_chunks(omni, tmp_path):
    """With use_audio_in_video each <video> takes its <audio> as sound track, in one block
    <|vision_bos|><|audio_bos|> (video chunk, audio chunk)... <|audio_eos|><|vision_eos|>, chunks of 2 s at 25 rotary
    positions a second; the <audio> goes. The chunks are transformers' (replace_video_with_audio_token), the wrap
    LLaMA-Factory's."""
    model, processor = omni
    video, audio = _write_video(tmp_path / "v.mp4"), _tone(tmp_path / "a.wav", 2.5)
    messages = [{"role": "user", "content": "<video><audio>What happens?"}, {"role": "assistant", "content": "Sun."}]
    opts = MediaOptions(use_audio_in_video=True)
    expanded, arrays = PLUGIN.process(processor, messages, [], [video], [audio], opts)
    # video: 3 grids of 4 tokens at 0, 25, 50 positions; audio: 62 tokens (250 frames) at 0..61; chunk = 50
    block = ("<|vision_bos|><|audio_bos|>" + "<|VIDEO|>" * 8 + "<|AUDIO|>" * 50 + "<|VIDEO|>" * 4 + "<|AUDIO|>" * 12
             + "<|audio_eos|><|vision_eos|>")
    assert expanded[0]["content"] == block + "What happens?" and expanded[1] == messages[1]
    chunks = processor.replace_video_with_audio_token(
        {"video_grid_thw": arrays["video_grid_thw"], "video_second_per_grid": arrays["video_second_per_grid"]}, 0,
        {"num_audio_tokens": [62]}, 0, position_id_per_seconds=25, seconds_per_chunk=2.0)
    assert block == "<|vision_bos|>" + chunks + "<|vision_eos|>"
    assert {"pixel_values_videos", "input_features", "feature_attention_mask"} <= set(arrays)
    # without the flag: each placeholder on its own
    plain, _ = PLUGIN.process(processor, messages, [], [video], [audio], MediaOptions())
    assert plain[0]["content"].startswith("<|vision_bos|>" + "<|VIDEO|>" * 12 + "<|vision_eos|><|audio_bos|>")
    assert PLUGIN.batch_flags(opts) == {"use_audio_in_video": True} and PLUGIN.batch_flags(MediaOptions()) == {}


def test_use_audio_in_video_refuses_unpaired_rows(omni, tmp_path):
    model, processor = omni
    video, audio = _write_video(tmp_path / "v.mp4"), _tone(tmp_path / "a.wav", 1.0)
    opts = MediaOptions(use_audio_in_video=True)
    with pytest.raises(MediaError, match="must be followed by its <audio>"):
        PLUGIN.process(processor, [{"role": "user", "content": "<audio><video>Hm?"}], [], [video], [audio], opts)
    with pytest.raises(MediaError, match="each video takes one audio file"):
        PLUGIN.process(processor, [{"role": "user", "content": "<video><video><audio>Hm?"}], [], [video, video],
                       [audio], opts)
    # a row with video and no audio keeps the plain layout, as in LLaMA-Factory
    plain, _ = PLUGIN.process(processor, [{"role": "user", "content": "<video>Hm?"}], [], [video], [], opts)
    assert plain[0]["content"].startswith("<|vision_bos|><|VIDEO|>")


def test_the_model_gets_llamafactorys_positions_for_video_with_audio(omni, tmp_path):
    """The collator passes use_audio_in_video with each batch; the thinker's positions are then those LLaMA-Factory's
    collator builds (get_rope_index with use_audio_in_video and the audio frame counts)."""
    import torch

    from engine.multimodal.collator import MediaCollator
    from engine.multimodal.plugins import pack_arrays

    model, processor = omni
    video, audio = _write_video(tmp_path / "v.mp4"), _tone(tmp_path / "a.wav", 2.5)
    opts = MediaOptions(use_audio_in_video=True)
    rows = []
    for text in ("<video><audio>What happens?", "<video><audio>Say it again, please."):
        expanded, arrays = PLUGIN.process(processor, [{"role": "user", "content": text}], [], [video], [audio], opts)
        ids = _ids(processor, expanded)
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": ids, "mm_inputs": pack_arrays(arrays)})
    batch = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=None, flags=PLUGIN.batch_flags(opts))(rows)
    assert batch["use_audio_in_video"] is True and batch["attention_mask"][0].sum() < batch["attention_mask"][1].sum()
    positions, _ = model.model.get_rope_index(
        input_ids=batch["input_ids"], image_grid_thw=None, video_grid_thw=batch["video_grid_thw"],
        attention_mask=batch["attention_mask"], use_audio_in_video=True,
        audio_seqlens=batch["feature_attention_mask"].sum(1), second_per_grids=batch["video_second_per_grid"])
    with torch.no_grad():
        ours = model(**batch).logits
        theirs = model(**{k: v for k, v in batch.items() if k != "use_audio_in_video"}, position_ids=positions,
                       use_audio_in_video=True).logits
        unflagged = model(**{k: v for k, v in batch.items() if k != "use_audio_in_video"}).logits
    mask = batch["attention_mask"].bool()
    torch.testing.assert_close(ours[mask], theirs[mask])
    assert not torch.allclose(ours[mask], unflagged[mask])  # the flag changes the positions


def test_packing_is_refused_for_omni_models():
    from engine.models.packing_support import packing_problem

    for model_type in ("qwen2_5_omni", "qwen2_5_omni_thinker", "qwen3_omni_moe", "qwen3_omni_moe_thinker"):
        problem = packing_problem({"model_type": model_type})
        assert problem and "`packing: false`" in problem and "LLaMA-Factory" in problem


def test_use_audio_in_video_is_a_data_key():
    from engine.config import build_config

    cfg = build_config({"model_name_or_path": "x", "use_audio_in_video": True})
    assert cfg.data.use_audio_in_video is True
    assert MediaOptions.from_data_args(cfg.data).use_audio_in_video is True


def _omni_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True)
    image, audio = _png(folder / "a.png", (56, 56)), _tone(folder / "a.wav", 2.5)
    video = _write_video(folder / "v.mp4", seconds=2.0)
    rows = [
        {"messages": [{"role": "user", "content": "<image>What color?"}, {"role": "assistant", "content": "Red."}],
         "images": [Path(image).name]},
        {"messages": [{"role": "user", "content": "<audio>What sound?"}, {"role": "assistant", "content": "A tone."}],
         "audios": [Path(audio).name]},
        {"messages": [{"role": "user", "content": "<video><audio>What happens?"},
                      {"role": "assistant", "content": "It gets brighter."}],
         "videos": [Path(video).name], "audios": [Path(audio).name]},
    ]
    (folder / "omni.json").write_text(json.dumps(rows * 2))
    info = {"omni": {"file_name": "omni.json", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "images": "images", "videos": "videos", "audios": "audios"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                              "assistant_tag": "assistant"}}}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    return folder


@pytest.mark.parametrize(("family", "template"), [("qwen2_5_omni", "qwen2_omni"), ("qwen3_omni", "qwen3_omni_nothink")])
def test_tiny_omni_trains_with_lora_and_chats(tmp_path, capsys, family, template):
    """Image, audio and video-with-audio rows (use_audio_in_video) train a tiny Qwen2.5-Omni (Qwen3-Omni) thinker two
    steps with LoRA on the language model only; `chat --image` / `--audio` answer; packing is refused."""
    import yaml
    from safetensors import safe_open

    from engine.cli import main

    model = save_tiny_vlm(family, tmp_path / "omni")
    data = _omni_dataset(tmp_path / "data")
    config = {"model_name_or_path": str(model), "template": template, "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "omni", "dataset_dir": str(data),
              "cutoff_len": 1024, "use_audio_in_video": True, "output_dir": str(tmp_path / "out"),
              "per_device_train_batch_size": 3, "learning_rate": 0.01, "max_steps": 2, "logging_steps": 1,
              "save_strategy": "no", "plot_loss": False, "report_to": "none"}
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", str(tmp_path / "train.yaml")]) == 0
    losses = [json.loads(line)["loss"] for line in (tmp_path / "out" / "events.jsonl").read_text().splitlines()
              if '"event": "log"' in line]
    assert len(losses) == 2 and all(np.isfinite(losses))
    with safe_open(str(tmp_path / "out" / "adapter_model.safetensors"), "pt") as adapter:
        keys = list(adapter.keys())
    assert keys and all("language_model" in key for key in keys)
    assert not any("visual" in key or "audio_tower" in key for key in keys)  # merger_list too (Qwen3-Omni)

    chat = {"model_name_or_path": str(model), "adapter_name_or_path": str(tmp_path / "out"), "template": template,
            "do_sample": False, "max_new_tokens": 4}
    (tmp_path / "chat.yaml").write_text(yaml.safe_dump(chat))
    capsys.readouterr()
    assert main(["chat", str(tmp_path / "chat.yaml"), "--query", "What is it?", "--image", str(data / "a.png")]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["chat", str(tmp_path / "chat.yaml"), "--query", "Hear?", "--audio", str(data / "a.wav")]) == 0
    assert capsys.readouterr().out.strip()

    (tmp_path / "packed.yaml").write_text(yaml.safe_dump({**config, "packing": True,
                                                          "output_dir": str(tmp_path / "packed")}))
    assert main(["train", str(tmp_path / "packed.yaml")]) != 0
    assert "`packing` is not available for this model" in capsys.readouterr().err


def test_preference_and_prediction_batches_carry_use_audio_in_video(omni, tmp_path):
    """DPO/KTO batches and prediction's generate() inputs get the flag too, as LLaMA-Factory's pairwise / KTO
    collators build positions with it (without it the interleaved rows get other rotary positions)."""
    from types import SimpleNamespace

    from engine.multimodal.plugins import pack_arrays
    from engine.multimodal.predict import batch_media_inputs
    from engine.multimodal.preference import build_preference_collator

    _, processor = omni
    video, audio = _write_video(tmp_path / "v.mp4"), _tone(tmp_path / "a.wav", 2.5)
    opts = MediaOptions(use_audio_in_video=True)
    expanded, arrays = PLUGIN.process(processor, [{"role": "user", "content": "<video><audio>Hm?"}], [], [video],
                                      [audio], opts)
    ids = _ids(processor, expanded)
    ctx = SimpleNamespace(plugin=PLUGIN, processor=processor, options=opts)
    trainer = SimpleNamespace(data_collator=lambda rows: {})
    collator = build_preference_collator(trainer, SimpleNamespace(media=ctx), "dpo")
    assert collator([{"mm_inputs": pack_arrays(arrays)}])["use_audio_in_video"] is True
    extra = batch_media_inputs([{"prompt_ids": ids, "mm_inputs": arrays, "flags": PLUGIN.batch_flags(opts)}],
                               len(ids), "cpu", None)
    assert extra["use_audio_in_video"] is True and "video_grid_thw" in extra


def test_use_audio_in_video_on_another_model_is_refused():
    """The key only changes Qwen-Omni rows; on another model it would do nothing, so the check refuses it."""
    from engine.config import build_config
    from engine.multimodal.checks import check_media

    cfg = build_config({"model_name_or_path": "demo-vlm", "use_audio_in_video": True})
    assert any("`use_audio_in_video: true`" in p and "Remove it" in p for p in check_media(cfg))
    assert not check_media(build_config({"model_name_or_path": "demo-vlm"}))
