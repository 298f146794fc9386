"""Errors that are the user's to fix: the CLI prints their message and exits non-zero without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem in the user's input (config, data, paths, resources), with a message naming the fix."""


class ModelError(UserError, ValueError):
    """A model, tokenizer, adapter, precision, attention or device setting that cannot work as given.

    A ValueError too, so callers that guard model loading with ``except ValueError`` keep working.
    """


class AbortRequested(BaseException):
    """Raised when a job is asked to stop (SIGTERM) outside the training loop."""


class RankFailure(UserError):
    """Another process of a multi-process run ended unexpectedly; this one cannot go on without it. Printed without
    a traceback, but the run failed (exit status 1), which is not the user's input at fault."""

    exit_code = 1


class Problem(str):
    """One problem's message (a ``str``, so every caller that joins or prints problems keeps working) with a stable
    ``code`` naming its kind: ``model``, ``data``, ``memory``... A program showing problems in another language
    heads each with a translation of its code and keeps the message as written (it names settings and paths)."""

    code: str

    def __new__(cls, text: str, code: str) -> Problem:
        problem = super().__new__(cls, text)
        problem.code = code
        return problem

    def __reduce__(self):  # pickles (multiprocessing) with its code
        return (Problem, (str(self), self.code))


def coded(code: str, problems: list[str]) -> list[str]:
    """``problems`` with ``code`` on each one that has none yet."""
    return [p if isinstance(p, Problem) else Problem(p, code) for p in problems]


# A run's `error_code` (run.json, the end event) from the class of the exception that ended it: the first class in
# its MRO found here. By name, so that this module imports none of the rooms that define them.
ERROR_CODES = {
    "ConfigError": "config",
    "MediaError": "media",
    "DatasetError": "data",
    "TemplateError": "template",
    "MissingTokenError": "template",
    "ModelError": "model",
    "RewardError": "reward",
    "DeepSpeedConfigError": "deepspeed",
    "DiskFullError": "disk_full",
    "FileTooLargeError": "file_too_large",
    "WriteDeniedError": "write_denied",
    "RankFailure": "rank_failure",
    "CacheError": "cache",
    "OutOfMemoryError": "out_of_memory",
    "UserError": "user",
}


def error_code(exc_type: type[BaseException] | None) -> str | None:
    """The stable code of an exception class (``crash`` for one that is not the user's to fix; None for None)."""
    if exc_type is None:
        return None
    for cls in exc_type.__mro__:
        if cls.__name__ in ERROR_CODES:
            return ERROR_CODES[cls.__name__]
    return "crash"
