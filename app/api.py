"""The automation API: stable endpoint names for gradio_client and HTTP.

- ``/submit_run`` (config YAML text, kind = train) -> run id
- ``/list_runs`` () -> list of runs (run.json fields plus queue position)
- ``/run_status`` (run id) -> {"id", "kind", "status", "step", "total", "loss", "eval_loss", "eta", ...}
- ``/abort_run`` (run id) -> {"id", "result": "cancelled" | "stopping" | "finished", "status"}
- ``/resume_run`` (run id) -> the id of a new run that continues a failed or aborted training run from its latest
  complete checkpoint (``/submit_run`` also takes ``resume_from_checkpoint: <run id>``)

Status values: queued, running, completed, failed, aborted. Errors come back as gradio errors whose message
names the problem and the fix; each rejected call is logged as one line (no traceback), and inputs are capped in
size (config text, keys, run ids), so no input can cost minutes or echo back megabytes.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr
import yaml

from app import forms
from app.api_sessions import ApiSessions
from app.context import Board
from app.jobs import JobError
from app.resume import resolve_resume_value, resume_mapping
from engine.config.limits import format_problems, shorten, surrogate_at
from engine.config.loader import ConfigError, load_yaml_text, yaml_error_message

logger = logging.getLogger(__name__)

MAX_CONFIG_CHARS = 1_000_000
MAX_CONFIG_LINES = 10_000
MAX_MESSAGE_CHARS = 8000


def reject(route: str, message: str) -> gr.Error:
    """The error a rejected call answers with: valid UTF-8, capped, logged as one line without a traceback."""
    message = shorten(message, MAX_MESSAGE_CHARS)
    logger.warning("/%s rejected: %s", route, shorten(message.splitlines()[0] if message else "", 300))
    return gr.Error(message, print_exception=False)


def _text_problem(what: str, text: str) -> str | None:
    bad = surrogate_at(text)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        column = bad - (text.rfind("\n", 0, bad) + 1) + 1
        return (f"{what} holds an invalid character (a lone surrogate, U+{ord(text[bad]):04X}) at line {line}, column "
                f"{column}; send UTF-8 text.")
    return None

API_NAMES = ("submit_run", "list_runs", "run_status", "abort_run", "resume_run")
"""The automation API's endpoints (:func:`register`)."""

VALIDATE_FOR = {"train": "train", "eval": "eval", "predict": "eval", "export": "export", "chat": "api"}


