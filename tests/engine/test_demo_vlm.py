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
