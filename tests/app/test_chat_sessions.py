"""Two pages (sessions) of one board and the chat workers: one worker per model shared by the pages, each page with
its own conversation, and no worker ended from under another page's reply without a clear message."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import gradio as gr

from app import chat_workers, forms
from app.tabs import chat

DEMO = forms.TopValues.of("demo", "lora", "", "chatml")
OTHER = forms.TopValues.of("demo", "lora", "", "default")


def _workers(board):
    return [info["id"] for info in chat_workers.live_chat_runs(board)]


def _wait_ready(board, servers):
    deadline = time.time() + 30
    while not all(s.get("ready") for s in chat.live_servers(board, servers).values()):
        assert time.time() < deadline, "the chat worker never became ready"
        time.sleep(0.05)


def test_a_second_page_loading_the_same_model_shares_the_first_pages_worker(board):
    first = chat.load_servers(board, DEMO, {"temperature": 0.5}, False, {})
    assert first.problems == [] and first.shared == [] and len(first.started) == 1
    _wait_ready(board, first.servers)
    # another page, which knew no worker (opened before the first Load), loads the same model and adapter
    second = chat.load_servers(board, DEMO, {"temperature": 0.9}, False, {})
    assert second.servers == first.servers and second.shared == [first.servers["main"]] and second.started == []
    assert _workers(board) == [first.servers["main"]]  # one worker, not one per page
    assert chat.live_servers(board, first.servers)["main"]["status"] == "running"  # the first page's still runs
    # and the first page's next Load keeps it too, rather than ending the worker the second page uses
    again = chat.load_servers(board, DEMO, {}, False, first.servers)
    assert again.servers == first.servers and _workers(board) == [first.servers["main"]]
    chat.unload(board, first.servers)


def test_two_pages_loading_at_once_start_one_worker(board):
    plans, barrier = [], threading.Barrier(2)

    def load():
        barrier.wait()
        plans.append(chat.load_servers(board, DEMO, {}, False, {}))

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(plans) == 2 and plans[0].servers == plans[1].servers
    assert len(_workers(board)) == 1
    chat.unload(board, plans[0].servers)


def test_loading_another_model_waits_for_another_pages_reply(board):
    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    worker = first.servers["main"]
    with chat_workers.streaming([worker]):  # the first page is receiving a reply
        refused = chat.load_servers(board, OTHER, {}, False, {})
        assert refused.busy == [worker] and refused.servers == {}
        assert _workers(board) == [worker]  # nothing was ended, nothing started
        assert board.jobs.folder(worker).info().get("abort_requested_at") is None
    replaced = chat.load_servers(board, OTHER, {}, False, {})  # the reply is over: the Load goes ahead
    assert replaced.busy == [] and replaced.servers["main"] != worker
    assert board.jobs.wait(worker, 30) == "aborted"
    chat.unload(board, replaced.servers)


def test_a_page_whose_worker_was_replaced_is_told_so(board):
    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    replaced = chat.load_servers(board, OTHER, {}, False, {})  # another page loads another template
    _wait_ready(board, replaced.servers)
    live = chat.live_servers(board, first.servers)
    assert "main" not in live
    english = chat.gone_text(board, first.servers, live, "en")
    assert "no longer running" in english and "demo is loaded now" in english and "another one" in english
    chinese = chat.gone_text(board, first.servers, live, "zh")
    assert "已不在运行" in chinese and "demo" in chinese
    chat.unload(board, replaced.servers)
    assert "Press Load model" in chat.gone_text(board, first.servers, {}, "en")
    assert chat.gone_text(board, {}, {}, "en") == "No model is loaded: press Load model first."


def test_a_reply_cut_off_by_an_unload_says_so(board):
    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    live = chat.live_servers(board, first.servers)
    errors = [("main", "The chat server at http://127.0.0.1:1/v1 did not answer: peer closed connection")]
    assert chat.reply_error_text(board, live, errors, "en").startswith("The reply failed: The chat server")
    chat.unload(board, {})  # another page's Unload
    assert "unloaded while it answered" in chat.reply_error_text(board, live, errors, "en")
    assert "被卸载" in chat.reply_error_text(board, live, errors, "zh")


def test_an_invalid_load_ends_no_worker(board):
    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    bad = chat.load_servers(board, forms.TopValues.of("demo", "lora", "", "no_such_template"), {}, False, {})
    assert bad.problems and bad.servers == {}
    assert _workers(board) == [first.servers["main"]]
    chat.unload(board, first.servers)


def test_unusable_tools_are_said_in_the_pages_language(board, monkeypatch):
    """The Tools box's JSON error came in English on a Chinese page, unframed."""
    from app.ui import build_ui

    monkeypatch.setattr(chat, "live_servers", lambda board, servers: {"main": {"id": "r1", "ready": True}})
    demo = build_ui(board)
    on_send = next(f.fn for f in demo.fns.values() if "on_send" in getattr(f.fn, "__qualname__", ""))
    values = [block.value for block in next(f for f in demo.fns.values() if f.fn is on_send).inputs[8:]]
    for lang, words in (("zh", "工具定义不可用"), ("en", "The tools are not usable")):
        *_, last = on_send({"text": "hi", "files": []}, False, [], [], "", "[{]", {"main": "r1"}, lang, *values)
        status = last[-1]
        assert status.startswith(words) and "not valid JSON" in status
        assert ("Give a JSON list" in status) == (lang == "en")


