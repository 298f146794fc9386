"""The automation API: stable endpoint names for gradio_client and HTTP.

- ``/submit_run`` (config YAML text, kind = train) -> run id
- ``/list_runs`` () -> list of runs (run.json fields plus queue position)
- ``/run_status`` (run id) -> {"id", "kind", "status", "step", "total", "loss", "eval_loss", "eta", ...}
- ``/abort_run`` (run id) -> {"id", "result": "cancelled" | "stopping" | "finished", "status"}

Status values: queued, running, completed, failed, aborted. Errors come back as gradio errors whose message
names the problem and the fix.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
import yaml

from app import forms
from app.context import Board
from app.jobs import JobError

VALIDATE_FOR = {"train": "train", "eval": "eval", "predict": "eval", "export": "export", "chat": "api"}


class Automation:
    """The handlers behind the API endpoints (plain methods, testable without a server)."""

    def __init__(self, board: Board):
        self.board = board

    def submit_run(self, config_yaml: str, kind: str = "train") -> str:
        """Validate a config (LLaMA-Factory YAML) and queue it as a ``kind`` run; returns the run id."""
        kind = (kind or "train").strip()
        if kind not in VALIDATE_FOR:
            raise gr.Error(f"Unknown run kind `{kind}`; use one of {', '.join(VALIDATE_FOR)}.")
        try:
            mapping = yaml.safe_load(config_yaml or "")
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise gr.Error(f"The config is not valid YAML{where}: {getattr(err, 'problem', err)}.") from None
        if not isinstance(mapping, dict):
            raise gr.Error("The config must be YAML `key: value` lines (LLaMA-Factory keys).")
        if kind == "eval" and mapping.get("do_predict"):
            kind = "predict"
        mapping = forms.absolute_paths(mapping)
        checked = forms.validate(mapping, VALIDATE_FOR[kind])
        from app.security import path_problems

        problems = checked.problems + path_problems(mapping, self.board.allowed_roots)
        if problems:
            raise gr.Error("The config cannot run:\n" + "\n".join(f"- {p}" for p in problems))
        jobs = self.board.jobs
        run_id = jobs.new_run_id(kind)
        args = ["--host", "127.0.0.1", "--port", "0"] if kind == "chat" else None
        env = dict(checked.config.secrets)  # secrets reach the process through its environment only
        if kind == "chat":
            from app.chat_workers import worker_env

            env.update(worker_env(self.board, run_id))
        return jobs.submit(
            kind, forms.resolved_mapping(checked.config, jobs.runs_dir / run_id), run_id=run_id, args=args, env=env
        )

    def list_runs(self) -> list[dict[str, Any]]:
        """Every run of the workspace, newest first."""
        keep = (
            "id",
            "kind",
            "status",
            "queue_position",
            "created_at",
            "started_at",
            "finished_at",
            "exit_code",
            "error",
            "port",
            "ready",
        )
        return [{k: info.get(k) for k in keep} for info in self.board.jobs.list()]

    def run_status(self, run_id: str) -> dict[str, Any]:
        """Status, step, total, loss and more of one run."""
        try:
            return self.board.jobs.status((run_id or "").strip())
        except JobError as err:
            raise gr.Error(str(err)) from None

    def abort_run(self, run_id: str) -> dict[str, Any]:
        """Cancel a queued run or stop a running one (training saves a checkpoint; every kind ends as aborted)."""
        run_id = (run_id or "").strip()
        try:
            result = self.board.jobs.abort(run_id)
            status = self.board.jobs.folder(run_id).status()
        except JobError as err:
            raise gr.Error(str(err)) from None
        return {"id": run_id, "result": result, "status": status}


def register(board: Board) -> Automation:
    """Declare the endpoints inside the current ``gr.Blocks``."""
    auto = Automation(board)

    def submit_run(config_yaml: str, kind: str = "train") -> str:
        """Queue a run from config YAML text; returns its run id."""
        return auto.submit_run(config_yaml, kind)

    def list_runs() -> list[dict[str, Any]]:
        """Every run, newest first."""
        return auto.list_runs()

    def run_status(run_id: str) -> dict[str, Any]:
        """status, step, total, loss (and more) of a run."""
        return auto.run_status(run_id)

    def abort_run(run_id: str) -> dict[str, Any]:
        """Cancel or stop a run."""
        return auto.abort_run(run_id)

    gr.api(submit_run, api_name="submit_run", concurrency_limit=None)
    gr.api(list_runs, api_name="list_runs", concurrency_limit=None)
    gr.api(run_status, api_name="run_status", concurrency_limit=None)
    gr.api(abort_run, api_name="abort_run", concurrency_limit=None)
    return auto
