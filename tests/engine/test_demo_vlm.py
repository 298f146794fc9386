"""The built-in tiny VLM `demo-vlm`: built offline, loads like any Qwen2-VL folder, answers about an image."""

from __future__ import annotations

import json
from pathlib import Path

from engine.config import build_config
from engine.demo_vlm import STAMP_FILE, ensure_demo_vlm
from engine.infer.chat import ChatModel

REPO = Path(__file__).resolve().parents[2]


def test_demo_vlm_builds_offline_and_chats_about_an_image(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_BOARD_HOME", str(tmp_path))
    folder = ensure_demo_vlm()
    assert folder == tmp_path / "demo-vlm"
    assert {"config.json", "model.safetensors", "processor_config.json", "tokenizer.json", STAMP_FILE} <= {
        p.name for p in folder.iterdir()}
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen2_vl" and "vision_config" in config
    assert ensure_demo_vlm() == folder  # cached: the stamp matches, nothing is rebuilt
    cfg = build_config({"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "do_sample": False,
                        "max_new_tokens": 8, "image_max_pixels": 12544})
    chat = ChatModel(cfg)
    try:
        assert chat.media is not None and chat.media.plugin.name == "qwen2_vl"
        image = REPO / "examples" / "data" / "demo_vlm" / "red_square.png"
        reply = chat.chat([{"role": "user", "content": "Describe the image."}], media={"images": [str(image)]})
        text_only = chat.chat([{"role": "user", "content": "Describe the image."}])
        # the 64x64 picture adds its soft tokens (and the vision markers) to the prompt, and a reply is generated
        assert reply.prompt_tokens >= text_only.prompt_tokens + 4 + 2 and reply.completion_tokens > 0
    finally:
        chat.unload()


def test_predict_on_demo_vlm_gives_the_images_to_generate(tmp_path, monkeypatch):
    """`do_predict` with media rows: every prompt carries its image's soft tokens and pixels into ``generate``."""
    import yaml
    from transformers import Qwen2VLForConditionalGeneration

    from engine.cli import main

    # the session's demo VLM (tests/conftest.py's private LF_BOARD_HOME), built once for every test that uses it;
    # the test above checks a build of its own
    folder = ensure_demo_vlm()
    calls = []
    original = Qwen2VLForConditionalGeneration.generate

    def spy(self, *args, **kwargs):
        calls.append({key: kwargs.get(key) for key in ("input_ids", "pixel_values", "image_grid_thw",
                                                       "mm_token_type_ids")})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Qwen2VLForConditionalGeneration, "generate", spy)
    config = {"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "stage": "sft", "do_predict": True,
              "predict_with_generate": True, "eval_dataset": "demo_vlm",
              "dataset_dir": str(REPO / "examples" / "data"), "max_samples": 3,
              "cutoff_len": 512, "image_max_pixels": 12544, "image_min_pixels": 3136, "max_new_tokens": 6,
              "do_sample": False, "per_device_eval_batch_size": 2, "output_dir": str(tmp_path / "out"),
              "report_to": "none"}
    (tmp_path / "predict.yaml").write_text(yaml.safe_dump(config))
    assert main(["eval", str(tmp_path / "predict.yaml")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "generated_predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all("<image>" in row["prompt"] for row in rows)  # readable prompt: the placeholder
    assert len(calls) == 2  # batches of 2 and 1
    from transformers import AutoTokenizer

    pad = AutoTokenizer.from_pretrained(folder).convert_tokens_to_ids("<|image_pad|>")
    for call in calls:
        grids = call["image_grid_thw"]
        assert grids is not None and call["pixel_values"] is not None
        per_image = (grids.prod(dim=1) // 4).tolist()  # merge size 2: 4 patches per soft token
        counts = (call["input_ids"] == pad).sum(dim=1).tolist()
        assert counts == per_image  # every row's soft tokens match its own image, in row order
        assert call["pixel_values"].shape[0] == int(grids.prod(dim=1).sum())
        assert ((call["mm_token_type_ids"] == 1) == (call["input_ids"] == pad)).all()
