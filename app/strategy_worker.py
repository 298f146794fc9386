"""What the scale-out check needs from torch, read in a short-lived subprocess so that the board process never imports
torch or transformers: this machine's devices and a model's shape.

Usage: ``python -m app.strategy_worker IN.json OUT.json``. ``IN.json`` holds ``{"model": name or path}``. The worker
writes to ``OUT.json`` ``{"devices": {"type", "count", "memory"}, "shape": {...}}``, where ``shape`` is the model's
:class:`engine.train.parallel.plan.ModelShape` (parameters counted on the meta device from its config; no weights
read), or ``"shape_error": message`` in its place when the model's config cannot be read; ``{"error": message}``
when the devices themselves could not be read. The board checks every form itself from these facts
(:func:`engine.train.parallel.plan.check`), remembering them per model.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any


def facts_of(model: str) -> dict[str, Any]:
    """The facts as JSON-ready data (see the module docstring)."""
    from engine.train.parallel.plan import device_facts, model_shape

    out: dict[str, Any] = {"devices": asdict(device_facts())}
    try:
        out["shape"] = asdict(model_shape(model))
    except Exception as err:  # noqa: BLE001 - reported as the estimate's note; the other checks stand
        out["shape_error"] = str(err)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        result, code = facts_of(str(request["model"])), 0
    except Exception as err:  # reported to the page; the traceback stays in the worker's log
        import traceback

        traceback.print_exc()
        result, code = {"error": f"{type(err).__name__}: {err}"}, 2
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
