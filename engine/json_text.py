"""``json.loads`` whose failures on text are all :class:`json.JSONDecodeError`: Python's json raises a plain
ValueError, without a position, for a whole number past the interpreter's digit limit for ``int()`` (4,300 digits),
which callers that name a file's JSON errors let through as a traceback. Standard library only."""

from __future__ import annotations

import json
import re
import sys
from typing import Any


def long_number_error(doc: str, start: int = 0) -> json.JSONDecodeError:
    """json's error for a whole number past Python's digit limit as a JSONDecodeError at the first such number from
    ``start`` that is not in a string (a best guess: json does not say where it was)."""
    limit = sys.get_int_max_str_digits()
    found = re.search(rf'(?<![\w."])-?\d{{{limit + 1},}}(?![\d.eE])', doc[start:])
    return json.JSONDecodeError(f"a whole number of more than {limit:,} digits, more than Python reads (is it text "
                                "that lost its quotes?)", doc, start + (found.start() if found else 0))


def loads(text: str, **kwargs: Any) -> Any:
    """``json.loads``, where a whole number past Python's digit limit is a :class:`json.JSONDecodeError` naming it
    (a RecursionError for text nested too deeply is left to the caller, which names it in its own words)."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise long_number_error(text) from None
