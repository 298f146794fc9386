"""The error raised for media problems the user can fix (a dataset error, so the CLI reports it the same way)."""

from engine.data.errors import DatasetError


class MediaError(DatasetError):
    """A media file, placeholder, modality or processor problem; the message names the row or model and the fix."""
