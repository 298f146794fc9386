"""Stand-in media for batches without media on multi-process runs (LLaMA-Factory's guard against ranks whose sharded
towers run a different number of times): the batch gains a blank image (and silence for models that hear) after its
first row, and the model's loss on the real tokens is unchanged; on one process nothing is added; a real 2-process
FSDP2 run over rows with and without images, which died with a gloo collective mismatch before, trains."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm  # noqa: E402

from engine.multimodal.collator import MediaCollator  # noqa: E402
from engine.multimodal.dataset import MediaContext  # noqa: E402
from engine.multimodal.plugins import pack_arrays, plugin_for  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402
from engine.multimodal.stand_in import add_stand_ins, build_stand_ins, stand_ins_for_ranks  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _text_rows(tokenizer, plugin, processor) -> list[dict]:
    rows = []
    for prompt, answer in (("Say hello to the world.", "Hello, world!"), ("Count to three.", "One two three.")):
        prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
        answer_ids = tokenizer.encode(answer, add_special_tokens=False)
        row = {"input_ids": prompt_ids + answer_ids, "labels": [-100] * len(prompt_ids) + answer_ids,
               "attention_mask": [1] * (len(prompt_ids) + len(answer_ids)), "mm_inputs": pack_arrays({})}
        if plugin.type_ids_key:
            row["mm_token_type_ids"] = plugin.type_ids(processor, row["input_ids"])
        rows.append(row)
    return rows


@pytest.mark.parametrize("family,marks", [
    ("qwen2_vl", {"pixel_values", "image_grid_thw", "pixel_values_videos"}),  # token types and M-RoPE
    ("paligemma", {"pixel_values"}),  # image tokens before the text (its prefix)
    ("mllama", {"pixel_values", "cross_attention_mask"}),  # cross-attention
    ("qwen2_audio", {"input_features", "feature_attention_mask"}),  # audio only
    ("qwen2_5_omni", {"pixel_values", "pixel_values_videos", "input_features"}),  # three stand-ins at once
    ("ernie_vl", {"pixel_values", "image_grid_thw"}),  # MoE routing by token type; its video is refused
    ("minicpmv4_6", {"pixel_values", "target_sizes"}),  # the batch's images joined into one sequence
])
@pytest.mark.parametrize("side", ["right", "left"])
def test_stand_ins_leave_the_loss_of_a_text_batch_unchanged(family, marks, side):
    model, processor = build_tiny_vlm(family)
    tokenizer = processor.tokenizer
    tokenizer.padding_side = side
    plugin = plugin_for(model.config.model_type)
    ctx = MediaContext(plugin, processor, MediaOptions())
    stand_ins = build_stand_ins(ctx, tokenizer, model.config)
    assert stand_ins and all(stand_in.ids for stand_in in stand_ins)
    rows = _text_rows(tokenizer, plugin, processor)
    common = {"tokenizer": tokenizer, "type_ids_key": plugin.type_ids_key, "cross": plugin.cross_attention(processor),
              "extra_types": plugin.extra_type_ids(processor)}
    plain = MediaCollator(**common)(rows)
    padded = MediaCollator(**common, stand_ins=stand_ins)(rows)
    assert marks <= set(padded) and not marks & set(plain)
    added = sum(len(stand_in.ids) for stand_in in stand_ins)
    assert int(padded["attention_mask"].sum()) == int(plain["attention_mask"].sum())  # outside attention
    assert int((padded["labels"] != -100).sum()) == int((plain["labels"] != -100).sum())  # outside the loss
    assert padded["input_ids"].shape[1] >= len(rows[0]["input_ids"]) + added
    with torch.no_grad():
        want = model(**plain).loss
        got = model(**padded).loss
    assert torch.isfinite(got) and torch.allclose(got, want, rtol=1e-5, atol=1e-6), (float(got), float(want))


def test_a_batch_with_media_gets_no_stand_in_and_packed_rows_get_their_own_run():
    model, processor = build_tiny_vlm("qwen2_vl")
    plugin = plugin_for(model.config.model_type)
    visual, _ = build_stand_ins(MediaContext(plugin, processor, MediaOptions()), processor.tokenizer, model.config)
    rows = [{"input_ids": [1, 2, 3], "labels": [1, 2, 3], "position_ids": [0, 1, 2]}]
    with_image = [{"pixel_values": visual.arrays["pixel_values"]}]
    assert add_stand_ins(rows, with_image, [None], [visual])[0] is rows
    out, arrays, types, added = add_stand_ins(rows, [{}], [None], [visual])
    assert added == len(visual.ids)
    n = len(visual.ids)
    assert out[0]["position_ids"] == [0, 1, 2, *range(n)]  # a new packed example: no real row reaches it
    assert out[0]["attention_mask"] == [1, 1, 1] + [0] * n and out[0]["labels"][3:] == [-100] * n
    assert set(arrays[0]) == set(visual.arrays) and types[0] == [0, 0, 0, *visual.type_ids]
    assert rows[0]["input_ids"] == [1, 2, 3]  # the caller's row is not changed


def test_packed_batches_do_not_count_the_stand_ins_as_tokens_seen():
    """Packed batches carry no attention mask, so transformers counts the ids that are not padding: the collator
    gives the stand-ins' count, and the trainer leaves it out (and the key never reaches the model)."""
    from types import SimpleNamespace

    from transformers import Trainer

    from engine.train.stand_in_count import STAND_IN_TOKENS, StandInTokensMixin

    model, processor = build_tiny_vlm("qwen2_vl")
    tokenizer = processor.tokenizer
    plugin = plugin_for(model.config.model_type)
    stand_ins = build_stand_ins(MediaContext(plugin, processor, MediaOptions()), tokenizer, model.config)
    rows = _text_rows(tokenizer, plugin, processor)
    packed = [dict(row, position_ids=list(range(len(row["input_ids"])))) for row in rows]
    batch = MediaCollator(tokenizer=tokenizer, type_ids_key=plugin.type_ids_key, stand_ins=stand_ins)(packed)
    assert "attention_mask" not in batch and int(batch[STAND_IN_TOKENS]) == sum(len(s.ids) for s in stand_ins)
    real = sum(len(row["input_ids"]) for row in rows)

    class Base:
        def _track_num_input_tokens(self, inputs):  # transformers' count of a mask-free batch
            self.state.num_input_tokens_seen += int((inputs["input_ids"] != tokenizer.pad_token_id).sum())

        def _prepare_inputs(self, inputs):
            return inputs

    class Counting(StandInTokensMixin, Base):
        args = SimpleNamespace(include_num_input_tokens_seen="non_padding", device="cpu")
        state = SimpleNamespace(num_input_tokens_seen=0)
        accelerator = SimpleNamespace(gather=lambda tensor: tensor)
        processing_class = processor

    trainer = Counting()
    trainer._track_num_input_tokens(batch)
    assert trainer.state.num_input_tokens_seen == real
    assert STAND_IN_TOKENS not in trainer._prepare_inputs(batch)
    assert hasattr(Trainer, "_track_num_input_tokens") and hasattr(Trainer, "_prepare_inputs")  # the hooks exist
    with torch.no_grad():
        model(**{k: v for k, v in trainer._prepare_inputs(batch).items()})  # the model takes the rest