def test_a_page_opened_while_a_worker_loads_says_it_is_loading(board, monkeypatch):
    """A page opened (or reopened) while a worker was still loading said "Reconnected to the running chat server(s)
    ... (servers main: 0)" (or nothing at all for its own Load), though nothing could answer yet."""
    from app.ui import build_ui

    first = chat.load_servers(board, DEMO, {}, False, {})
    worker = first.servers["main"]
    real = chat.live_servers

    def loading(board, servers):
        return {side: {**status, "ready": False, "port": 0} for side, status in real(board, servers).items()}

    monkeypatch.setattr(chat, "live_servers", loading)
    demo = build_ui(board)
    status = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-chat-status")
    fn = next(f for f in demo.fns.values() if status in f.outputs and any(t[1] == "load" for t in f.targets))
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    for servers, code, words in (({}, "en", "is still loading"), (first.servers, "zh", "仍在工作进程中加载")):
        out = fn.fn(*[servers if b is not lang else code for b in fn.inputs])
        line = out[fn.outputs.index(status)]
        assert words in line and "demo" in line and ": 0" not in line, line
        assert out[1] == {"main": worker}
    chat.unload(board, first.servers)


def test_a_page_opened_while_a_worker_loads_says_when_it_is_ready(board, monkeypatch):
    """The "still loading" line of a page opened (or reopened) mid-load stayed for good: the Load that would have said
    "ready" belonged to the page before, and the Chat tab has no timer. Now the page waits for the worker and says
    what it serves; it says nothing once the worker is being ended (an Unload or another Load says so)."""
    from app.ui import build_ui

    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    real, asked = chat.live_servers, []

    def loading_twice(board, servers):
        asked.append(1)
        return {side: {**status, "ready": False, "port": 0} if len(asked) <= 2 else status
                for side, status in real(board, servers).items()}

    monkeypatch.setattr(chat, "live_servers", loading_twice)
    demo = build_ui(board)
    follow = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_still_loading")
    *_, (line, label) = follow(first.servers, "zh")
    assert line.startswith("就绪：demo") and label["label"].key == "chat_base", (line, label)
    assert len(asked) == 3
    # ready all along: the page load's line stands; no language yet: the language's arrival runs it again
    assert list(follow(first.servers, "en")) == [(gr.skip(), gr.skip())]
    assert list(follow(first.servers, "")) == [(gr.skip(), gr.skip())]
    chat.unload(board, first.servers)  # being ended: nothing to say
    asked.clear()
    assert list(follow(first.servers, "en")) == [(gr.skip(), gr.skip())]


def test_an_invalid_load_keeps_the_page_on_its_worker(board):
    """An invalid Load ends no worker, so the page must not forget the one it has (it then said "No model is loaded"
    on Send while its worker still ran)."""
    import gradio as gr

    from app.ui import build_ui

    first = chat.load_servers(board, DEMO, {}, False, {})
    _wait_ready(board, first.servers)
    demo = build_ui(board)
    on_load = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_load"
                   and f.fn.__module__ == "app.tabs.chat")
    inputs = next(f for f in demo.fns.values() if f.fn is on_load).inputs
    values = [getattr(block, "value", None) for block in inputs[7:]]
    *_, last = on_load("demo", "lora", "", "no_such_template", False, first.servers, "en", *values)
    message, servers, _, label = last
    assert "no_such_template" in message and servers != {}  # gr.skip(): the page's servers stay as they were
    assert label == gr.skip()  # and the chat box keeps its label
    assert _workers(board) == [first.servers["main"]]
    chat.unload(board, first.servers)


