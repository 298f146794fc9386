"""Chat uploads: only gradio's uploads, within the cap, of a kind the model takes, sent as data URLs, shown back."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from app import chat_media
from app.tabs import chat

REPO = Path(__file__).resolve().parents[2]
PICTURE = REPO / "examples" / "data" / "demo_vlm" / "red_square.png"


@pytest.fixture()
def uploads(tmp_path):
    root = tmp_path / "gradio"
    root.mkdir()
    image = root / "red.png"
    image.write_bytes(PICTURE.read_bytes())
    return root, image


def test_an_image_becomes_a_data_url_part_and_is_shown(uploads):
    root, image = uploads
    checked = chat_media.checked_uploads([{"path": str(image)}], ("image", "video"), 5, root)
    assert checked == [("image", image.resolve())]
    content = chat_media.user_content("What is in the picture?", checked)
    assert [part["type"] for part in content] == ["image_url", "text"]
    url = content[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == PICTURE.read_bytes()
    convo = [{"role": "user", "content": content}, {"role": "assistant", "content": "A red square."}]
    sent = chat.openai_messages(convo, "")
    assert chat_media.DISPLAY_KEY not in sent[0]["content"][0]  # the server never sees a board path
    assert sent[0]["content"][0]["image_url"]["url"] == url
    assert chat_media.DISPLAY_KEY in convo[0]["content"][0]  # the page keeps it to show the picture
    shown = chat.to_chatbot(convo, "en")
    assert shown == [{"role": "user", "content": {"path": str(image.resolve())}},
                     {"role": "user", "content": "What is in the picture?"},
                     {"role": "assistant", "content": "A red square."}]
    assert chat_media.user_content("plain", []) == "plain"


def test_audio_becomes_input_audio(uploads):
    root, _ = uploads
    audio = root / "a.wav"
    audio.write_bytes(b"RIFF0000WAVE")
    content = chat_media.user_content("", chat_media.checked_uploads([str(audio)], ("audio",), 5, root))
    assert content == [{"type": "input_audio", chat_media.DISPLAY_KEY: str(audio.resolve()),
                        "input_audio": {"data": base64.b64encode(b"RIFF0000WAVE").decode(), "format": "wav"}}]


@pytest.mark.parametrize("case", ["outside", "missing", "too_large", "unknown", "not_taken"])
def test_refused_uploads(uploads, tmp_path, case):
    root, image = uploads
    files, takes, limit, key = [str(image)], ("image",), 5, None
    if case == "outside":  # a client naming a server path
        files, key = [str(REPO / "pyproject.toml")], "chat_upload_not_allowed"
    elif case == "missing":
        files, key = [str(root / "gone.png")], "chat_upload_not_allowed"
    elif case == "too_large":
        big = root / "big.png"
        big.write_bytes(b"\0" * (2 * 1024 * 1024))
        files, limit, key = [str(big)], 1, "chat_upload_too_large"
    elif case == "unknown":
        other = root / "notes.txt"
        other.write_text("hi")
        files, key = [str(other)], "chat_upload_unknown_type"
    else:
        takes, key = (), "chat_media_refused"
    with pytest.raises(chat_media.UploadRefused) as caught:
        chat_media.checked_uploads(files, takes, limit, root)
    assert caught.value.key == key
    message = chat.refusal_text(caught.value, "en")
    assert "{" not in message
    if case == "not_taken":
        assert "takes no image input (it takes: text only)" in message
        assert "图像" in chat.refusal_text(caught.value, "zh")
    if case == "too_large":
        assert "upload limit of 1 MB" in message


def test_a_traversal_out_of_the_upload_folder_is_refused(uploads):
    root, _ = uploads
    with pytest.raises(chat_media.UploadRefused):
        chat_media.checked_uploads([str(root / ".." / ".." / "x.png")], ("image",), 5, root)


def test_model_media_of_a_chat_run(tmp_path):
    class Jobs:
        runs_dir = tmp_path

    class FakeBoard:
        jobs = Jobs()

    for run_id, model in (("vlm", "demo-vlm"), ("text", "demo")):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "config.yaml").write_text(f"model_name_or_path: {model}\n")
    assert "image" in chat_media.model_media(FakeBoard(), "vlm")
    assert chat_media.model_media(FakeBoard(), "text") == ()
    assert chat_media.model_media(FakeBoard(), "absent") == ()
    import tracemalloc

    (tmp_path / "huge").mkdir()  # a chat run's config.yaml grown past any config (sparse: nothing on disk)
    with open(tmp_path / "huge" / "config.yaml", "wb") as fh:
        fh.write(b"model_name_or_path: demo-vlm\n#")
        fh.truncate(256 << 20)
    tracemalloc.start()
    try:
        assert chat_media.model_media(FakeBoard(), "huge") == ()  # it was read whole, then parsed as YAML
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20
