"""The error raised for every dataset problem the user can fix."""

from engine.errors import UserError


class DatasetError(UserError, ValueError):
    """A dataset that cannot be found, read or used for the chosen stage; the message names the fix."""
