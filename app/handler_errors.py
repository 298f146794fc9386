"""An unexpected error in one of the board's own handlers reaches the page as text, never as markup.

The board's handlers report what they expect in their own message boxes (:class:`app.markup.SafeMarkdown`). An error
they do not expect (a bug, or a file in a run folder that no check foresaw) goes to gradio, which shows its message
in a pop-up and renders that message as HTML: an exception that quotes a file's content (``could not convert string
to float: '<img src=...>'``) would show the file's markup. :func:`guard_handlers` wraps every handler of the page so
that such an error is logged with its traceback and reaches the pop-up as :func:`app.inert_text.inert` text, naming
the error as gradio would have. ``gr.Error`` passes through unchanged (the API's rejections are messages the board
wrote), and the automation API's handlers are left alone: a client reads their errors as plain text.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

import gradio as gr

from app.inert_text import inert
from app.visible_text import reveal

logger = logging.getLogger(__name__)

GUARDED = "_lf_guarded"


def as_page_error(err: Exception, where: str) -> gr.Error:
    """The pop-up for an unexpected error: its message as inert text (logged here with the traceback)."""
    logger.error("Board handler %s failed", where, exc_info=err)
    message = str(err).strip() or type(err).__name__
    return gr.Error(inert(reveal(message)), print_exception=False)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a plain function or a generator function) with unexpected errors turned into inert page errors.
    gradio reads the handler's signature and type hints through ``functools.wraps``."""
    where = getattr(fn, "__qualname__", repr(fn))
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from fn(*args, **kwargs))
            except gr.Error:
                raise
            except Exception as err:
                raise as_page_error(err, where) from err

        wrapper = stream
    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except gr.Error:
                raise
            except Exception as err:
                raise as_page_error(err, where) from err

        wrapper = call
    setattr(wrapper, GUARDED, True)
    return wrapper


def guard_handlers(demo: gr.Blocks, skip_api_names: Iterable[str]) -> int:
    """Wrap every Python handler of ``demo`` but the named API endpoints; the number wrapped."""
    skip = set(skip_api_names)
    wrapped = 0
    for block_fn in demo.fns.values():
        fn = block_fn.fn
        if fn is None or block_fn.api_name in skip or getattr(fn, GUARDED, False):
            continue
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"guard_handlers: {fn!r} is async; add an async wrapper before using async handlers")
        block_fn.fn = guarded(fn)
        wrapped += 1
    return wrapped