def test_only_runs_of_more_than_one_process_get_stand_ins(monkeypatch):
    model, processor = build_tiny_vlm("qwen2_vl")
    ctx = MediaContext(plugin_for(model.config.model_type), processor, MediaOptions())
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert stand_ins_for_ranks(ctx, processor.tokenizer, model) is None
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert [s.kind for s in stand_ins_for_ranks(ctx, processor.tokenizer, model)] == ["images", "videos"]
    omni = build_tiny_vlm("qwen2_5_omni")
    paired = MediaContext(plugin_for(omni[0].config.model_type), omni[1], MediaOptions(use_audio_in_video=True))
    stand_ins = build_stand_ins(paired, omni[1].tokenizer, omni[0].config)
    assert [(s.kind, s.covers) for s in stand_ins] == [("images", ()), ("videos", ("audios",)), ("audios", ())]


def test_qwen_omni_with_audio_in_video_gets_a_video_with_its_sound_track(tmp_path):
    """With `use_audio_in_video` every video comes with its audio: the stand-in video brings one second of silence
    (and then no separate audio stand-in is needed); a first row with a real audio clip keeps its features first.
    The loss of the real tokens is unchanged either way."""
    import numpy as np

    model, processor = build_tiny_vlm("qwen2_5_omni")
    tokenizer = processor.tokenizer
    plugin = plugin_for(model.config.model_type)
    opts = MediaOptions(use_audio_in_video=True)
    ctx = MediaContext(plugin, processor, opts)
    stand_ins = build_stand_ins(ctx, tokenizer, model.config)
    common = {"tokenizer": tokenizer, "type_ids_key": plugin.type_ids_key, "flags": plugin.batch_flags(opts)}
    text = _text_rows(tokenizer, plugin, processor)
    messages, arrays = plugin.process(processor, [{"role": "user", "content": "<audio>What is it?"}], [], [],
                                      [np.full(8000, 0.1, dtype=np.float32)], opts)
    ids = tokenizer.encode(messages[0]["content"] + " Noise.", add_special_tokens=False)
    heard = {"input_ids": ids, "labels": [-100] * (len(ids) - 2) + ids[-2:], "attention_mask": [1] * len(ids),
             "mm_inputs": pack_arrays(arrays)}
    for rows, clips in (([text[0], text[1]], 1), ([heard, text[0]], 2)):
        plain = MediaCollator(**common)(rows)
        padded = MediaCollator(**common, stand_ins=stand_ins)(rows)
        assert padded["input_features"].shape[0] == clips  # the stand-in video's sound track, after any real clip
        assert "pixel_values_videos" in padded and "pixel_values" in padded
        if clips == 2:
            assert torch.equal(padded["input_features"][0], plain["input_features"][0])
        with torch.no_grad():
            want = model(**plain).loss
            got = model(**padded).loss
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (float(got), float(want))


