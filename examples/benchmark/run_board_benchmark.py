"""The board at scale: a workspace with 1,000 finished runs. Run it by hand; nothing here asserts a time.

    python examples/benchmark/run_board_benchmark.py            # 1,000 runs, a free port picked for you
    python examples/benchmark/run_board_benchmark.py --runs 3000 --polls 120
    python examples/benchmark/run_board_benchmark.py --watch-polls 3600 --poll-interval 0.05   # an hour, compressed

It writes the run folders (examples/benchmark/fake_runs.py: run.json, config.yaml, a 100-step events.jsonl and
stdout.log each), starts ``lf-board`` on them and prints, each beside its goal:

- seconds from starting the board to a browser getting a page (``app.starting_page``, which answers while gradio
  loads), and to the workbench itself answering HTTP 200;
- ``/list_runs`` latency (HTTP API, first call and median of the next ones);
- ``/run_status`` latency of one run (a status poll, median);
- the History table render (the tab's handler ``app.tabs.runs.table_frame`` in a process of its own over the same
  workspace: first render and a repeat);
- the board's resident memory after those calls (``VmRSS``, and its peak ``VmHWM``), and whether the board process
  loaded torch or transformers (it should not: jobs run in subprocesses);
- the Train tab's 1 s tick (status, log and the loss and learning-rate charts, over gradio's queue protocol as an open
  page fires it) on live runs that have logged ``--tick-steps`` steps (100, 2,000 and 20,000), one new step before each
  tick: milliseconds and bytes per tick, beside the goal "flat" (each chart holds at most 1,000 points per series,
  app/curves.py, so a tick costs the same at 2,000 steps as at 20,000).

With ``--watch-polls N`` a training run in progress is watched afterwards as an open page does it for N seconds,
compressed: the workspace also holds a live run (this script plays its engine), and each poll stands for one second
of the page: one log step is appended to the run's events.jsonl and stdout.log, ``/run_status`` is called, and the
page's timers that are due fire over gradio's queue protocol, each at its own interval (examples/benchmark/
page_poller.py: the Train tab's status/log/charts each second, its RL panel each 2 s, the top bar each 4 s, for one
session watching the run). Polls are ``--poll-interval`` seconds apart. It prints the board's VmRSS at the start,
every ``--rss-every`` polls and at the end, the latency and size of the Train tab's tick early and late, beside the
goal that the board's memory does not grow over an hour of a live run being watched. ``--watch-via page`` or
``api`` keeps only the page's timers or only ``/run_status``, to tell which one a growth comes from.
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

from fake_runs import append_step, append_steps, make_finished_runs, make_live_run  # noqa: E402
from page_poller import Page, due  # noqa: E402

LIVE_RUN = "live-00000"

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


def watch(base: str, board_pid: int, folder: Path, polls: int, interval: float, rss_every: int,
          via: str = "both") -> dict:
    """Watch the live run as an open Train tab does for ``polls`` seconds of page time (see the docstring); ``via``:
    both, page (the page's timers only) or api (``/run_status`` only)."""
    page = Page(base, {"lfboard-train-run": LIVE_RUN})
    if not any(e["interval"] == 1.0 for e in page.events):
        raise SystemExit("error: the page has no 1-second timer reading the watched run; has app/tabs/train.py changed?")
    started = time.time()
    rss = [(0, proc_status(board_pid).get("VmRSS", 0))]
    ticks: list[tuple[float, int]] = []  # the Train tab's 1 s tick: (seconds, bytes)
    status_calls: list[float] = []
    others = 0
    for second in range(1, polls + 1):
        begin = time.perf_counter()
        append_step(folder, second, polls, started)
        if via != "page":
            status_calls.append(call(base, "run_status", LIVE_RUN)[0])
        for event in page.events if via != "api" else ():
            if due(event["interval"], second):
                result = page.fire(event)
                if event["interval"] == 1.0:
                    ticks.append(result)
                else:
                    others += 1
        if second % rss_every == 0 or second == polls:
            rss.append((second, proc_status(board_pid).get("VmRSS", 0)))
            recent = ticks[-rss_every:]
            line = f"  page second {second} ({time.time() - started:.0f} s): board VmRSS {rss[-1][1]} MB"
            if recent:
                line += (f"; Train tab tick, last {len(recent)}: median {statistics.median(r[0] for r in recent) * 1000:.0f}"
                         f" ms, {statistics.median(r[1] for r in recent) / 1024:.0f} KB")
            print(line, flush=True)
        time.sleep(max(0.0, interval - (time.perf_counter() - begin)))
    return {"rss": rss, "ticks": ticks, "status": status_calls, "others": others, "events": len(page.events),
            "wall": time.time() - started, "peak": proc_status(board_pid).get("VmHWM", 0)}


def tick_cost(base: str, run_id: str, folder: Path, steps: int, ticks: int) -> tuple[float, int]:
    """Median (seconds, bytes) of the Train tab's 1 s tick on a live run that has logged ``steps`` steps, one more
    step appended before each of ``ticks`` ticks (the page's first tick, which clears the charts, is not counted)."""
    page = Page(base, {"lfboard-train-run": run_id})
    train_ticks = [e for e in page.events if e["interval"] == 1.0]
    if not train_ticks:
        raise SystemExit("error: the page has no 1-second timer reading the watched run; has app/tabs/train.py changed?")
    event = train_ticks[0]
    started = time.time()
    page.fire(event)  # the first tick of a page clears the charts; the next ones draw them
    results = []
    for i in range(1, ticks + 1):
        append_step(folder, steps + i, steps + ticks, started)
        results.append(page.fire(event))
    return statistics.median(r[0] for r in results), int(statistics.median(r[1] for r in results))


def watch_rows(result: dict, polls: int) -> list[tuple[str, str, str]]:
    """Table rows of a watch: memory over time, and the Train tab tick's cost early and late."""
    rss = result["rss"]
    tenth = max(1, len(result["ticks"]) // 10)
    early, late = result["ticks"][:tenth], result["ticks"][-tenth:]

    def tick_text(rows: list[tuple[float, int]]) -> str:
        if not rows:
            return "-"
        return (f"{statistics.median(r[0] for r in rows) * 1000:.0f} ms, "
                f"{statistics.median(r[1] for r in rows) / 1024:.0f} KB")

    goal = "does not grow over an hour of a live run being watched (poll every second)"
    return [
        (f"board VmRSS watching {polls} page s", f"{rss[0][1]} -> {rss[-1][1]} MB ({rss[-1][1] - rss[0][1]:+d} MB, peak "
         f"{result['peak']} MB)", goal),
        (f"Train tab tick, first {tenth} (median)", tick_text(early), "flat"),
        (f"Train tab tick, last {tenth} (median)", tick_text(late), "flat"),
        ("/run_status while watching, median",
         f"{statistics.median(result['status']) * 1000:.0f} ms" if result["status"] else "-", "< 1 s"),
        ("watch wall time", f"{result['wall']:.0f} s for {polls} page seconds ({len(result['ticks'])} ticks, "
         f"{result['others']} other timer events of {result['events']} timers)", ""),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=60, help="status polls (and list calls) after start")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-board-bench"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--watch-polls", type=int, default=0,
                        help="then watch a live run as an open page does, for this many page seconds (0: skip)")
    parser.add_argument("--poll-interval", type=float, default=0.05, help="real seconds between watch polls")
    parser.add_argument("--rss-every", type=int, default=0, help="print VmRSS every N polls (default: polls / 10)")
    parser.add_argument("--tick-steps", default="100,2000,20000",
                        help="logged steps of the live runs whose Train tab tick is measured (comma-separated)")
    parser.add_argument("--ticks", type=int, default=10, help="ticks measured on each of those runs (0: skip)")
    parser.add_argument("--watch-via", choices=["both", "page", "api"], default="both",
                        help="what each watch poll calls: the page's timers and /run_status (both), or one of them")
    args = parser.parse_args()
    try:
        tick_steps = [int(x) for x in args.tick_steps.split(",") if x.strip()]
    except ValueError:
        tick_steps = [-1]
    if min(args.watch_polls, args.poll_interval, args.rss_every, args.ticks) < 0 or min(tick_steps, default=0) < 1:
        print("error: --watch-polls, --poll-interval, --rss-every and --ticks must not be negative, and --tick-steps "
              "must be positive step counts separated by commas (e.g. 100,2000,20000)", file=sys.stderr)
        return 2
    rss_every = args.rss_every or max(1, args.watch_polls // 10)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    ws = work / "ws"
    t0 = time.time()
    ids = make_finished_runs(ws / "runs", args.runs)
    print(f"  wrote {len(ids):,} finished runs in {time.time() - t0:.1f} s")
    live = None
    sys.path.insert(0, str(REPO))
    from engine.runs import process_start_time

    me, me_started = os.getpid(), process_start_time(os.getpid())
    if args.watch_polls:
        live = make_live_run(ws / "runs", LIVE_RUN, me, me_started, args.watch_polls)
    tick_folders = {}
    if args.ticks:
        for steps in tick_steps:
            run_id = f"tick-{steps:06d}"
            folder = make_live_run(ws / "runs", run_id, me, me_started, steps + args.ticks)
            append_steps(folder, 1, steps, steps + args.ticks, time.time())
            tick_folders[steps] = (run_id, folder)
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRADIO_ANALYTICS_ENABLED": "False"}
    log = (work / "board.log").open("w")
    t0 = time.time()
    board = subprocess.Popen([sys.executable, "-m", "app", "--workspace", str(ws), "--port", str(port)],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    ready = page = None
    browser = urllib.request.Request(base + "/", headers={"Accept": "text/html"})
    try:
        while time.time() - t0 < 180:
            if board.poll() is not None:
                raise SystemExit(f"error: the board exited; see {work / 'board.log'}")
            try:  # as a browser asks: the starting page (app.starting_page), then the workbench
                with urllib.request.urlopen(browser, timeout=2) as response:
                    if response.status == 200 and page is None:
                        page = time.time() - t0
                    if response.status == 200 and not response.headers.get("X-LF-Board-Starting"):
                        ready = time.time() - t0
                        break
            except OSError:
                pass
            time.sleep(0.02)
        if ready is None:
            raise SystemExit("error: the board did not answer within 180 s")
        first_list, listed = call(base, "list_runs")
        listed = listed[0] if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], list) else listed
        lists = [call(base, "list_runs")[0] for _ in range(max(3, args.polls // 6))]
        polls = [call(base, "run_status", ids[len(ids) // 2])[0] for _ in range(args.polls)]
        memory = proc_status(board.pid)
        heavy = loaded(board.pid, ("torch", "transformers"))
        tick_costs = {steps: tick_cost(base, run_id, folder, steps, args.ticks)
                      for steps, (run_id, folder) in tick_folders.items()}
        watched = (watch(base, board.pid, live, args.watch_polls, args.poll_interval, rss_every, args.watch_via)
                   if live else None)
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
    print(f"\nBoard with {len(listed or []):,} runs listed (workspace of {args.runs:,} finished runs"
          f"{' and live ones' if live or tick_folders else ''}).")
    rows = [
        ("board start to a page in the browser", f"{page:.2f} s (the starting page)", "< 1 s"),
        ("board start to the workbench served", f"{ready:.2f} s", "< 1 s (gradio's import alone is 2-4 s here)"),
        ("/list_runs, first call", f"{first_list * 1000:.0f} ms", "< 1 s"),
        ("/list_runs, median of next", f"{statistics.median(lists) * 1000:.0f} ms", "< 1 s"),
        ("/run_status poll, median", f"{statistics.median(polls) * 1000:.0f} ms", "< 1 s"),
        ("History render, first", f"{hist['first'] * 1000:.0f} ms ({hist['rows']:,} rows)", "< 1 s"),
        ("History render, again", f"{hist['again'] * 1000:.0f} ms", "< 1 s"),
        ("History process peak RSS", f"{hist['rss_mb']:.0f} MB", "flat in the number of runs"),
        (f"board RSS after {2 + len(lists) + len(polls)} API calls", f"{memory.get('VmRSS', 0)} MB (peak {memory.get('VmHWM', 0)} MB)",
         "<= 300 MB"),
        ("torch/transformers in the board", ", ".join(heavy) or "none loaded", "none"),
    ]
    for steps, (seconds, size) in tick_costs.items():
        rows.append((f"Train tab tick at step {steps:,} (median of {args.ticks})",
                     f"{seconds * 1000:.0f} ms, {size / 1024:.0f} KB", "flat"))
    if watched:
        rows += watch_rows(watched, args.watch_polls)
        rows[-1] = (rows[-1][0], f"{rows[-1][1]}, polling {args.watch_via}", "")
    load = os.getloadavg()
    print(f"load average now {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min, {os.cpu_count()} CPUs)")
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  goal {goal}")
    if watched:
        print("board VmRSS while watching (page second: MB): "
              + ", ".join(f"{second}: {mb}" for second, mb in watched["rss"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
