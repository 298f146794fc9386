"""The pre-quantized model check (:mod:`engine.models.prequantized`) for the board, asked in a child interpreter.

Whether transformers can load a GPTQ, AWQ, AQLM... checkpoint here is transformers' own question (its quantizer's
``validate_environment``), and asking it imports torch and transformers, which the board process never loads: the
engine's pre-flight check leaves it out when it is given the job's device facts (as the board gives them). So the
board reads the model's config.json itself (small JSON) and, only for a model that carries a ``quantization_config``,
runs ``python -m app.prequantized NAME CONFIG OUT.json`` (the engine's check, in the job's environment) and shows its
answer where the form's other problems show, as the job would refuse it at its start. Answers are remembered per
config.json (path, modification time, size); a worker that fails or takes too long is logged and leaves the question
to the job's own check.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from app.worker_process import log_tail, run_worker

logger = logging.getLogger(__name__)

CHECK_TIMEOUT = 120
_ENTRIES = 32
_answers: OrderedDict[str, str | None] = OrderedDict()
_lock = threading.Lock()  # one worker at a time: a form's changes do not start one each


def forget() -> None:
    """Drop the remembered answers (tests; a quantization library installed since)."""
    with _lock:
        _answers.clear()


def prequantized_problems(cfg: Any) -> list[str]:
    """The engine's pre-quantized check of ``cfg``'s base model, as a coded problem (``model``, as the engine
    codes it: the model is what to change), or [] (not quantized, loadable here, or the question could not be asked)."""
    from engine.errors import Problem
    from engine.models.prequantized import quantization_config
    from engine.models.registry import read_config_text
    from engine.preflight import model_config_file

    name = str(cfg.model.model_name_or_path or "")
    config_file = model_config_file(cfg)
    if config_file is None:
        return []
    try:
        stat = Path(config_file).stat()
        config = json.loads(read_config_text(config_file))
    except (OSError, ValueError, RecursionError):  # ValueError: too large, not JSON, not UTF-8; RecursionError: nested
        return []  # the model check names an unreadable config.json
    if not isinstance(config, dict) or quantization_config(config) is None:
        return []
    key = json.dumps([name, str(config_file), stat.st_mtime_ns, stat.st_size])
    with _lock:
        if key in _answers:
            _answers.move_to_end(key)
            answer = _answers[key]
        else:
            asked, answer = _ask(name, str(config_file))
            if asked:
                _answers[key] = answer
                while len(_answers) > _ENTRIES:
                    _answers.popitem(last=False)
    return [Problem(answer, "model")] if answer else []


def _ask(name: str, config_file: str) -> tuple[bool, str | None]:
    """(whether the worker answered, its answer)."""
    with tempfile.TemporaryDirectory(prefix="lfboard-prequantized-") as scratch:
        out, log = Path(scratch) / "out.json", Path(scratch) / "worker.log"
        try:
            code = run_worker("app.prequantized", [name, config_file, str(out)], log, CHECK_TIMEOUT)
        except subprocess.TimeoutExpired:
            logger.warning("The pre-quantized check of %s took longer than %s s; the job checks it as it starts.",
                           name, CHECK_TIMEOUT)
            return False, None
        try:
            return True, json.loads(out.read_text(encoding="utf-8"))["problem"]
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("The pre-quantized check of %s could not run (exit code %s): %s; the job checks it as it "
                           "starts.", name, code, log_tail(log, 6))
            return False, None


def main(argv: list[str] | None = None) -> int:
    """The worker: ``NAME CONFIG OUT.json`` -> ``{"problem": message or null}``."""
    name, config_file, out = list(sys.argv[1:] if argv is None else argv)
    from engine.models.prequantized import prequantized_problem

    Path(out).write_text(json.dumps({"problem": prequantized_problem(name, config_file)}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