def test_each_kind_is_stood_in_for_on_its_own_and_real_media_keep_their_loss(tmp_path):
    """Qwen2-VL runs its tower once for images and once for videos: a batch with a real image gets only the stand-in
    video (and the loss of its real tokens, image included, is unchanged); a batch with only a video gets the image."""
    from PIL import Image

    model, processor = build_tiny_vlm("qwen2_vl")
    tokenizer = processor.tokenizer
    plugin = plugin_for(model.config.model_type)
    ctx = MediaContext(plugin, processor, MediaOptions())
    stand_ins = build_stand_ins(ctx, tokenizer, model.config)
    Image.new("RGB", (56, 56), (200, 30, 30)).save(tmp_path / "red.png")
    messages, arrays = plugin.process(processor, [{"role": "user", "content": "<image>What colour?"}],
                                      [str(tmp_path / "red.png")], [], [], ctx.options)
    ids = tokenizer.encode(messages[0]["content"] + " Red.", add_special_tokens=False)
    row = {"input_ids": ids, "labels": [-100] * (len(ids) - 2) + ids[-2:], "attention_mask": [1] * len(ids),
           "mm_inputs": pack_arrays(arrays), "mm_token_type_ids": plugin.type_ids(processor, ids)}
    text = _text_rows(tokenizer, plugin, processor)
    common = {"tokenizer": tokenizer, "type_ids_key": plugin.type_ids_key}
    plain = MediaCollator(**common)([text[0], row])
    padded = MediaCollator(**common, stand_ins=stand_ins)([text[0], row])
    assert torch.equal(padded["pixel_values"], plain["pixel_values"])  # the real image only: no stand-in image
    assert "pixel_values_videos" in padded and "pixel_values_videos" not in plain
    with torch.no_grad():
        assert torch.allclose(model(**padded).loss, model(**plain).loss, rtol=1e-5, atol=1e-6)
    video_only = add_stand_ins([text[0]], [{"pixel_values_videos": padded["pixel_values_videos"].numpy()}], [None],
                               stand_ins)[1]
    assert "image_grid_thw" in video_only[0]


