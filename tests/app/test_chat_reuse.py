"""A second Load of the same model and adapter keeps its ready chat worker; anything else starts a new one."""

from __future__ import annotations

import time

from app import forms
from app.tabs import chat


def _ready(board, servers, side="main"):
    deadline = time.time() + 30
    while not chat.live_servers(board, servers).get(side, {}).get("ready"):
        assert time.time() < deadline, "the chat worker never became ready"
        time.sleep(0.05)


def test_same_model_and_adapter_reuses_the_worker(board):
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers, problems = chat.start_servers(board, top, {"temperature": 0.5}, compare=False)
    assert problems == []
    _ready(board, servers)
    # only per-message sampling changed: the worker serves it as is
    plans = chat.plan_servers(top, {"temperature": 0.9, "top_p": 0.5}, compare=False)
    keep = chat.reusable_servers(board, servers, plans)
    assert keep == servers
    assert chat.unload(board, servers, keep=set(keep.values())) == []
    again, problems = chat.start_servers(board, top, {"temperature": 0.9}, compare=False, reuse=keep)
    assert problems == [] and again == servers
    assert len([r for r in board.jobs.list() if r.get("kind") == "chat"]) == 1  # no second worker
    assert chat.live_servers(board, again)["main"]["status"] == "running"
    chat.unload(board, again)


def test_another_template_or_server_setting_starts_a_new_worker(board):
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers, _ = chat.start_servers(board, top, {"temperature": 0.5}, compare=False)
    _ready(board, servers)
    other = forms.TopValues.of("demo", "lora", "", "default")
    assert chat.reusable_servers(board, servers, chat.plan_servers(other, {}, compare=False)) == {}
    assert chat.reusable_servers(board, servers, chat.plan_servers(top, {"num_beams": 2}, compare=False)) == {}
    # a worker that is gone is never reused
    chat.unload(board, servers)
    deadline = time.time() + 30
    while chat.live_servers(board, servers):
        assert time.time() < deadline
        time.sleep(0.05)
    assert chat.reusable_servers(board, servers, chat.plan_servers(top, {}, compare=False)) == {}


def test_load_builds_the_chat_client_before_the_first_message(board, monkeypatch):
    from app import chat_client

    monkeypatch.setattr(chat_client, "_CLIENT", None)
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers, problems = chat.start_servers(board, top, {}, compare=False)
    try:
        assert problems == []
        assert chat_client._CLIENT is not None  # built while the worker loads, not when Send is pressed
        built = chat_client._CLIENT
        _ready(board, servers)
        assert chat_client._client() is built  # one client for every message
    finally:
        chat.unload(board, servers)


def test_a_refused_message_is_taken_back_into_the_box(board, monkeypatch):
    """A prompt the worker refuses before answering (too long for the model) must not stay in the conversation,
    where every later message would be refused for it too; its text goes back into the box to be shortened."""
    from app.chat_client import ChatError
    from app.tabs import chat
    from app.ui import build_ui

    monkeypatch.setattr(chat, "live_servers", lambda board, servers: {"main": {"id": "r1", "ready": True}})
    monkeypatch.setattr(chat.chat_workers, "client_of", lambda board, info: ("http://127.0.0.1:9", "key"))

    def refused(*args, **kwargs):
        raise ChatError("The prompt is 20,035 tokens; this model reads at most 1,024")
        yield  # a generator, as stream_chat is

    monkeypatch.setattr(chat, "stream_chat", refused)
    demo = build_ui(board)
    on_send = next(f.fn for f in demo.fns.values() if "on_send" in getattr(f.fn, "__qualname__", ""))
    earlier = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    values = [block.value for block in next(f for f in demo.fns.values() if f.fn is on_send).inputs[8:]]
    *_, last = on_send({"text": "x" * 100, "files": []}, False, earlier, [], "", "", {"main": "r1"}, "en", *values)
    box, shown, _, convo, _, status = last
    assert box == {"text": "x" * 100, "files": []} and convo == earlier and len(shown) == 2
    assert "20,035 tokens" in status


def test_the_api_reuses_a_live_chat_worker_as_the_chat_tab_does(board):
    """/submit_run with kind chat returns the run id of a live worker that serves the same model, adapter, template
    and server settings (one a page loaded, or an earlier call), instead of loading the model again."""
    from app.api import Automation

    auto = Automation(board)
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers, problems = chat.start_servers(board, top, {"temperature": 0.5}, compare=False)
    assert problems == []
    _ready(board, servers)
    same = "model_name_or_path: demo\ntemplate: chatml\nfinetuning_type: lora\ntemperature: 0.9\n"
    assert auto.submit_run(same, "chat") == servers["main"]  # the page's worker; sampling may differ
    assert auto.submit_run(same, "chat") == servers["main"]
    other = auto.submit_run(same.replace("chatml", "default"), "chat")  # another template: a worker of its own
    assert other != servers["main"] and auto.submit_run(same.replace("chatml", "default"), "chat") == other
    assert len([r for r in board.jobs.list() if r.get("kind") == "chat"]) == 2
    # a worker being ended is never handed out: the next call starts a new one
    board.jobs.abort(servers["main"])
    fresh = auto.submit_run(same, "chat")
    assert fresh not in (servers["main"], other)
    chat.unload(board, {"main": fresh})