def test_a_page_load_refresh_with_no_worker_leaves_the_pages_servers_alone(board):
    # the page's load (and its language's arrival) refresh races a Load pressed at once: answered after the Load
    # wrote its new worker into the page's servers, clearing them made the first send say "load a model first"
    import gradio as gr

    from app.ui import build_ui

    demo = build_ui(board)
    on_page_load = next(f.fn for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "on_page_load"
                        and len(f.outputs) == 4)
    status, servers, base, label = on_page_load({}, "en")  # nothing live yet: the Load's worker is not submitted
    assert all(isinstance(out, dict) and out.get("__type__") == "update" and len(out) == 1 for out in
               (status, servers, base, label)), (status, servers, base, label)  # gr.skip(): every output as it is
    assert gr.skip() == servers


def test_a_late_page_refresh_never_brings_back_a_worker_being_ended(board, monkeypatch):
    """The page's load refresh (run again when its language arrives or changes) is answered with the servers the page
    had when it was sent. A Load of another model or an Unload pressed meanwhile has signalled those workers, which
    run on for a moment: written back, the page sent to a worker on its way out ("no longer running") and its line
    said Ready again after the Unload."""
    import gradio as gr

    from app.ui import build_ui

    real = forms.resolved_mapping  # the workers ignore SIGTERM: they run on (signalled) until the SIGKILL
    monkeypatch.setattr(forms, "resolved_mapping", lambda cfg, out: {**real(cfg, out), "fake_ignore_term": True})
    monkeypatch.setattr(board.jobs, "kill_grace", 60.0)  # which comes at the end of the test, not in it
    demo = build_ui(board)
    on_page_load = next(f.fn for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "on_page_load"
                        and len(f.outputs) == 4)
    first = chat.load_servers(board, DEMO, {}, False, {})
    started = [first.servers["main"]]
    try:
        _wait_ready(board, first.servers)
        sent = dict(first.servers)  # the page's servers as the refresh was sent
        replaced = chat.load_servers(board, OTHER, {}, False, first.servers)  # the page's Load of another template
        started.append(replaced.servers["main"])
        assert board.jobs.status(sent["main"])["status"] == "running"  # signalled, still running
        _, servers, _, _ = on_page_load(sent, "en")
        assert servers == replaced.servers, servers  # the Load's worker, not the one it is ending
        _wait_ready(board, replaced.servers)
        chat.unload(board, replaced.servers)  # the page's Unload: it wrote {} and "Unloaded 1 chat server(s)"
        assert board.jobs.status(replaced.servers["main"])["status"] == "running"
        for late in (sent, {}, replaced.servers):  # sent before the Load, as the page opened, after the Load
            assert on_page_load(late, "en") == (gr.skip(), gr.skip(), gr.skip(), gr.skip()), late
    finally:
        for run_id in started:  # the SIGKILL the manager would send in a minute
            with contextlib.suppress(KeyError, ProcessLookupError):
                os.killpg(board.jobs.folder(run_id).info()["pgid"], signal.SIGKILL)
            board.jobs.wait(run_id, 30)


def test_a_worker_that_ended_as_it_loaded_says_why_in_the_pages_language(board):
    """The Load's line quoted run.json's English (or the bare status, "aborted") on a Chinese page."""
    run_id = board.jobs.submit("chat", {"fake_steps": 1, "fake_silent_exit": True})
    assert board.jobs.wait(run_id, 30) == "failed"
    zh = chat.failure_text(board, board.jobs.status(run_id), "zh")
    assert zh.startswith("进程以退出码 3 结束。") and "The process" not in zh, zh
    assert chat.failure_text(board, board.jobs.status(run_id), "en").startswith("The process exited with code 3.")
    stopped = board.jobs.submit("chat", {"fake_steps": 100})
    board.jobs.abort(stopped)
    assert board.jobs.wait(stopped, 30) == "aborted"
    assert chat.failure_text(board, board.jobs.status(stopped), "zh") == "已中止"


