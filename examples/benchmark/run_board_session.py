"""The board's memory after a full session, driven in a real browser. Run it by hand; nothing here asserts a size.

    python examples/benchmark/run_board_session.py                      # needs playwright and Chromium
    python examples/benchmark/run_board_session.py --chromium /usr/bin/chromium --keep

It starts ``lf-board`` on a fresh workspace (its own process, a free port) and, in headless Chromium, goes through
what a user does in one sitting: preview the demo datasets, train the demo LoRA to the end, load the result in the
Chat tab and get an answer, evaluate it, merge and export it, and compare runs in the History tab. After each step it
reads the board process's resident memory (``VmRSS``, and its peak ``VmHWM``) from /proc, and it prints them beside
the goal (<= 300 MB after the session). Jobs, chat and preview workers are subprocesses of the board; only the board
process itself is counted, since that is the process that lives as long as the board.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from run_board_benchmark import free_port, loaded, proc_status  # noqa: E402

GOAL_MB = 300
HEAVY = ("torch", "transformers", "peft", "trl", "bitsandbytes")  # site-packages folders: none belongs in the board
STEP_TIMEOUT = 600


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - the page is still rendering
            pass
        time.sleep(1)
    raise SystemExit(f"error: timed out waiting for {what}")


def wait_http(url: str, timeout: float) -> float:
    start = time.time()
    while time.time() - start < timeout:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.time() - start
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"error: the board did not answer at {url} within {timeout:.0f} s")


def finished(text: str) -> bool:
    return bool(re.search(r"\b(completed|failed|aborted)\b", text))


def session(page, url: str, record) -> None:
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    record("page open")

    page.get_by_text("Upload and preview data", exact=True).first.click()
    page.get_by_role("button", name="Preview the selected datasets").click()
    wait_for(lambda: page.locator(".lf-preview").count() >= 1
             and page.locator(".lf-preview").last.inner_text().strip(), STEP_TIMEOUT, "the dataset preview")
    record("dataset preview")

    page.locator("#lf-train-start").click()
    wait_for(lambda: finished(page.locator("#lf-train-status").inner_text()), STEP_TIMEOUT, "the training run")
    status = page.locator("#lf-train-status").inner_text()
    if "completed" not in status:
        raise SystemExit(f"error: the demo run did not complete: {status[:300]}")
    run_id = re.search(r"\d{8}-\d{6}-train-\w+", status).group(0)
    record("training run")

    page.get_by_text("Scale-out: strategy and processes", exact=True).first.click()
    page.locator("#lf-strategy input").click()
    page.get_by_role("option", name="DDP (torchrun)").click()
    page.locator("#lf-nproc input[type=number]").fill("2")
    page.locator("#lf-nproc input[type=number]").press("Enter")
    page.get_by_role("button", name="Check", exact=True).click()
    wait_for(lambda: "GiB" in page.locator("#lf-strategy-report").inner_text(), STEP_TIMEOUT, "the scale-out check")
    record("scale-out check (DDP x2)")

    page.get_by_role("tab", name="Chat").click()
    page.locator("#lf-checkpoint input").click()
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.locator("#lf-chat-load").click()
    wait_for(lambda: "ready" in page.locator("#lf-chat-status").inner_text().lower(), STEP_TIMEOUT, "the chat model")
    page.locator("#lf-chat-message textarea").fill("Who are you?")
    page.locator("#lf-chat-message textarea").press("Enter")
    bot = page.locator("#lf-chatbot .bot")
    wait_for(lambda: bot.count() >= 1 and bot.last.inner_text().strip(), STEP_TIMEOUT, "the chat answer")
    record("chat: load and one answer")

    page.get_by_role("tab", name="Evaluate").click()
    page.get_by_role("button", name="Start evaluation").click()
    wait_for(lambda: "completed" in page.locator("#lf-tab-evaluate").inner_text(), STEP_TIMEOUT, "the evaluation")
    record("evaluation")

    page.get_by_role("tab", name="Export").click()
    page.get_by_role("button", name="Merge and export").click()
    wait_for(lambda: "completed" in page.locator("#lf-tab-export").inner_text(), STEP_TIMEOUT, "the export")
    record("merge and export")

    page.get_by_role("tab", name="History").click()
    wait_for(lambda: run_id in page.locator("#lf-runs-table").inner_text(), STEP_TIMEOUT, "the History table")
    page.locator("#lf-runs-selected input").click()
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.get_by_role("button", name=re.compile("^Compare$")).first.click()
    wait_for(lambda: page.locator("#lf-runs-overlay .mark-line path").count() >= 1, STEP_TIMEOUT,
             "the History overlay")
    record("history compare")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "",
                        help="Chromium executable (default: chromium on PATH)")
    parser.add_argument("--keep", action="store_true", help="keep the workspace folder")
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("error: playwright is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    if not args.chromium:
        print("error: no Chromium found; install it (apt-get install chromium) or pass --chromium PATH", file=sys.stderr)
        return 2
    workspace = Path(tempfile.mkdtemp(prefix="lfboard-session-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = (workspace / "board.log").open("w")
    board = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--workspace", str(workspace / "ws"),
                              "--lang", "en"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    rows: list[tuple[str, float, float, float]] = []
    heavy: set[str] = set()
    started = time.time()
    try:
        ready = wait_http(url, 180)
        memory = proc_status(board.pid)
        rows.append(("board started", ready, memory["VmRSS"], memory["VmHWM"]))

        def record(step: str) -> None:
            memory = proc_status(board.pid)
            rss, hwm = memory["VmRSS"], memory["VmHWM"]
            rows.append((step, time.time() - started, rss, hwm))
            heavy.update(loaded(board.pid, HEAVY))
            print(f"  {step:<28} {rss:7.0f} MB (peak {hwm:.0f} MB)", flush=True)

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"], headless=True)
            try:
                page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
                session(page, url, record)
            finally:
                browser.close()
    finally:
        # chat workers outlive a board on purpose (a restarted board adopts them): end this session's with it
        import psutil

        try:
            children = psutil.Process(board.pid).children(recursive=True)
        except psutil.Error:
            children = []
        board.terminate()
        try:
            board.wait(30)
        except subprocess.TimeoutExpired:
            board.kill()
        for child in children:
            try:
                child.terminate()
            except psutil.Error:
                pass
        psutil.wait_procs(children, timeout=30)
        log.close()
        if not args.keep:
            shutil.rmtree(workspace, ignore_errors=True)
        else:
            print(f"workspace kept: {workspace}")
    print("\nThe board process's memory through one session (fresh workspace, the demo model and data):")
    print(f"{'after':<28} {'seconds':>8} {'RSS MB':>8} {'peak MB':>8}")
    for step, seconds, rss, hwm in rows:
        print(f"{step:<28} {seconds:>8.0f} {rss:>8.0f} {hwm:>8.0f}")
    final = rows[-1][2]
    verdict = "within" if final <= GOAL_MB else "ABOVE"
    print(f"board RSS after the session: {final:.0f} MB ({verdict} the goal of <= {GOAL_MB} MB); peak {rows[-1][3]:.0f} MB")
    print(f"ML libraries mapped into the board process: {', '.join(sorted(heavy)) or 'none'} (goal: none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