def test_fsdp2_over_rows_with_different_media_trains_on_two_cpu_ranks(tmp_path):
    """Two rows, one per rank at every step, in one run of four steps whose pairs alternate. An image row beside a
    text row (steps 1 and 3): before the stand-ins, one rank's vision blocks gathered their shards while the other
    gathered its first decoder layer's, and gloo stopped with "Received data size doesn't match expected size". A
    row with an image and a video beside a row with an image (steps 2 and 4): the tower runs twice on the first rank,
    which LLaMA-Factory's rule (a stand-in only for a batch with neither) leaves mismatched. (One launch for both
    pairs: each launch of two ranks costs about 10 s of the suite.)"""
    from engine.multimodal.stand_in import _white_clip

    rows = json.loads((REPO / "examples" / "data" / "demo_vlm.json").read_text())
    image_row = dict(rows[0], images=[str(REPO / "examples" / "data" / p) for p in rows[0]["images"]], videos=[])
    text_row = {"messages": [{"role": "user", "content": "Say hello."},
                             {"role": "assistant", "content": "Hello there, friend."}], "images": [], "videos": []}
    (tmp_path / "clip.mp4").write_bytes(_white_clip())
    image_and_video_row = dict(image_row, messages=[{"role": "user", "content": "<image><video>Same colour?"},
                                                    {"role": "assistant", "content": "No."}],
                               videos=[str(tmp_path / "clip.mp4")])
    # in data order, rank 0 takes rows 0, 2, 4, ... and rank 1 rows 1, 3, 5, ...
    (tmp_path / "mix.json").write_text(json.dumps([text_row, image_row, image_and_video_row, image_row] * 2))
    info = json.loads((REPO / "examples" / "data" / "dataset_info.json").read_text())["demo_vlm"]
    info = dict(info, file_name="mix.json", columns=dict(info["columns"], videos="videos"))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"mix": info}))
    out = tmp_path / "out"
    config = {"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "stage": "sft", "do_train": True,
              "finetuning_type": "full", "freeze_vision_tower": False, "dataset": "mix", "dataset_dir": str(tmp_path),
              "cutoff_len": 512, "image_max_pixels": 12544, "output_dir": str(out), "logging_steps": 1,
              "save_strategy": "no", "fsdp": "full_shard auto_wrap",
              "fsdp_config": str(REPO / "examples" / "fsdp" / "fsdp2.json"), "per_device_train_batch_size": 1,
              "max_steps": 4, "learning_rate": 1e-5, "disable_shuffling": True, "ddp_timeout": 120,
              "report_to": "none"}
    (tmp_path / "fsdp_vlm.yaml").write_text(json.dumps(config))  # JSON is YAML
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(tmp_path / "fsdp_vlm.yaml")]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gets a stand-in (as LLaMA-Factory does)" in proc.stderr
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines() if x.strip()]
    losses = [e["loss"] for e in events if e["event"] == "log"]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)


def _completion_logps(model, batch) -> torch.Tensor:
    inputs = {k: v for k, v in batch.items() if k not in ("completion_mask", "labels") and not k.startswith("KL_")}
    with torch.no_grad():
        logits = model(**inputs).logits[:, :-1].float()
    targets = batch["input_ids"][:, 1:]
    logps = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
    return (logps * batch["completion_mask"][:, 1:]).sum(-1)


