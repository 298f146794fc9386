"""The Chat tab: talks to ``lf-engine api`` server subprocesses (never loads a model in the board process).

Load starts one server for the model with the picked adapter, and optionally a second one for the base model,
so that both answer the same prompt side by side. Replies stream; Stop closes the connection (the server stops
generating); Unload ends the servers and frees their memory. Pages share servers: a Load keeps any live one that
already serves the same model, adapter, template and settings (see app.chat_workers), and each page keeps its own
conversation.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from app import chat_media, chat_workers, forms
from app.chat_client import ChatError, ToolsError, merge_streams, parse_tools, prepare, stream_chat
from app.chat_status import (
    empty_reply_note,
    failure_text,
    gone_text,
    ports_text,
    reply_error_text,
    served,
    served_line,
    served_model,
)
from app.context import Board
from app.engine_text import problems_text
from app.i18n import L, t
from app.jobs import JobError
from app.lang_gate import LANG_UNKNOWN
from app.markup import SafeMarkdown
from app.topbar import TopBar, top_values
from app.visible_text import reveal
from app.widgets import collect, empty_problems, make_widget

CHAT_KEYS = ["temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty"]
LOAD_TIMEOUT = 900.0
SIDES = ("main", "base")


@dataclass
class ChatTab:
    compare: gr.Checkbox
    load_btn: gr.Button
    unload_btn: gr.Button
    hint: gr.Markdown
    status: gr.Markdown
    system: gr.Textbox
    tools: gr.Code
    chatbot: gr.Chatbot
    chatbot_base: gr.Chatbot
    message: gr.MultimodalTextbox
    as_tool: gr.Checkbox
    send_btn: gr.Button
    stop_btn: gr.Button
    clear_btn: gr.Button
    servers: gr.BrowserState
    convo: gr.State
    convo_base: gr.State
    keys: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)


def build(board: Board) -> ChatTab:
    fields: dict[str, Any] = {}
    with gr.Row(equal_height=True):
        compare = gr.Checkbox(label=L("chat_compare"), info=L("chat_compare_info"), value=False, scale=2)
        load_btn = gr.Button(L("chat_load"), variant="primary", scale=1, elem_id="lf-chat-load")
        unload_btn = gr.Button(L("chat_unload"), variant="stop", scale=1)
    # "no model loaded" is a hint of its own, shown while the status line is empty: a text that starts as a
    # translation key is put back by the page on every language switch, even after a handler wrote another one
    # (gradio 6.31), and the status line said "no model loaded" over a loaded model until the switch's handler answered
    hint = SafeMarkdown(L("chat_not_loaded"), elem_id="lf-chat-hint")
    status = SafeMarkdown(elem_id="lf-chat-status")
    with gr.Row():
        with gr.Column(scale=3):
            with gr.Row():
                chatbot = gr.Chatbot(label=L("chat_box"), height=460, buttons=["copy"], scale=1,  # nothing loaded
                                     elem_id="lf-chatbot")
                chatbot_base = gr.Chatbot(label=L("chat_base"), height=460, visible=False, buttons=["copy"], scale=1)
            message = gr.MultimodalTextbox(label=L("chat_message"), placeholder=L("chat_placeholder"), lines=1,
                                           max_lines=8, file_types=["image", "video", "audio"],
                                           file_count="multiple", sources=["upload"], elem_id="lf-chat-message")
            with gr.Row():
                as_tool = gr.Checkbox(label=L("chat_as_tool"), value=False, scale=2)
                send_btn = gr.Button(L("chat_send"), variant="primary", scale=1)
                stop_btn = gr.Button(L("chat_stop"), scale=1)
                clear_btn = gr.Button(L("chat_clear"), scale=1)
        with gr.Column(scale=1):
            system = gr.Textbox(label=L("chat_system"), lines=3)
            for key in CHAT_KEYS:
                fields[key] = make_widget(key, tab="chat")
            with gr.Accordion(L("chat_tools"), open=False):
                tools = gr.Code(language="json", label=L("chat_tools_label"), lines=8)
    return ChatTab(
        compare=compare,
        load_btn=load_btn,
        unload_btn=unload_btn,
        hint=hint,
        status=status,
        system=system,
        tools=tools,
        chatbot=chatbot,
        chatbot_base=chatbot_base,
        message=message,
        as_tool=as_tool,
        send_btn=send_btn,
        stop_btn=stop_btn,
        clear_btn=clear_btn,
        servers=gr.BrowserState({}, storage_key="lfboard-chat-servers", secret=board.workspace.secret()),
        convo=gr.State([]),
        convo_base=gr.State([]),
        keys=list(fields),
        fields=fields,
    )


def live_servers(board: Board, servers: dict[str, str] | None) -> dict[str, dict[str, Any]]:
    """side -> status of the chat servers that are still running."""
    out = {}
    for side, run_id in (servers or {}).items():
        try:
            status = board.jobs.status(run_id)
        except JobError:
            continue
        if status["status"] in ("queued", "running"):
            out[side] = status
    return out


def staying_servers(board: Board, servers: dict[str, str] | None) -> dict[str, dict[str, Any]]:
    """:func:`live_servers` less those being ended (an Unload or another Load signalled them; they still run a
    moment)."""
    out = {}
    for side, status in live_servers(board, servers).items():
        try:
            info = board.jobs.folder(status["id"]).info()
        except JobError:
            continue
        if not chat_workers.unloading(info):
            out[side] = status
    return out


def unload(board: Board, servers: dict[str, str] | None, keep: Any = ()) -> list[str]:
    """Stop this page's chat servers and any other live one of the workspace (say, left by an earlier board or
    another tab), except the run ids in ``keep``: Unload always frees the memory. Returns the run ids signalled."""
    return chat_workers.stop_all(board, servers, keep=keep)


def plan_servers(top: forms.TopValues, sampling: dict[str, Any], compare: bool) -> dict[str, dict[str, Any]]:
    """{side: the chat server's mapping} for a Load."""
    plans = {"main": forms.chat_mapping(top, sampling, with_adapter=True)}
    if compare:
        plans["base"] = forms.chat_mapping(top, sampling, with_adapter=False)
    return plans


def reusable_servers(board: Board, servers: dict[str, str] | None, plans: dict[str, dict[str, Any]]) -> dict[str, str]:
    """{side: run id} of the live workers that already serve what ``plans`` asks for: this page's own first, then
    any other of the workspace (another page's, one still loading included). A Load of a model and adapter that is
    loaded already keeps its worker instead of loading it again; each page keeps its own conversation."""
    live = [info for info in chat_workers.live_chat_runs(board) if not chat_workers.unloading(info)]
    live_ids = [info["id"] for info in live]
    keep: dict[str, str] = {}
    for side, mapping in plans.items():
        checked = forms.validate(mapping, "api")
        if not checked.ok:
            continue
        mine = (servers or {}).get(side)
        candidates = ([mine] if mine in live_ids else []) + [i for i in live_ids if i != mine]
        for run_id in candidates:
            if run_id not in keep.values() and chat_workers.serves(board, run_id, checked.config):
                keep[side] = run_id
                break
    return keep


@dataclass
class LoadPlan:
    """What a Load did: the page's workers by side, the problems that kept it from starting any, the workers kept
    from another page, and the workers a reply is streaming from that it refused to end."""

    servers: dict[str, str]
    problems: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)