def test_the_status_line_names_the_servers_in_the_pages_language():
    """"就绪：demo，无适配器（服务 main: 36635）": the sides' code names showed on a Chinese page."""
    assert chat.ports_text("zh", {"main": {"port": 36635}}) == "36635"
    both = {"main": {"port": 36635}, "base": {"port": 36636}}
    assert chat.ports_text("zh", both) == "微调后的模型: 36635, 基础模型: 36636"
    assert chat.ports_text("en", both) == "Fine-tuned model: 36635, Base model: 36636"


def _handler(demo, name):
    return next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == name
                and f.fn.__module__ == "app.tabs.chat")


def test_the_chat_box_is_labelled_by_what_is_loaded(board):
    """The chat box was labelled "Fine-tuned model" ("微调后的模型") with the base model alone loaded; now it says
    what it talks to: the base model, the fine-tuned one (an adapter loaded), or just "Chat" while nothing is loaded.
    A key, so that gradio shows it in the page's language and again at each switch."""
    from app.ui import build_ui

    demo = build_ui(board)
    box = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-chatbot")
    assert box.label.key == "chat_box"  # as the page opens: nothing loaded
    on_load, on_unload, on_page_load = (_handler(demo, n) for n in ("on_load", "on_unload", "on_page_load"))
    inputs = next(f for f in demo.fns.values() if f.fn is on_load).inputs
    values = [getattr(block, "value", None) for block in inputs[7:]]
    steps = list(on_load("demo", "lora", "", "chatml", False, {}, "zh", *values))
    labels = [step[3].get("label") for step in steps if step[3].get("label") is not None]
    servers = steps[-1][1]
    assert [label.key for label in labels] == ["chat_box", "chat_base"], steps[-1]  # loading, then ready
    assert on_page_load(servers, "zh")[3]["label"].key == "chat_base"  # the page reopened, or its language switched
    _, cleared, label = on_unload(servers, "zh")
    assert cleared == {} and label["label"].key == "chat_box"
    # a worker serving an adapter (the page of an earlier board, adopted as the page opens)
    run_id = board.jobs.submit("chat", {"model_name_or_path": "demo", "adapter_name_or_path": "/runs/lora-1",
                                        "template": "chatml"}, meta={"side": "main"})
    _wait_ready(board, {"main": run_id})
    assert on_page_load({}, "en")[3]["label"].key == "chat_finetuned"
    chat.unload(board, {"main": run_id})


def test_an_empty_reply_is_said_and_a_good_reply_puts_the_ready_line_back(board, monkeypatch):
    """A reply that ended at once (no text, or only white space) left an empty bubble and the status line as it was,
    as if the board had lost the answer; it now says so in the page's language. The next good reply puts the ready
    line back over that note (and over an earlier failure's)."""
    from app.ui import build_ui

    replies = []
    monkeypatch.setattr(chat, "live_servers", lambda board, servers: {"main": {"id": "r1", "ready": True}})
    monkeypatch.setattr(chat.chat_workers, "client_of", lambda board, info: ("http://127.0.0.1:1/v1", None))
    monkeypatch.setattr(chat, "stream_chat", lambda *a, **k: iter(replies.pop(0)))
    monkeypatch.setattr(chat, "served_line", lambda board, live, lang, adopted: f"ready line ({lang})")
    demo = build_ui(board)
    on_send = _handler(demo, "on_send")
    values = [block.value for block in next(f for f in demo.fns.values() if f.fn is on_send).inputs[8:]]

    def send(lang, *deltas):
        replies.append(list(deltas))
        *_, last = on_send({"text": "hi", "files": []}, False, [], [], "", "", {"main": "r1"}, lang, *values)
        return last

    last = send("en", {"content": " \n"})
    assert last[-1].startswith("A reply came back empty") and last[3][-1] == {"role": "assistant", "content": " \n"}
    assert send("zh")[-1].startswith("回复为空")
    assert send("en", {"content": "Hello"})[-1] == "ready line (en)"
    called = send("en", {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                          "function": {"name": "f", "arguments": "{}"}}]})
    assert called[-1] == "ready line (en)"  # a tool call is an answer, not an empty reply
