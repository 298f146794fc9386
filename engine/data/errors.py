"""The error raised for every dataset problem the user can fix."""

from engine.errors import UserError


class DatasetError(UserError, ValueError):
    """A dataset that cannot be found, read or used for the chosen stage; the message names the fix."""


class RowError(ValueError):
    """A row that cannot be converted; the message says why (the converter skips the row and reports it)."""
