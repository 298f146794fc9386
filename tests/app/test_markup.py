"""Quoted names and errors show as text in the board's messages, and the page loads nothing from elsewhere."""

from __future__ import annotations

import asyncio
import json
import re

import gradio as gr

from app import catalog, markup
from app.i18n import L
from app.security import CONTENT_POLICY, ContentPolicyMiddleware
from app.tabs import export

PAYLOADS = [
    "x` <img src=http://evil.example/a.png> `",
    "![x](http://evil.example/b.png)",
    "[fix it here](http://evil.example/c) <a href=http://evil.example/d>click</a>",
    "\\`<form action=http://evil.example/e><input></form>`",
    "[r]: http://evil.example/f\n\n![r]",
    "<!-- --> <http://evil.example/g> <svg onload=alert(1)>",
]


def test_inert_leaves_no_tag_link_or_image_to_render():
    for payload in PAYLOADS:
        text = markup.inert(payload)
        assert not re.search(r"<\S", text.replace("<" + markup.ZWSP, ""))  # no < starts markup
        assert not re.search(r"\][(\[:]", text.replace("]" + markup.ZWSP, ""))  # no ] goes on into a link
        assert text.replace(markup.ZWSP, "") == payload  # reads the same
    z = markup.ZWSP
    assert markup.inert("<1@evil.example> <=a@evil.example>") == f"<{z}1@{z}evil.example> <{z}=a@{z}evil.example>"


def test_inert_leaves_no_bare_address_to_turn_into_a_link():
    text = markup.inert("see https://evil.example/a, www.evil.example or me@evil.example")
    assert text == ("see https://" + markup.ZWSP + "evil.example/a, www." + markup.ZWSP + "evil.example or me@"
                    + markup.ZWSP + "evil.example")


def test_inert_leaves_text_that_starts_no_markup_unmarked():
    """Copying a message must not carry invisible characters it does not need (a < before a space, a plain ])."""
    for text in ("loss < 2 and lr <\n", "[demo] run a[0] = 1]", "`dataset: [x]` and [y] ok", "x <"):
        assert markup.inert(text) == text


def test_safe_markdown_passes_values_through_inert_and_keeps_i18n_keys():
    box = markup.SafeMarkdown("<b>x</b>")
    assert isinstance(box, gr.Markdown) and "<b>" not in box.value and box.get_block_name() == "markdown"
    rebuilt = box.__class__(**box.constructor_args)  # as gradio rebuilds it for gr.update(visible=...)
    assert "<img" not in rebuilt.postprocess("<img src=x>")
    assert box.postprocess("a <img src=x> b") == "a <" + markup.ZWSP + "img src=x> b"
    assert box.postprocess(None) is None
    key = L("progress_none")
    assert box.postprocess(key) == gr.Markdown().postprocess(key)


def test_a_dataset_info_name_quoted_in_the_picker_note_shows_as_text(tmp_path):
    name = "a` <img src=http://evil.example/dup.png> `"
    (tmp_path / "d.json").write_text('[{"instruction": "q", "output": "a"}]')
    (tmp_path / "dataset_info.json").write_text(
        "{" + ", ".join([json.dumps(name) + ': {"file_name": "d.json"}'] * 2) + "}"
    )
    _, note = catalog.datasets(tmp_path)
    assert note and "<img" in note  # the engine quotes the name as it is
    assert "<img" not in markup.SafeMarkdown().postprocess(note)


def test_an_export_run_with_a_size_that_is_no_number_still_shows_its_result(board):
    run = board.jobs.runs_dir / "export-1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"kind": "export", "status": "completed", "export_dir": str(run)}))
    (run / "config.yaml").write_text("model_name_or_path: demo\n")
    (run / "events.jsonl").write_text(json.dumps({"event": "end", "metrics": {"size_bytes": "<img src=x>"}}) + "\n")
    card = export.result_card(board, "export-1", "en")
    assert "<img" not in card and "lf-result" in card


def test_every_response_carries_the_content_policy():
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def send(message):
        sent.append(message)

    asyncio.run(ContentPolicyMiddleware(app)({"type": "http"}, None, send))
    headers = dict(sent[0]["headers"])
    assert headers[b"content-security-policy"] == CONTENT_POLICY.encode()
    assert "img-src 'self'" in CONTENT_POLICY and "form-action 'self'" in CONTENT_POLICY
    assert "frame-ancestors 'self'" in CONTENT_POLICY  # no other page frames the board under a decoy
