"""Inference and export with media: `lf-engine chat --image`, the API's image_url data URLs, VLM export reload."""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import save_tiny_vlm  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.config import build_config  # noqa: E402
from engine.infer.server import RequestError, convert_messages  # noqa: E402
from engine.runs import RunFolder  # noqa: E402


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    return save_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl")


@pytest.fixture(scope="module")
def png(tmp_path_factory) -> Path:
    from PIL import Image

    path = tmp_path_factory.mktemp("img") / "red.png"
    Image.new("RGB", (56, 56), (220, 20, 20)).save(path)
    return path


def _config(folder: Path, model: Path, **extra) -> Path:
    import yaml

    path = folder / "chat.yaml"
    path.write_text(yaml.safe_dump({"model_name_or_path": str(model), "template": "qwen2_vl", "do_sample": False,
                                    "max_new_tokens": 4, **extra}))
    return path


def test_chat_query_with_an_image(vlm, png, tmp_path, capsys):
    assert main(["chat", str(_config(tmp_path, vlm)), "--query", "What is it?", "--image", str(png)]) == 0
    assert capsys.readouterr().out.strip()  # a reply (random model) was printed
    assert main(["chat", str(_config(tmp_path, vlm)), "--query", "Hear?", "--audio", str(png)]) == 2
    assert "takes images, videos, not audios" in capsys.readouterr().err


def test_chat_media_a_model_would_refuse_are_named_before_it_loads(vlm, png, tmp_path, capsys, monkeypatch):
    """A missing file, a folder, or media for a text-only model were said only after the model had loaded (10-16 s on
    the demo models); they are now said first, in the same words."""
    import engine.infer.chat as chat

    monkeypatch.setattr(chat.ChatModel, "__init__", lambda *a, **k: pytest.fail("the model loaded"))
    from engine.demo import ensure_demo_model

    text_model = ensure_demo_model()  # the built-in text-only demo
    for model, flag, given, words in (
            (vlm, "--image", tmp_path / "nowhere.png", "Image file not found: "),
            (vlm, "--video", tmp_path, "is a folder; give the file inside it"),
            (text_model, "--image", png, "is a text-only model; it cannot take images, video or audio")):
        assert main(["chat", str(_config(tmp_path, model)), "--query", "What is it?", flag, str(given)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err


def test_chat_query_with_a_video(vlm, tmp_path, capsys):
    """`--video` works without torchvision for Qwen2-VL (frames through Pillow)."""
    from test_multimodal_plugins import _write_video

    video = _write_video(tmp_path / "clip.mp4", seconds=1.0)
    config = _config(tmp_path, vlm, video_max_pixels=64 * 48)
    assert main(["chat", str(config), "--query", "What happens?", "--video", video]) == 0
    assert capsys.readouterr().out.strip()


def test_convert_messages_takes_data_urls_only(png):
    data = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    media: dict = {}
    messages, _ = convert_messages([{"role": "user", "content": [
        {"type": "text", "text": "What is"}, {"type": "image_url", "image_url": {"url": data}}]}], media)
    assert messages == [{"role": "user", "content": "What is<image>"}]
    assert media["images"] == [png.read_bytes()]
    for url, fragment in (("https://example.com/x.png", "remote URLs are not fetched"),
                          (str(png), "base64 data URL"), ("file:///etc/passwd", "base64 data URL")):
        with pytest.raises(RequestError, match=fragment):
            convert_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}], {})