@pytest.mark.parametrize("family", ["qwen2_vl", "mllama", "qwen2_5_omni"])
def test_dpo_batches_get_stand_ins_outside_attention_and_completion(family):
    """TRL's own DPO collator, then the media collator: the chosen and rejected rows' completion log-probs (what DPO's
    loss is made of) are unchanged by the stand-ins."""
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    from engine.multimodal.preference import MediaPreferenceCollator, token_types

    model, processor = build_tiny_vlm(family)
    tokenizer = processor.tokenizer
    plugin = plugin_for(model.config.model_type)
    stand_ins = build_stand_ins(MediaContext(plugin, processor, MediaOptions()), tokenizer, model.config)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    features = [{"prompt_ids": encode(p), "chosen_ids": encode(c), "rejected_ids": encode(r), "mm_inputs": b""}
                for p, c, r in (("Say hello.", "Hello there!", "No."), ("Name a colour.", "Blue.", "Seven."))]
    common = {"text_collator": DataCollatorForPreference(pad_token_id=tokenizer.pad_token_id or 0),
              "types": token_types(plugin, processor), "type_ids_key": plugin.type_ids_key,
              "cross": plugin.cross_attention(processor), "pad_id": tokenizer.pad_token_id or 0}
    plain = MediaPreferenceCollator(**common)([dict(f) for f in features])
    padded = MediaPreferenceCollator(**common, stand_ins=stand_ins)([dict(f) for f in features])
    added = sum(len(stand_in.ids) for stand_in in stand_ins)
    assert padded["input_ids"].shape == (4, plain["input_ids"].shape[1] + added)
    assert "pixel_values" in padded and "pixel_values" not in plain
    assert torch.equal(padded["attention_mask"].sum(), plain["attention_mask"].sum())
    assert torch.equal(padded["completion_mask"].sum(), plain["completion_mask"].sum())
    assert torch.allclose(_completion_logps(model, padded), _completion_logps(model, plain), atol=1e-5)


@pytest.mark.parametrize("stage", ["dpo", "kto"])
def test_fsdp2_dpo_and_kto_over_rows_with_and_without_images_train_on_two_cpu_ranks(tmp_path, stage):
    """DPO and KTO trainers shard with FSDP2 on CPU processes too (they ran as DDP there before), and their
    batches get the stand-ins: without them these runs stopped with gloo's collective mismatch."""
    image = str(REPO / "examples" / "data" / "demo_vlm" / "red_square.png")
    if stage == "dpo":
        rows = [{"conversations": [{"from": "human", "value": "<image>What color is it?"}],
                 "chosen": {"from": "gpt", "value": "It is red."}, "rejected": {"from": "gpt", "value": "No idea."},
                 "images": [image]},
                {"conversations": [{"from": "human", "value": "Say hi."}], "chosen": {"from": "gpt", "value": "Hi!"},
                 "rejected": {"from": "gpt", "value": "Go away."}, "images": []}]
        entry = {"file_name": "rows.json", "formatting": "sharegpt", "ranking": True,
                 "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected",
                             "images": "images"}}
    else:
        rows = [{"messages": [{"role": "user", "content": "<image>What color is it?"},
                              {"role": "assistant", "content": "It is red."}], "label": True, "images": [image]},
                {"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}],
                 "label": False, "images": []}]
        entry = {"file_name": "rows.json", "formatting": "sharegpt",
                 "columns": {"messages": "messages", "kto_tag": "label", "images": "images"},
                 "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}
    (tmp_path / "rows.json").write_text(json.dumps(rows * 4))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"rows": entry}))
    out = tmp_path / "out"
    config = {"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "stage": stage, "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "rows", "dataset_dir": str(tmp_path),
              "cutoff_len": 512, "image_max_pixels": 12544, "output_dir": str(out), "logging_steps": 1,
              "save_strategy": "no", "fsdp": "full_shard auto_wrap",
              "fsdp_config": str(REPO / "examples" / "fsdp" / "fsdp2.json"), "per_device_train_batch_size": 1,
              "max_steps": 4, "learning_rate": 1e-5, "disable_shuffling": True, "ddp_timeout": 120,
              "report_to": "none"}
    (tmp_path / "run.yaml").write_text(json.dumps(config))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(tmp_path / "run.yaml")]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["parallel"]["strategy"] == "fsdp2"
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines() if x.strip()]
    losses = [e["loss"] for e in events if e["event"] == "log"]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    assert (out / "adapter_model.safetensors").is_file()
