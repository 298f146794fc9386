"""Damaged and special media files in dataset rows and in `lf-engine chat`: named before any model loads, never a hang.

- A JPEG (or GIF, WebP, BMP: every format but PNG) cut short passed the check, since Pillow's ``verify()`` checks PNG
  alone, and failed in training only once the data map read it, after the processor or the model had loaded.
- A named pipe given as media (a dataset row read outside the check, `lf-engine chat --image`) was opened by Pillow or
  PyAV, whose open waits for a writer forever.
"""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import pytest

from engine.config import build_config
from engine.multimodal import media
from engine.multimodal.errors import MediaError


def _picture(fmt: str) -> bytes:
    from PIL import Image

    data = io.BytesIO()
    Image.linear_gradient("L").convert("RGB").save(data, fmt)
    return data.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "GIF", "PNG"])
def test_probe_finds_an_image_cut_short(tmp_path, fmt):
    whole, cut = tmp_path / f"whole.{fmt.lower()}", tmp_path / f"cut.{fmt.lower()}"
    data = _picture(fmt)
    whole.write_bytes(data)
    cut.write_bytes(data[:len(data) // 2])
    assert media.probe("images", str(whole)) is None
    assert media.probe("images", str(cut)) == "is cut short (truncated)"
    with pytest.raises(MediaError, match="truncated"):  # what training would meet, after the model's load
        media.load_image(str(cut))


def media_dataset(folder, name: str, column: str, files: tuple[str, ...]) -> dict:
    """A sharegpt dataset ``name`` in ``folder`` (its dataset_info.json too) of one row per file of ``files``, each
    asking about its one ``column`` ("images", "videos") item; the config that checks it on a tiny Qwen2-VL."""
    tag = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}[column]
    rows = [{"messages": [{"role": "user", "content": f"{tag}What is it?"}, {"role": "assistant", "content": "A."}],
             column: [file]} for file in files]
    (folder / "rows.json").write_text(json.dumps(rows))
    (folder / "dataset_info.json").write_text(json.dumps({name: {
        "file_name": "rows.json", "formatting": "sharegpt", "columns": {"messages": "messages", column: column},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    return {"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "dataset": name, "dataset_dir": str(folder)}


def test_check_names_the_row_with_a_jpeg_cut_short(tmp_path):
    """`lf-engine check` / `data` / `train`'s pre-flight: the row, the file and the fix."""
    from engine.multimodal.checks import check_media

    data = _picture("JPEG")
    (tmp_path / "good.jpg").write_bytes(data)
    (tmp_path / "cut.jpg").write_bytes(data[:len(data) // 2])
    problems = check_media(build_config(media_dataset(tmp_path, "pics", "images", ("good.jpg", "cut.jpg"))))
    assert problems == [f"Dataset `pics` row 1: image file {tmp_path / 'cut.jpg'} is cut short (truncated): replace "
                        "the file."]


@pytest.mark.parametrize("read", [media.load_image, media.read_video, media.read_audio])
def test_readers_refuse_a_pipe_without_waiting(tmp_path, read):
    pipe = tmp_path / "clip.png"
    os.mkfifo(pipe)
    found: list[str] = []

    def reader() -> None:
        try:
            read(str(pipe))
        except MediaError as err:
            found.append(str(err))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # let the waiting reader go
        thread.join(10)
    assert found == [f"{pipe} {media.NOT_REGULAR}; give the media file itself."]


def test_a_link_to_a_device_is_refused_by_the_readers(tmp_path):
    link = tmp_path / "zero.wav"
    link.symlink_to("/dev/zero")
    with pytest.raises(MediaError, match="is not a regular file"):
        media.read_audio(str(link))


def test_chat_names_damaged_media_and_pipes_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import yaml

    import engine.infer.chat as chat
    from engine.cli import main

    monkeypatch.setattr(chat.ChatModel, "__init__", lambda *a, **k: pytest.fail("the model loaded"))
    data = _picture("JPEG")
    (tmp_path / "cut.jpg").write_bytes(data[:len(data) // 2])
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "song.mp4").write_bytes(b"not a video at all\n" * 20)
    config = tmp_path / "chat.yaml"
    config.write_text(yaml.safe_dump({"model_name_or_path": "demo-vlm", "template": "qwen2_vl"}))
    for flag, given, words in (("--image", "cut.jpg", "is cut short (truncated); replace the file"),
                               ("--image", "pipe.png", media.NOT_REGULAR),
                               ("--video", "song.mp4", "cannot be read (InvalidDataError); replace the file")):
        assert main(["chat", str(config), "--query", "What is it?", flag, str(tmp_path / given)]) == 2
        err = capsys.readouterr().err
        assert words in err and str(Path(tmp_path / given)) in err and "Traceback" not in err, err


def test_bytes_that_are_no_image_are_named_without_an_object_address():
    """The API's image_url bytes that are no image read 'cannot identify image file <_io.BytesIO object at 0x...>'."""
    with pytest.raises(MediaError) as err:
        media.load_image(b"not a picture")
    assert str(err.value) == ("Image (uploaded bytes) is not an image Pillow reads (empty, damaged, or another kind of "
                              "file); replace the file.")


def test_probe_decodes_no_whole_jpeg_or_png(tmp_path, monkeypatch):
    """The check probes up to 2,000 images a dataset: a whole JPEG (its end-of-image marker last) or PNG (verified
    chunk by chunk) is not decoded; a JPEG with bytes after its marker is, and passes."""
    from PIL import ImageFile

    for fmt in ("JPEG", "PNG"):
        (tmp_path / f"whole.{fmt}").write_bytes(_picture(fmt))
    (tmp_path / "trailing.jpg").write_bytes(_picture("JPEG") + b"camera notes")
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: pytest.fail("decoded"))
    assert media.probe("images", str(tmp_path / "whole.JPEG")) is None
    assert media.probe("images", str(tmp_path / "whole.PNG")) is None
    monkeypatch.undo()
    assert media.probe("images", str(tmp_path / "trailing.jpg")) is None
