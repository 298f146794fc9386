"""The two sides of the chat benchmark (examples/benchmark/run_chat_benchmark.py), each run as its own process.

    python examples/benchmark/chat_drivers.py ours --model DIR [--adapter DIR] --out FILE.json [options]
    /work/lf-venv/bin/python examples/benchmark/chat_drivers.py lf --model DIR [--adapter DIR] --out FILE.json

``ours`` plays the board: it builds the board's page objects over a fresh workspace (no HTTP server), presses the
Chat tab's Load through its own handler (which starts an ``lf-engine api`` worker through the job manager), streams
each prompt through ``app.chat_client.stream_chat`` with the worker's key (what the tab's Send does), presses Load
again with the same model and adapter (the worker should be reused) and unloads.

``lf`` is LLaMA-Factory's python chat API: ``llamafactory.chat.ChatModel`` with ``infer_backend: huggingface``,
replies streamed with ``stream_chat``. Its Load is this process's start (taken by the caller) to the model being
ready.

Both decode greedily with the same ``max_new_tokens`` and write one JSON file: per prompt the seconds to the first
non-empty piece of text, the seconds to the end of the reply, the reply and its token count (the reply re-tokenized
with the model's tokenizer, the same rule for both). Only the standard library is imported at the top: the ``lf``
side runs in LLaMA-Factory's own environment.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def reply_figures(sent: float, stamps: list[float], ended: float, tokens: int) -> dict[str, float | None]:
    """Figures of one streamed reply from its clock readings (seconds since the epoch).

    Args:
        sent: when the request was sent.
        stamps: when each non-empty piece of text arrived.
        ended: when the stream ended.
        tokens: tokens in the reply.

    Returns:
        ``first`` (seconds to the first piece; None without text), ``tps`` (tokens per second of the whole reply,
        the first-token wait included) and ``decode_tps`` (tokens after the first one per second after the first
        piece; None when there is nothing to divide).
    """
    total = ended - sent
    first = stamps[0] - sent if stamps else None
    decode = ended - stamps[0] if stamps else 0.0
    return {
        "first": first,
        "tps": tokens / total if total > 0 else None,
        "decode_tps": (tokens - 1) / decode if tokens > 1 and decode > 0 else None,
    }


def summarise(replies: list[dict]) -> dict[str, float | None]:
    """The cold first reply's latency, and medians over the replies after it (over all when there is one)."""
    figures = [reply_figures(r["sent"], r["stamps"], r["ended"], r["tokens"]) for r in replies]
    later = figures[1:] or figures

    def med(key: str, rows: list[dict]) -> float | None:
        values = [f[key] for f in rows if f[key] is not None]
        return statistics.median(values) if values else None

    return {
        "first_cold": figures[0]["first"] if figures else None,
        "first": med("first", later),
        "tps": med("tps", later),
        "decode_tps": med("decode_tps", later),
        "tokens": med("tokens", [{"tokens": r["tokens"]} for r in replies]),
    }


def _count_tokens(model: str, replies: list[dict], tokenizer=None) -> None:
    if tokenizer is None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
    for reply in replies:
        reply["tokens"] = len(tokenizer(reply["text"], add_special_tokens=False)["input_ids"])


def _wait_ready(board, run_id: str, marks: dict, stop) -> None:
    """Record when the worker's run.json first says ready (polled every 20 ms, finer than the page's 1 s)."""
    while not stop.is_set():
        try:
            status = board.jobs.status(run_id)
        except Exception:  # the folder is being written
            status = {}
        if status.get("ready") and status.get("port"):
            marks.setdefault(run_id, time.time())
            return
        if status.get("status") in ("failed", "aborted", "completed"):
            return
        time.sleep(0.02)