def test_api_answers_an_image_url_request(vlm, png, tmp_path):
    from engine.infer.server import serve

    cfg = build_config({"model_name_or_path": str(vlm), "template": "qwen2_vl", "do_sample": False,
                        "max_new_tokens": 4})
    stop, errors = threading.Event(), []
    run_dir = tmp_path / "run"

    def target():
        try:
            serve(cfg, "127.0.0.1", 0, run_dir=str(run_dir), stop_event=stop)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    folder = RunFolder(run_dir)
    deadline = time.time() + 120
    while not folder.info().get("ready") and time.time() < deadline and not errors:
        time.sleep(0.1)
    assert not errors and folder.info().get("ready")
    url = f"http://127.0.0.1:{folder.info()['port']}/v1/chat/completions"
    data = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()

    def post(content):
        body = json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
        request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(request, timeout=120).read())

    try:
        answer = post([{"type": "text", "text": "What colour?"}, {"type": "image_url", "image_url": {"url": data}}])
        assert answer["choices"][0]["message"]["role"] == "assistant"
        assert answer["usage"]["prompt_tokens"] > 20  # the image's soft tokens are in the prompt
        with pytest.raises(urllib.error.HTTPError) as err:
            post([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}])
        assert err.value.code == 400 and "remote URLs are not fetched" in err.value.read().decode()
        import io

        from PIL import Image

        bomb = io.BytesIO()  # 13,400 x 13,400 pixels in ~30 KB: over Pillow's limit, which is no OSError
        Image.new("1", (13_400, 13_400)).save(bomb, format="PNG")
        with pytest.raises(urllib.error.HTTPError) as err:
            post([{"type": "image_url",
                   "image_url": {"url": "data:image/png;base64," + base64.b64encode(bomb.getvalue()).decode()}}])
        assert err.value.code == 400 and "is too large to decode" in err.value.read().decode()
    finally:
        stop.set()
        thread.join(timeout=30)


def test_vlm_export_reloads_in_plain_transformers(vlm, png, tmp_path):
    """Train a LoRA adapter, merge it, and answer about an image with transformers' own classes."""
    import torch
    import yaml
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoTokenizer, Qwen2VLImageProcessorPil

    data = tmp_path / "data"
    data.mkdir()
    Image.open(png).save(data / "a.png")
    rows = [{"messages": [{"role": "user", "content": "<image>Colour?"}, {"role": "assistant", "content": "Red."}],
             "images": ["a.png"]}] * 4
    (data / "d.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "d.json", "formatting": "sharegpt",
                                                              "columns": {"messages": "messages", "images": "images"},
                                                              "tags": {"role_tag": "role", "content_tag": "content",
                                                                       "user_tag": "user",
                                                                       "assistant_tag": "assistant"}}}))
    train = tmp_path / "train.yaml"
    train.write_text(yaml.safe_dump({
        "model_name_or_path": str(vlm), "template": "qwen2_vl", "stage": "sft", "finetuning_type": "lora",
        "dataset": "d", "dataset_dir": str(data), "output_dir": str(tmp_path / "adapter"), "max_steps": 1,
        "per_device_train_batch_size": 2, "save_strategy": "no", "report_to": "none", "plot_loss": False}))
    assert main(["train", str(train)]) == 0
    export = tmp_path / "export.yaml"
    export.write_text(yaml.safe_dump({"model_name_or_path": str(vlm), "template": "qwen2_vl",
                                      "adapter_name_or_path": str(tmp_path / "adapter"), "finetuning_type": "lora",
                                      "export_dir": str(tmp_path / "merged")}))
    assert main(["export", str(export)]) == 0
    merged = tmp_path / "merged"
    assert (merged / "processor_config.json").is_file()
    saved = json.loads((merged / "processor_config.json").read_text())
    assert saved["processor_class"] == "Qwen2VLProcessor"
    assert saved["video_processor"]["video_processor_type"] == "Qwen2VLVideoProcessor"
    model = AutoModelForImageTextToText.from_pretrained(merged).eval()
    tokenizer = AutoTokenizer.from_pretrained(merged)
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(merged)
    pixels = image_processor([Image.open(png).convert("RGB")], return_tensors="pt")
    count = int(pixels["image_grid_thw"][0].prod()) // 4
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "<|vision_start|>" + "<|image_pad|>" * count + "<|vision_end|>Colour?"}],
        tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>assistant\n" in prompt  # the qwen2_vl template went with the export
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, **pixels, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]