def load_servers(board: Board, top: forms.TopValues, sampling: dict[str, Any], compare: bool,
                 servers: dict[str, str] | None) -> LoadPlan:
    """A Load: keep the live workers (of any page) that serve what it asks for, end the others and start the missing
    ones. Nothing is ended when a plan is invalid, or when a worker it would end is streaming a reply (``busy``)."""
    plans = plan_servers(top, sampling, compare)
    problems = [p for mapping in plans.values() for p in forms.validate(mapping, "api").problems]
    if problems:
        return LoadPlan({}, problems=problems)
    with chat_workers.LOAD_LOCK:  # two pages that Load at once see each other's workers
        keep = reusable_servers(board, servers, plans)
        ending = {*(servers or {}).values(), *(i["id"] for i in chat_workers.live_chat_runs(board))}
        busy = chat_workers.busy(ending - set(keep.values()))
        if busy:
            return LoadPlan({}, busy=busy)
        unload(board, servers, keep=set(keep.values()))  # the same model and adapter again: its worker stays
        started, problems = start_servers(board, top, sampling, compare, reuse=keep)
    mine = set((servers or {}).values())
    return LoadPlan(started, problems=problems, shared=[i for i in keep.values() if i not in mine],
                    started=[i for s, i in started.items() if s not in keep])