class Automation:
    """The handlers behind the API endpoints (plain methods, testable without a server)."""

    def __init__(self, board: Board):
        self.board = board

    def submit_run(self, config_yaml: str, kind: str = "train") -> str:
        """Validate a config (LLaMA-Factory YAML) and queue it as a ``kind`` run; returns the run id.

        A ``chat`` run is a shared worker, as in the Chat tab: when a live worker of the workspace (a page's or an
        earlier call's, one still loading included) already serves the same model, adapter, template and server
        settings, its run id is returned and no second copy of the model is loaded; the sampling settings are sent
        with each request, so they may differ. Aborting that run ends it for everyone who uses it, and a page's
        Unload or a Load of another model ends it too: check ``run_status`` before sending requests."""
        kind = str(kind or "train").strip()
        if kind not in VALIDATE_FOR:
            raise reject("submit_run", f"Unknown run kind `{shorten(kind, 40)}`; use one of {', '.join(VALIDATE_FOR)}.")
        config_yaml = config_yaml if isinstance(config_yaml, str) else ""
        if len(config_yaml) > MAX_CONFIG_CHARS:
            raise reject(
                "submit_run",
                f"The config is {len(config_yaml):,} characters long; at most {MAX_CONFIG_CHARS:,} are accepted (a "
                "LLaMA-Factory config is a few dozen lines).",
            )
        lines = config_yaml.count("\n") + 1
        if lines > MAX_CONFIG_LINES:
            raise reject(
                "submit_run",
                f"The config has {lines:,} lines; at most {MAX_CONFIG_LINES:,} are accepted (a LLaMA-Factory config is "
                "a few dozen lines). Is this the right file?",
            )
        problem = _text_problem("The config", config_yaml)
        if problem:
            raise reject("submit_run", problem)
        try:
            mapping = load_yaml_text(config_yaml, warn=False)  # an alias bomb is refused before any value is read
        except ConfigError as err:
            raise reject("submit_run", err.problems[0]) from None
        except yaml.YAMLError as err:
            raise reject("submit_run", yaml_error_message("The config", config_yaml, err)) from None
        if not isinstance(mapping, dict):
            raise reject("submit_run", "The config must be YAML `key: value` lines (LLaMA-Factory keys).")
        if kind == "eval" and mapping.get("do_predict"):
            kind = "predict"
        meta = {}
        if "resume_from_checkpoint" in mapping:
            try:
                resumed = resolve_resume_value(self.board.jobs, mapping["resume_from_checkpoint"])
            except JobError as err:
                raise reject("submit_run", str(err)) from None
            if resumed:
                meta = {"resumed_from": str(mapping["resume_from_checkpoint"]).strip(), "resumed_checkpoint": resumed}
                mapping["resume_from_checkpoint"] = resumed
        return self._queue(kind, mapping, meta, "submit_run")

    def _queue(self, kind: str, mapping: dict[str, Any], meta: dict[str, Any], route: str,
               lang: str | None = None) -> str:
        """Validate and submit; a refusal is in English (the API's), or in ``lang`` for a board page."""
        from app.security import path_problems
        from engine.config.limits import size_problems

        run_id = self.board.jobs.new_run_id(kind)
        problems = size_problems(mapping)  # the keys as sent, before output_dir is set below
        if not problems:
            checked = forms.validate(forms.absolute_paths(mapping), VALIDATE_FOR[kind],
                                     run_folder=self.board.jobs.runs_dir / run_id)
            problems = checked.problems + path_problems(checked.mapping, self.board.allowed_roots)
        if problems and lang is not None:
            from app.engine_text import problems_text
            from app.i18n import t

            raise reject(route, problems_text(lang, t(lang, "train_problems"), problems))
        if problems:
            raise reject(route, format_problems("The config cannot run:", problems))
        if kind == "chat":
            from app.chat_workers import LOAD_LOCK, serving

            with LOAD_LOCK:  # a Load or another call at once sees this worker, and this call theirs
                shared = serving(self.board, checked.config)
                return shared or self._submit(kind, run_id, checked, meta, route, lang)
        return self._submit(kind, run_id, checked, meta, route, lang)

    def _submit(self, kind: str, run_id: str, checked: forms.Checked, meta: dict[str, Any], route: str,
                lang: str | None) -> str:
        jobs = self.board.jobs
        args = None
        env = dict(checked.config.secrets)  # secrets reach the process through its environment only
        if kind == "chat":
            from app.chat_workers import worker_args, worker_env

            args = worker_args(self.board)
            env.update(worker_env(self.board, run_id))
        try:
            queued = jobs.submit(
                kind, forms.resolved_mapping(checked.config, jobs.runs_dir / run_id), run_id=run_id, args=args,
                meta=meta or None, env=env,
            )
        except JobError as err:
            raise reject(route, err.text(lang or "en")) from None
        for note in checked.config.notes:  # e.g. which variable a secret in the config should come from
            logger.info("Run %s: %s", queued, note)
        return queued

    def resume_run(self, run_id: str, lang: str | None = None) -> str:
        """Queue a new run that continues a failed or aborted training run from its latest complete checkpoint.

        A refusal names the problem in English (the API's), or in ``lang`` for the History tab."""
        run_id = str(run_id or "").strip()
        try:
            mapping, checkpoint = resume_mapping(self.board.jobs, run_id)
        except JobError as err:
            raise reject("resume_run", err.text(lang or "en")) from None
        return self._queue("train", mapping, {"resumed_from": run_id, "resumed_checkpoint": str(checkpoint)},
                           "resume_run", lang)

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
            return self.board.jobs.status(str(run_id or "").strip())
        except JobError as err:
            raise reject("run_status", str(err)) from None

    def abort_run(self, run_id: str) -> dict[str, Any]:
        """Cancel a queued run or stop a running one (training saves a checkpoint; every kind ends as aborted)."""
        run_id = str(run_id or "").strip()
        try:
            result = self.board.jobs.abort(run_id)
            status = self.board.jobs.folder(run_id).status()
        except JobError as err:
            raise reject("abort_run", str(err)) from None
        return {"id": run_id, "result": result, "status": status}


def get_blocks_context_root() -> Any:
    """The ``gr.Blocks`` being built (its session store exists once it is launched)."""
    from gradio.context import Context

    return Context.root_block


def register(board: Board) -> Automation:
    """Declare the endpoints inside the current ``gr.Blocks``."""
    auto = Automation(board)
    sessions = ApiSessions(get_blocks_context_root())

    def submit_run(config_yaml: str, kind: str = "train", request: gr.Request = None) -> str:
        """Queue a run from config YAML text; returns its run id."""
        sessions.seen(request)
        return auto.submit_run(config_yaml, kind)

    def list_runs(request: gr.Request = None) -> list[dict[str, Any]]:
        """Every run, newest first."""
        sessions.seen(request)
        return auto.list_runs()

    def run_status(run_id: str, request: gr.Request = None) -> dict[str, Any]:
        """status, step, total, loss (and more) of a run."""
        sessions.seen(request)
        return auto.run_status(run_id)

    def abort_run(run_id: str, request: gr.Request = None) -> dict[str, Any]:
        """Cancel or stop a run."""
        sessions.seen(request)
        return auto.abort_run(run_id)

    def resume_run(run_id: str, request: gr.Request = None) -> str:
        """Continue a failed or aborted training run from its latest complete checkpoint; returns the new run id."""
        sessions.seen(request)
        return auto.resume_run(run_id)

    for handler in (submit_run, list_runs, run_status, abort_run, resume_run):
        gr.api(handler, api_name=handler.__name__, concurrency_limit=None)
    return auto
