"""The board at scale: a workspace with 1,000 finished runs. Run it by hand; nothing here asserts a time.

    python examples/benchmark/run_board_benchmark.py            # 1,000 runs, a free port picked for you
    python examples/benchmark/run_board_benchmark.py --runs 3000 --polls 120

It writes the run folders (examples/benchmark/fake_runs.py: run.json, config.yaml, a 100-step events.jsonl and
stdout.log each), starts ``lf-board`` on them and prints, each beside its goal:

- seconds from starting the board to its page answering HTTP 200;
- ``/list_runs`` latency (HTTP API, first call and median of the next ones);
- ``/run_status`` latency of one run (a status poll, median);
- the History table render (the tab's handler ``app.tabs.runs.table_frame`` in a process of its own over the same
  workspace: first render and a repeat);
- the board's resident memory after those calls (``VmRSS``, and its peak ``VmHWM``), and whether the board process
  loaded torch or transformers (it should not: jobs run in subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from fake_runs import make_finished_runs  # noqa: E402

HISTORY = """
import json, sys, time, resource
t0 = time.time()
from app.context import Board
from app.jobs import JobManager
from app.tabs import runs
from app.workspace import Workspace
ws = Workspace(sys.argv[1])
board = Board(workspace=ws, jobs=JobManager(ws.runs_dir, [sys.executable, "-m", "engine"]))
t1 = time.time(); frame, ids = runs.table_frame(board, "en"); first = time.time() - t1
t2 = time.time(); runs.table_frame(board, "en"); again = time.time() - t2
print(json.dumps({"rows": len(ids), "first": first, "again": again,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(base: str, name: str, *args) -> tuple[float, object]:
    """One gradio API call over plain HTTP; (seconds, result)."""
    t0 = time.perf_counter()
    request = urllib.request.Request(f"{base}/gradio_api/call/{name}", data=json.dumps({"data": list(args)}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        event_id = json.loads(response.read())["event_id"]
    with urllib.request.urlopen(f"{base}/gradio_api/call/{name}/{event_id}", timeout=60) as response:
        text = response.read().decode()
    seconds = time.perf_counter() - t0
    data = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("event: complete") and i + 1 < len(lines):
            data = json.loads(lines[i + 1][len("data: "):])
        elif line.startswith("event: error"):
            raise SystemExit(f"error: /{name} failed: {text[-500:]}")
    return seconds, data


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def loaded(pid: int, names: tuple[str, ...]) -> list[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return [n for n in names if f"/{n}/" in maps]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=60, help="status polls (and list calls) after start")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-board-bench"))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    ws = work / "ws"
    t0 = time.time()
    ids = make_finished_runs(ws / "runs", args.runs)
    print(f"  wrote {len(ids):,} finished runs in {time.time() - t0:.1f} s")
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRADIO_ANALYTICS_ENABLED": "False"}
    log = (work / "board.log").open("w")
    t0 = time.time()
    board = subprocess.Popen([sys.executable, "-m", "app", "--workspace", str(ws), "--port", str(port)],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    ready = None
    try:
        while time.time() - t0 < 180:
            if board.poll() is not None:
                raise SystemExit(f"error: the board exited; see {work / 'board.log'}")
            try:
                with urllib.request.urlopen(base + "/", timeout=2) as response:
                    if response.status == 200:
                        ready = time.time() - t0
                        break
            except OSError:
                time.sleep(0.1)
        if ready is None:
            raise SystemExit("error: the board did not answer within 180 s")
        first_list, listed = call(base, "list_runs")
        listed = listed[0] if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], list) else listed
        lists = [call(base, "list_runs")[0] for _ in range(max(3, args.polls // 6))]
        polls = [call(base, "run_status", ids[len(ids) // 2])[0] for _ in range(args.polls)]
        memory = proc_status(board.pid)
        heavy = loaded(board.pid, ("torch", "transformers"))
    finally:
        board.terminate()
        try:
            board.wait(20)
        except subprocess.TimeoutExpired:
            board.kill()
    history = subprocess.run([sys.executable, "-c", HISTORY, str(ws)], env=env, capture_output=True, text=True)
    if history.returncode != 0:
        raise SystemExit(f"error: the History render failed:\n{history.stderr[-2000:]}")
    hist = json.loads(history.stdout.strip().splitlines()[-1])
    print(f"\nBoard with {len(listed or []):,} runs listed (workspace of {args.runs:,} finished runs).")
    rows = [
        ("board start to HTTP ready", f"{ready:.2f} s", "< 1 s"),
        ("/list_runs, first call", f"{first_list * 1000:.0f} ms", "< 1 s"),
        ("/list_runs, median of next", f"{statistics.median(lists) * 1000:.0f} ms", "< 1 s"),
        ("/run_status poll, median", f"{statistics.median(polls) * 1000:.0f} ms", "< 1 s"),
        ("History render, first", f"{hist['first'] * 1000:.0f} ms ({hist['rows']:,} rows)", "< 1 s"),
        ("History render, again", f"{hist['again'] * 1000:.0f} ms", "< 1 s"),
        ("History process peak RSS", f"{hist['rss_mb']:.0f} MB", "flat in the number of runs"),
        ("board RSS after the calls", f"{memory.get('VmRSS', 0)} MB (peak {memory.get('VmHWM', 0)} MB)",
         "<= 300 MB"),
        ("torch/transformers in the board", ", ".join(heavy) or "none loaded", "none"),
    ]
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  goal {goal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
