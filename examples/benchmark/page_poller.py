"""Poll a running board the way an open browser page does: its timers' events, over gradio's queue protocol.

A page's ``gr.Timer`` ticks call private events (not in the HTTP API) that the browser sends to
``/gradio_api/queue/join`` by function index, with the page's session id, and whose results it reads from the
session's event stream ``/gradio_api/queue/data``. The page's layout (``/config``) names every timer, its interval and
the inputs of the events it fires; a ``gr.State`` input is kept by the server per session, a ``gr.BrowserState`` input
is sent by the page (its stored value), any other input is the component's value as the page shows it.

Used by run_board_benchmark.py (``--watch-polls``); standard library only.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

TRAIN_RUN_KEY = "lfboard-train-run"
"""storage_key of the Train tab's BrowserState holding the watched run id (app/tabs/train.py)."""
TOP_BAR_CLASS = "lf-devices"
"""elem_classes of the top bar's device line, an output of the top bar's timer (app/topbar.py)."""


def timer_events(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every event fired by a timer's tick: fn_index, trigger_id, interval (s), input and output component ids."""
    components = {c["id"]: c for c in config.get("components", [])}
    events = []
    for dep in config.get("dependencies", []):
        for target, event in dep.get("targets", []):
            timer = components.get(target, {})
            if event == "tick" and timer.get("type") == "timer":
                events.append({"fn_index": dep["id"], "trigger_id": target,
                               "interval": float(timer.get("props", {}).get("value") or 1.0),
                               "inputs": list(dep.get("inputs", [])), "outputs": list(dep.get("outputs", []))})
    return events


def _props(config: dict[str, Any], component_id: int) -> tuple[str, dict[str, Any]]:
    for c in config.get("components", []):
        if c["id"] == component_id:
            return c.get("type", ""), c.get("props", {})
    return "", {}


def watching_events(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The timers a page open on the Train tab runs: those that read the watched training run (status, log and
    charts each second; the RL panel) and the top bar's (checkpoints and devices)."""
    chosen = []
    for event in timer_events(config):
        reads_run = any(_props(config, i)[1].get("storage_key") == TRAIN_RUN_KEY for i in event["inputs"])
        top_bar = any(TOP_BAR_CLASS in (_props(config, i)[1].get("elem_classes") or []) for i in event["outputs"])
        if reads_run or top_bar:
            chosen.append(event)
    return chosen


PAGE_LANG_ID = "lf-lang-code"
"""elem_id of the hidden box holding the page's language: empty in the config, set by the page as it loads (until
then the board's timers leave their output alone), so a polling page sends the language it would have set."""


def input_values(config: dict[str, Any], event: dict[str, Any], stored: dict[str, Any],
                 lang: str = "en") -> list[Any]:
    """What a loaded page sends for the event's inputs; ``stored`` maps a BrowserState's storage_key to its value,
    ``lang`` is the language the page set."""
    values = []
    for component_id in event["inputs"]:
        kind, props = _props(config, component_id)
        if props.get("elem_id") == PAGE_LANG_ID:
            values.append(lang)
        elif kind == "browserstate":
            values.append(stored.get(props.get("storage_key"), props.get("default_value")))
        elif kind == "state":
            values.append(None)  # the server keeps it for the session
        else:
            values.append(props.get("value"))
    return values


def due(interval: float, second: int) -> bool:
    """Whether a timer of ``interval`` seconds fires during second ``second`` (1, 2, ...) of a page's life."""
    return int(second // interval) > int((second - 1) // interval)


class Page:
    """One open page (one session) of the board at ``base``."""

    def __init__(self, base: str, stored: dict[str, Any]):
        self.base = base
        self.session = uuid.uuid4().hex[:11]
        with urllib.request.urlopen(f"{base}/config", timeout=60) as response:
            self.config = json.loads(response.read())
        self.events = watching_events(self.config)
        self.stored = stored

    def fire(self, event: dict[str, Any]) -> tuple[float, int]:
        """Send one tick's event and read its result; (seconds, bytes of the result message)."""
        body = {"data": input_values(self.config, event, self.stored), "fn_index": event["fn_index"],
                "trigger_id": event["trigger_id"], "session_hash": self.session, "event_data": None}
        t0 = time.perf_counter()
        request = urllib.request.Request(f"{self.base}/gradio_api/queue/join", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            event_id = json.loads(response.read())["event_id"]
        with urllib.request.urlopen(f"{self.base}/gradio_api/queue/data?session_hash={self.session}",
                                    timeout=60) as response:
            for raw in response:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") != event_id or message.get("msg") != "process_completed":
                    continue
                if not message.get("success"):
                    raise RuntimeError(f"the page event {event['fn_index']} failed: {str(message)[:500]}")
                return time.perf_counter() - t0, len(line)
        raise RuntimeError(f"the page event {event['fn_index']} ended without a result")
