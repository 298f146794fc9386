"""An unexpected error in a board handler reaches the page's pop-up as text, never as markup (app.handler_errors)."""

from __future__ import annotations

import inspect
import logging

import gradio as gr
import pytest
from gradio import utils as gradio_utils

from app import api
from app.handler_errors import GUARDED, guard_handlers, guarded
from app.inert_text import ZWSP

QUOTED = "could not convert string to float: '<img src=http://evil.example/a.png>'"


def test_an_unexpected_error_becomes_an_inert_page_error_and_is_logged_with_its_traceback(caplog):
    def tick(run_id: str, request: gr.Request = None) -> str:
        raise ValueError(QUOTED)

    with caplog.at_level(logging.ERROR, logger="app.handler_errors"):
        with pytest.raises(gr.Error) as raised:
            guarded(tick)("r1")
    assert "<img" not in raised.value.message and raised.value.message.replace(ZWSP, "") == QUOTED
    assert isinstance(raised.value.__cause__, ValueError)
    record = caplog.records[-1]
    assert "tick" in record.getMessage() and record.exc_info[0] is ValueError
    # gradio reads the handler's parameters and hints (gr.Request is filled in by type) through the wrapper
    assert inspect.signature(guarded(tick)) == inspect.signature(tick)
    assert gradio_utils.get_type_hints(guarded(tick))["request"] is gr.Request


def test_a_board_message_and_an_empty_error_pass_as_they_should():
    def rejects():
        raise gr.Error("Unknown run `<x>`")

    with pytest.raises(gr.Error) as raised:
        guarded(rejects)()
    assert raised.value.message == "Unknown run `<x>`"  # the board's own words, unchanged

    def empty():
        raise KeyError()

    with pytest.raises(gr.Error) as raised:
        guarded(empty)()
    assert raised.value.message == "KeyError"


def test_a_stream_keeps_streaming_until_its_error():
    def stream(n):
        yield "one"
        yield "two"
        raise OSError(f"<b>{n}</b>")

    wrapped = guarded(stream)
    assert inspect.isgeneratorfunction(wrapped)  # gradio streams only what it sees as a generator
    got = []
    with pytest.raises(gr.Error) as raised:
        for value in wrapped(3):
            got.append(value)
    assert got == ["one", "two"] and raised.value.message == f"<{ZWSP}b>3<{ZWSP}/b>"


def test_every_page_handler_is_guarded_and_the_api_is_not(board):
    from app.ui import build_ui

    demo = build_ui(board)
    page, endpoints = [], []
    for block_fn in demo.fns.values():
        if block_fn.fn is None:
            continue
        (endpoints if block_fn.api_name in api.API_NAMES else page).append(block_fn)
    assert sorted(fn.api_name for fn in endpoints) == sorted(api.API_NAMES)
    assert not any(getattr(fn.fn, GUARDED, False) for fn in endpoints)
    assert len(page) > 40 and all(getattr(fn.fn, GUARDED, False) for fn in page)
    assert guard_handlers(demo, api.API_NAMES) == 0  # never wrapped twice


def test_the_pop_up_gradio_sends_holds_the_inert_message():
    """Through gradio's own server and queue, as the page receives it."""
    from gradio_client import Client

    with gr.Blocks() as demo:
        box = gr.Textbox()

        def boom(text):
            raise ValueError(QUOTED)

        def streams(text):
            yield "partial"
            raise ValueError(QUOTED)

        box.submit(boom, box, box, api_name="boom")
        box.change(streams, box, box, api_name="streams")
    assert guard_handlers(demo, ()) == 2
    demo.launch(prevent_thread_lock=True, quiet=True, show_error=True, server_name="127.0.0.1")
    try:
        client = Client(demo.local_url, verbose=False)
        for name in ("boom", "streams"):
            with pytest.raises(Exception) as raised:
                client.predict("x", api_name=f"/{name}")
            assert f"<{ZWSP}img src=" in str(raised.value) and "<img" not in str(raised.value), name
    finally:
        demo.close()