def box_label(adapter: str | None) -> Any:
    """The main chat box's label by what it talks to: the fine-tuned model (an adapter is loaded), the base model (no
    adapter), or a plain "Chat" while nothing is loaded (``None``). A key, so that it follows the page's language."""
    return gr.update(label=L("chat_box") if adapter is None else L("chat_finetuned") if adapter else L("chat_base"))


def start_servers(
    board: Board, top: forms.TopValues, sampling: dict[str, Any], compare: bool, reuse: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Validate and start the server(s), keeping the sides in ``reuse``; returns ({side: run id}, problems)."""
    plans = plan_servers(top, sampling, compare)
    servers, problems = dict(reuse or {}), []
    for side, mapping in plans.items():
        if side in servers:
            continue
        checked = forms.validate(mapping, "api")
        if not checked.ok:
            problems += checked.problems
            continue
        run_id = board.jobs.new_run_id("chat")
        resolved = forms.resolved_mapping(checked.config, board.jobs.runs_dir / run_id)
        servers[side] = board.jobs.submit(
            "chat", resolved, run_id=run_id, args=chat_workers.worker_args(board), meta={"side": side},
            env=chat_workers.worker_env(board, run_id),
        )
    if servers and not problems:
        prepare()  # the chat client is ready before the worker is, so the first message does not build it
    return servers, problems


def openai_messages(convo: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    system_turn = [{"role": "system", "content": system}] if system and system.strip() else []
    return chat_media.for_server(system_turn + list(convo))


def tool_turn(msg: dict[str, Any]) -> bool:
    """A turn the chat box titles (in the page's language): a tool's result or the model's tool calls."""
    return msg.get("role") == "tool" or bool(msg.get("tool_calls"))


def to_chatbot(convo: list[dict[str, Any]], lang: str) -> list[dict[str, Any]]:
    """The conversation (OpenAI messages) as the chatbot shows it."""
    shown = []
    for msg in convo:
        if msg["role"] == "tool":
            shown.append(
                {"role": "user", "content": msg["content"], "metadata": {"title": t(lang, "chat_tool_result")}}
            )
        elif msg.get("tool_calls"):
            calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in msg["tool_calls"]]
            if msg.get("content"):
                shown.append({"role": "assistant", "content": msg["content"]})
            shown.append(
                {"role": "assistant", "content": "\n".join(calls), "metadata": {"title": t(lang, "chat_tool_call")}}
            )
        else:
            shown.extend(chat_media.shown(msg))
    for item in shown:  # a reordering character in a message or a reply shows as a mark (app.visible_text)
        if isinstance(item.get("content"), str):
            item["content"] = reveal(item["content"], names=False)
    return shown


WAIT_POLL = 0.5
"""Seconds between the looks at a loading worker while a message sent meanwhile waits for it."""


def waiting_bubble(lang: str) -> dict[str, Any]:
    """What the chat box shows under the conversation while a message waits for the model's load to finish (the
    message itself stays in the box, which takes no typing meanwhile)."""
    return {"role": "assistant", "content": "", "metadata": {"title": t(lang, "chat_waiting_for_load"),
                                                             "status": "pending"}}


def waiting_shown(shown: Any) -> bool:
    """Whether the chat box (as the page sends it) ends with :func:`waiting_bubble`."""
    last = shown[-1] if isinstance(shown, list) and shown else None
    return isinstance(last, dict) and (last.get("metadata") or {}).get("status") == "pending"


def box_value(value: dict[str, Any], waited: bool) -> Any:
    """The message box's new value; after a wait for the load, also made editable again."""
    return gr.update(value=value, interactive=True) if waited else value


def wait_until_ready(board: Board, servers: dict[str, str] | None, timeout: float = LOAD_TIMEOUT,
                     poll: float = WAIT_POLL) -> dict[str, dict[str, Any]] | None:
    """The page's chat workers once all of them are ready; None when one of them ended meanwhile (its load failed or
    timed out, an Unload, a Load of another model) or after ``timeout`` seconds."""
    sides, deadline = set(live_servers(board, servers)), time.time() + timeout
    while time.time() < deadline:
        live = live_servers(board, servers)
        if set(live) != sides:
            return None
        if all(s.get("ready") for s in live.values()):
            return live
        time.sleep(poll)
    return None


def refusal_text(err: chat_media.UploadRefused, lang: str) -> str:
    """The translated message of a refused upload (media kinds in the page's language)."""
    params = dict(err.params)
    if "kind" in params:
        params["kind"] = t(lang, f"preview_{params['kind']}")
    if "takes" in params:
        params["takes"] = ", ".join(t(lang, f"preview_{k}") for k in params["takes"]) or t(lang, "chat_text_only")
    if err.key == "chat_upload_too_large":
        return t(lang, "chat_upload_too_large", **params)
    if err.key == "chat_upload_unknown_type":
        return t(lang, "chat_upload_unknown_type", **params)
    if err.key == "chat_media_refused":
        return t(lang, "chat_media_refused", **params)
    return t(lang, "chat_upload_not_allowed", **params)


def upload_folder() -> str:
    """Gradio's folder for uploaded files: the only place a chat upload may come from."""
    from gradio.utils import get_upload_folder

    return get_upload_folder()


HINT_JS = "(text) => ({__type__: 'update', visible: text ? 'hidden' : true})"
"""The hint while the status line is empty, set in the page (no server trip). Hidden as "hidden", not False: gradio
draws a component shown again anew, with its text as last shown, which then no longer follows a language switch."""


def wire(tab: ChatTab, top: TopBar, board: Board, demo: gr.Blocks) -> None:
    private = {"api_visibility": "private"}
    tab.status.change(None, tab.status, tab.hint, js=HINT_JS, show_progress="hidden", **private)

    def on_load(model, ft, checkpoint, template, compare, servers, lang, *values):
        top_vals = top_values(model, ft, checkpoint, template)
        if compare and not top_vals.checkpoint:
            yield t(lang, "chat_compare_needs_checkpoint"), gr.skip(), gr.skip(), gr.skip()
            return
        refused = empty_problems(tab.keys, values, lang)  # an empty number box would serve its default unseen
        if refused:
            yield problems_text(lang, t(lang, "chat_problems"), refused), gr.skip(), gr.skip(), gr.skip()
            return
        sampling = collect(tab.keys, list(values))
        plan = load_servers(board, top_vals, sampling, compare, servers)
        if plan.busy:
            yield t(lang, "chat_busy", model=served_model(board, plan.busy[0])), gr.skip(), gr.skip(), gr.skip()
            return
        if plan.problems:  # nothing was ended: the page keeps the workers it had
            chat_workers.stop_ids(board, plan.started)
            yield problems_text(lang, t(lang, "train_problems"), plan.problems), gr.skip(), gr.skip(), gr.skip()
            return
        started = plan.servers
        yield t(lang, "chat_loading", elapsed=0), started, gr.update(visible=compare), box_label(None)
        begin = time.time()
        while time.time() - begin < LOAD_TIMEOUT:
            states = {side: board.jobs.status(run_id) for side, run_id in started.items()}
            failed = [s for s in states.values() if s["status"] in ("failed", "aborted", "completed")]
            if failed:
                chat_workers.stop_ids(board, plan.started)  # a worker it shares with another page is that page's
                yield t(lang, "chat_load_failed", error=failure_text(board, failed[0], lang)), {}, gr.skip(), gr.skip()
                return
            if all(s.get("ready") and s.get("port") for s in states.values()):
                ports = ports_text(lang, states)
                line = (t(lang, "chat_ready", model=top_vals.model, adapter=top_vals.checkpoint, ports=ports)
                        if top_vals.checkpoint else t(lang, "chat_ready_no_adapter", model=top_vals.model, ports=ports))
                yield (line + ("\n\n" + t(lang, "chat_shared") if plan.shared else ""), started, gr.skip(),
                       box_label(top_vals.checkpoint or ""))
                return
            time.sleep(1.0)
            yield t(lang, "chat_loading", elapsed=int(time.time() - begin)), started, gr.skip(), gr.skip()
        chat_workers.stop_ids(board, plan.started)
        yield t(lang, "chat_load_timeout", seconds=int(LOAD_TIMEOUT)), {}, gr.skip(), gr.skip()

    tab.load_btn.click(
        on_load,
        [*top.values(), tab.compare, tab.servers, top.lang, *tab.fields.values()],
        [tab.status, tab.servers, tab.chatbot_base, tab.chatbot],
        concurrency_limit=None,
        **private,
    )

    def on_unload(servers, lang):
        stopped = unload(board, servers)
        return t(lang, "chat_unloaded_one" if len(stopped) == 1 else "chat_unloaded", n=len(stopped)), {}, box_label(None)

    tab.unload_btn.click(on_unload, [tab.servers, top.lang], [tab.status, tab.servers, tab.chatbot], **private)

    def on_send(message, as_tool, convo, convo_base, system, tools_text, servers, lang, *values):
        message = message if isinstance(message, dict) else {"text": message or "", "files": []}
        text, files = str(message.get("text") or ""), list(message.get("files") or [])
        if not text.strip() and not files:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        live = live_servers(board, servers)
        if "main" not in live:
            yield (gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gone_text(board, servers, live, lang))
            return
        try:
            takes = chat_media.model_media(board, live["main"]["id"]) if files else ()
            uploads = chat_media.checked_uploads(files, takes, board.max_upload_mb, upload_folder())
        except chat_media.UploadRefused as err:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), refusal_text(err, lang)
            return
        try:
            tools = parse_tools(tools_text)
        except ToolsError as err:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), t(lang, "chat_tools_unusable", error=err.detail)
            return
        refused = empty_problems(tab.keys, values, lang)
        if refused:
            yield (gr.skip(),) * 5 + (problems_text(lang, t(lang, "chat_problems"), refused),)
            return
        sampling = collect(tab.keys, list(values))
        waited = not all(s.get("ready") for s in live.values())
        if waited:  # Load pressed, the model still loads: the message waits in the box and is sent once it is ready
            yield gr.update(interactive=False), [*to_chatbot(convo, lang), waiting_bubble(lang)], *(gr.skip(),) * 4
            live = wait_until_ready(board, servers)
            if live is None:  # the load failed or was ended (its line says why): the message stays in the box, unsent
                yield gr.update(interactive=True), to_chatbot(convo, lang), *(gr.skip(),) * 4
                return
        request = {
            "temperature": sampling.get("temperature"),
            "top_p": sampling.get("top_p"),
            "top_k": sampling.get("top_k"),
            "max_tokens": sampling.get("max_new_tokens"),
            "repetition_penalty": sampling.get("repetition_penalty"),
        }
        user = {"role": "tool" if as_tool and not uploads else "user", "content": chat_media.user_content(text, uploads)}
        convos = {"main": [*convo, user], "base": [*convo_base, user]}
        sides = [s for s in SIDES if s in live and live[s].get("ready")]
        replies = {s: {"role": "assistant", "content": ""} for s in sides}
        stop = threading.Event()
        streams = {}
        for s in sides:
            url, key = chat_workers.client_of(board, live[s])
            streams[s] = stream_chat(url, openai_messages(convos[s], system), tools=tools, stop=stop, api_key=key,
                                     **request)

        def frame(note: str | None = None):
            full = {s: convos[s] + ([replies[s]] if s in replies else []) for s in SIDES}
            return (
                box_value({"text": "", "files": []}, waited),
                to_chatbot(full["main"], lang),
                to_chatbot(full["base"], lang),
                full["main"],
                full["base"],
                note if note is not None else gr.skip(),
            )

        yield frame()
        errors = []
        try:
            with chat_workers.streaming(live[s]["id"] for s in sides):  # a Load elsewhere does not end it mid-reply
                for side, delta in merge_streams(streams, stop):
                    if isinstance(delta, ChatError):
                        errors.append((side, str(delta)))
                    elif isinstance(delta, dict) and "content" in delta:
                        replies[side]["content"] += delta["content"]
                    elif isinstance(delta, dict) and "tool_calls" in delta:
                        replies[side].setdefault("tool_calls", []).extend(
                            {k: v for k, v in call.items() if k != "index"} for call in delta["tool_calls"]
                        )
                    yield frame()
        finally:
            stop.set()
        # a good reply puts the ready line back over an earlier reply's note (a failure, an empty reply)
        note = (reply_error_text(board, live, errors, lang) if errors
                else empty_reply_note(replies, lang) or served_line(board, live, lang, adopted=False))
        if errors and not any(replies[s]["content"] or replies[s].get("tool_calls") for s in sides):
            # refused before a word (a prompt too long for the model, a worker gone): the turn is taken back and
            # its text returned to the box, so that the next message is not refused for this one too
            yield (box_value({"text": text, "files": files}, waited), to_chatbot(convo, lang), to_chatbot(convo_base, lang), convo,
                   convo_base, note)
            return
        yield frame(note)

    send_io = {
        "inputs": [
            tab.message,
            tab.as_tool,
            tab.convo,
            tab.convo_base,
            tab.system,
            tab.tools,
            tab.servers,
            top.lang,
            *tab.fields.values(),
        ],
        "outputs": [tab.message, tab.chatbot, tab.chatbot_base, tab.convo, tab.convo_base, tab.status],
        "concurrency_limit": None,
        **private,
    }
    send_click = tab.send_btn.click(on_send, **send_io)
    send_submit = tab.message.submit(on_send, **send_io)

    def on_stop(shown, convo, lang):
        # a message waiting for the load stays in the box, unsent: the box takes typing again and the waiting note goes
        if waiting_shown(shown):
            return gr.update(interactive=True), to_chatbot(convo, lang)
        return gr.update(interactive=True), gr.skip()

    tab.stop_btn.click(on_stop, [tab.chatbot, tab.convo, top.lang], [tab.message, tab.chatbot],
                       cancels=[send_click, send_submit], show_progress="hidden", **private)
    tab.clear_btn.click(
        lambda: ([], [], [], []), None, [tab.chatbot, tab.chatbot_base, tab.convo, tab.convo_base], **private
    )

    def on_relabel(convo, convo_base, lang):
        # the conversation's tool calls and results are titled in the page's language: again after a switch
        return tuple(to_chatbot(c, lang) if any(tool_turn(m) for m in c or []) else gr.skip()
                     for c in (convo, convo_base))

    top.lang.change(on_relabel, [tab.convo, tab.convo_base, top.lang], [tab.chatbot, tab.chatbot_base],
                    show_progress="hidden", **private)

    def on_page_load(servers, lang):
        # also when the page's language is set: the load's line is composed before it is known (a Chinese page
        # kept it in English). Answered late, ``servers`` is the page's as it was when this was sent: a worker that a
        # Load or an Unload pressed meanwhile is ending must not be written back over what that wrote
        live = staying_servers(board, servers)
        adopted = not live
        if adopted:  # a new browser, or the page of an earlier board: adopt the workers still running
            live = staying_servers(board, chat_workers.adopt(board))
        if not live:  # leave the page's servers as they are: a Load that started while this was under way has
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()  # written its new worker there (a send to a gone one says so)
        main = live.get("main") or next(iter(live.values()))
        ready = all(s.get("ready") and s.get("port") for s in live.values())
        return (
            served_line(board, live, lang, adopted),
            {s: v["id"] for s, v in live.items()},
            gr.update(visible="base" in live),
            box_label(served(board, main["id"])[1] if ready else None),
        )

    def on_still_loading(servers, lang):
        # a page opened (or reopened, or switched) while its workers load: its line said "still loading" for good,
        # for the Load that would have said "ready" belonged to the page before (the Chat tab has no timer)
        ids, begin, waited = dict(servers or {}), time.time(), False
        while ids and lang != LANG_UNKNOWN and time.time() - begin < LOAD_TIMEOUT:
            live = staying_servers(board, ids)
            if set(live) != set(ids):  # one ended or is being ended: the Load or Unload that did it says so
                break
            if all(s.get("ready") and s.get("port") for s in live.values()):
                if not waited:  # ready all along: the page load's line says so already
                    break
                main = live.get("main") or next(iter(live.values()))
                yield served_line(board, live, lang, adopted=False), box_label(served(board, main["id"])[1])
                return
            waited = True
            time.sleep(1.0)
        yield gr.skip(), gr.skip()

    gr.on([demo.load, top.lang.change], on_page_load, [tab.servers, top.lang],
          [tab.status, tab.servers, tab.chatbot_base, tab.chatbot], show_progress="hidden", **private).then(
        on_still_loading, [tab.servers, top.lang], [tab.status, tab.chatbot], show_progress="hidden",
        concurrency_limit=None, **private)
