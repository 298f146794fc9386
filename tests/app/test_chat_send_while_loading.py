"""A message sent while the chat model still loads (Load pressed, the worker not ready yet) stayed in the box, unsent,
and nothing said so (the load's line "Loading the model… (n s)" went on). Now it waits in the box (which takes no
typing meanwhile) under a note in the page's language, and is sent once the model is ready; a load that fails or is
ended leaves it in the box, unsent, and so does Stop."""

from __future__ import annotations

import gradio as gr
import pytest

from app.tabs import chat


def _handler(demo, name):
    return next(f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == name
                and f.fn.__module__ == "app.tabs.chat")


@pytest.fixture()
def send(board, monkeypatch):
    """The Chat tab's send handler with a worker that is "loading" for the first ``loading`` looks, then ready (or
    gone, when ``ends``), answering "Hello"."""
    from app.ui import build_ui

    looks, plan = [], {"loading": 2, "ends": False}

    def live(board, servers):
        looks.append(1)
        if plan["ends"] and len(looks) > plan["loading"]:
            return {}
        return {"main": {"id": "r1", "ready": len(looks) > plan["loading"], "port": 1}}

    monkeypatch.setattr(chat, "live_servers", live)
    monkeypatch.setattr(chat, "WAIT_POLL", 0.01, raising=False)  # fails, not errors, without it
    monkeypatch.setattr(chat.chat_workers, "client_of", lambda board, info: ("http://127.0.0.1:1/v1", None))
    monkeypatch.setattr(chat, "stream_chat", lambda *a, **k: iter([{"content": "Hello"}]))
    monkeypatch.setattr(chat, "served_line", lambda board, live, lang, adopted: f"ready line ({lang})")
    demo = build_ui(board)
    fn = _handler(demo, "on_send")
    values = [block.value for block in fn.inputs[8:]]

    def run(lang, loading=2, ends=False):
        looks.clear()
        plan.update(loading=loading, ends=ends)
        return list(fn.fn({"text": "hi", "files": []}, False, [], [], "", "", {"main": "r1"}, lang, *values))

    return run


@pytest.mark.parametrize(("lang", "words"), [("en", "Waiting for the model to finish loading"), ("zh", "正在等待模型加载完成")])
def test_a_message_sent_while_the_model_loads_is_sent_once_it_is_ready(send, lang, words):
    steps = send(lang)
    box, shown, _, convo, _, status = steps[0]
    assert box == gr.update(interactive=False)  # the message stays in the box, which takes no typing meanwhile
    assert shown[-1]["metadata"] == {"title": chat.t(lang, "chat_waiting_for_load"), "status": "pending"}
    assert words in shown[-1]["metadata"]["title"]
    assert convo == gr.skip() and status == gr.skip()  # the load's line stays
    box, shown, _, convo, _, status = steps[-1]
    assert box == gr.update(value={"text": "", "files": []}, interactive=True)
    assert convo == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]
    assert [m["content"] for m in shown] == ["hi", "Hello"] and status == f"ready line ({lang})"


def test_a_message_sent_to_a_ready_model_does_not_wait(send):
    steps = send("en", loading=0)
    assert all(step[0] != gr.update(interactive=False) for step in steps)
    assert steps[-1][0] == {"text": "", "files": []} and steps[-1][3][-1]["content"] == "Hello"


def test_a_load_that_ends_leaves_the_message_in_the_box_unsent(send):
    *_, (box, shown, _, convo, _, status) = send("en", loading=2, ends=True)
    assert box == gr.update(interactive=True)  # its text is not touched: still the message typed
    assert shown == [] and convo == gr.skip() and status == gr.skip()  # the load's (or the Unload's) line says why


def test_stop_while_a_message_waits_gives_the_box_back(board):
    from app.ui import build_ui

    demo = build_ui(board)
    stop = _handler(demo, "on_stop")
    waiting = [{"role": "user", "metadata": None, "content": [{"text": "a", "type": "text"}]},
               {"role": "assistant", "metadata": {"title": "…", "status": "pending"}, "content": []}]
    convo = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    box, shown = stop.fn(waiting, convo, "zh")
    assert box == gr.update(interactive=True) and [m["content"] for m in shown] == ["a", "b"]
    assert stop.fn(waiting[:1], convo, "zh") == (gr.update(interactive=True), gr.skip())  # a reply: left as shown
    sends = {i for i, f in demo.fns.items() if getattr(f.fn, "__name__", "") == "on_send"}
    assert any(set(f.cancels) == sends and f.targets == stop.targets for f in demo.fns.values())  # and Stop cancels
