"""Errors that are the user's to fix: the CLI prints their message and exits non-zero without a traceback."""


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