def run_ours(args: argparse.Namespace) -> dict:
    """Load, chat and Load again through the board's own Chat tab handler and client."""
    import threading

    sys.path.insert(0, str(REPO))
    from app import chat_workers
    from app.chat_client import stream_chat
    from app.context import Board
    from app.jobs import JobManager
    from app.tabs import chat
    from app.ui import build_ui
    from app.workspace import Workspace

    ws = Workspace(args.work).ensure()
    board = Board(workspace=ws, jobs=JobManager(ws.runs_dir, [sys.executable, "-m", "engine"]).start())
    demo = build_ui(board)
    handlers = [bf for bf in demo.fns.values()
                if getattr(bf.fn, "__module__", "") == chat.__name__ and getattr(bf.fn, "__name__", "") == "on_load"]
    if len(handlers) != 1:
        raise SystemExit("error: the Chat tab's Load handler (app.tabs.chat on_load) was not found in the page")
    handler = handlers[0]
    defaults = [component.value for component in handler.inputs[7:]]  # the sampling widgets, untouched

    def press_load(servers: dict) -> tuple[dict, float, float | None]:
        """Press Load; (servers, seconds until the handler said ready, seconds until run.json said ready)."""
        marks: dict = {}
        stop = threading.Event()
        watcher = None
        begin = time.time()
        started, text = {}, ""
        for shown, value, *_ in handler.fn(args.model, "lora", args.adapter or "", args.template or "", False, servers,
                                         "en", *defaults):
            text = shown
            if isinstance(value, dict):
                started = value
            if watcher is None and started.get("main"):
                watcher = threading.Thread(target=_wait_ready, args=(board, started["main"], marks, stop), daemon=True)
                watcher.start()
        handler_done = time.time() - begin
        stop.set()
        if watcher is not None:
            watcher.join()
        if not started.get("main"):
            raise SystemExit(f"error: Load failed: {text}")
        ready = marks.get(started["main"])
        return started, handler_done, (ready - begin) if ready else None

    servers, load_handler, load_ready = press_load({})
    status = board.jobs.status(servers["main"])
    url, key = chat_workers.client_of(board, status)
    replies = []
    for prompt in args.prompt:
        sent, stamps, text = time.time(), [], ""
        for delta in stream_chat(url, [{"role": "user", "content": prompt}], api_key=key, temperature=0,
                                 max_tokens=args.max_new_tokens):
            if delta.get("content"):
                stamps.append(time.time())
                text += delta["content"]
        replies.append({"prompt": prompt, "sent": sent, "stamps": stamps, "ended": time.time(), "text": text})
    again, reload_handler, reload_ready = press_load(servers)
    chat_runs = [r["id"] for r in board.jobs.list() if r.get("kind") == "chat"]
    stopped = chat.unload(board, again)
    for run_id in stopped:
        board.jobs.wait(run_id, timeout=30)
    board.jobs.shutdown()
    _count_tokens(args.model, replies)
    log = board.jobs.folder(servers["main"]).log_path
    return {
        "tool": "ours", "load": load_ready, "load_page": load_handler, "reload": reload_ready,
        "reload_page": reload_handler, "reused": again.get("main") == servers["main"] and len(chat_runs) == 1,
        "workers": len(chat_runs), "replies": replies, "log": str(log),
    }


def run_lf(args: argparse.Namespace) -> dict:
    """LLaMA-Factory's ChatModel (huggingface backend) with streamed replies."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from incumbent_imports import hide_broken_vision_audio

    hide_broken_vision_audio()
    from llamafactory.chat import ChatModel

    job = {"model_name_or_path": args.model, "infer_backend": "huggingface", "do_sample": False,
           "max_new_tokens": args.max_new_tokens}
    if args.template:
        job["template"] = args.template
    if args.adapter:
        job.update(adapter_name_or_path=args.adapter, finetuning_type="lora")
    model = ChatModel(job)
    ready = time.time()
    replies = []
    for prompt in args.prompt:
        sent, stamps, text = time.time(), [], ""
        for piece in model.stream_chat([{"role": "user", "content": prompt}], do_sample=False,
                                       max_new_tokens=args.max_new_tokens):
            if piece:
                stamps.append(time.time())
                text += piece
        replies.append({"prompt": prompt, "sent": sent, "stamps": stamps, "ended": time.time(), "text": text})
    _count_tokens(args.model, replies, model.engine.tokenizer)
    return {"tool": "lf", "ready_at": ready, "dtype": str(model.engine.model.dtype), "replies": replies}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tool", choices=["ours", "lf"])
    parser.add_argument("--model", required=True, help="model folder")
    parser.add_argument("--adapter", default="", help="LoRA adapter folder ('' for none)")
    parser.add_argument("--template", default="", help="'' reads the tokenizer's own chat template")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompt", action="append", required=True, help="a user message (repeat for more)")
    parser.add_argument("--work", default="", help="ours: the workspace folder")
    parser.add_argument("--out", required=True, help="where the JSON result goes")
    args = parser.parse_args()
    result = run_ours(args) if args.tool == "ours" else run_lf(args)
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
