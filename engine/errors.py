"""Errors that are the user's to fix: the CLI prints their message and exits non-zero without a traceback."""


class UserError(Exception):
    """A problem in the user's input (config, data, paths, resources), with a message naming the fix."""


class AbortRequested(BaseException):
    """Raised when a job is asked to stop (SIGTERM) outside the training loop."""
