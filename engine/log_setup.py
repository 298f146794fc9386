"""The engine's log: one handler on stderr (time, level, logger, message; secrets masked), library chatter that nobody
can act on left out, and every library's records printed once.

``huggingface_hub`` and ``datasets`` each add a handler of their own to stderr when they are imported and still pass
their records on to the root logger, so with the engine's handler every one of their lines came twice, once bare
(a hub dataset without a network: twenty lines of retries for ten). Their root loggers here refuse that handler
(:class:`_RoutedLogger`): their records reach the engine's handler alone, formatted and masked like the rest.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from engine import terminal_text

ROUTED_LIBRARIES = ("huggingface_hub", "datasets")
"""Libraries whose root logger gets a stderr handler of its own on import, on top of passing records on."""


class _RoutedLogger(logging.Logger):
    """A library's root logger that does not take a plain stderr handler: its records go to the root's handler."""

    def addHandler(self, hdlr: logging.Handler) -> None:  # noqa: N802 - logging's own name
        if type(hdlr) is logging.StreamHandler:  # exactly the library's default; a FileHandler is kept
            return
        super().addHandler(hdlr)


def route_library_logs() -> None:
    """Make the libraries' root loggers :class:`_RoutedLogger` (dropping a handler one already added on import)."""
    manager = logging.Logger.manager
    for name in ROUTED_LIBRARIES:
        existing = manager.loggerDict.get(name)
        if isinstance(existing, logging.Logger):  # imported before the setup
            for handler in [h for h in existing.handlers if type(h) is logging.StreamHandler]:
                existing.removeHandler(handler)
            existing.__class__ = _RoutedLogger
            continue
        previous = manager.loggerClass
        manager.setLoggerClass(_RoutedLogger)
        try:
            logging.getLogger(name)  # made now (a placeholder for its children becomes this logger)
        finally:
            manager.loggerClass = previous


def setup_logging(debug: bool, quiet_transformers: bool = True) -> None:
    """The engine's log for a command (``lf-engine``'s entry point calls it before anything else)."""
    from engine.credentials import install_log_redaction, install_stream_redaction

    install_stream_redaction()  # before the log handler takes its stream
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    install_log_redaction()
    terminal_text.install()
    route_library_logs()
    for noisy in ("httpx", "urllib3", "datasets", "filelock", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # bitsandbytes (pulled in by GaLore) warns on every import on a CPU that an optional `kernels` package for 4-bit
    # CPU kernels is missing; nothing a run without quantization can act on.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    # and with the `kernels` package installed (transformers >= 5.25 requires it) that kernel lookup warns that it
    # skipped a publisher check when the hub is offline
    logging.getLogger("kernels").setLevel(logging.ERROR)
    if "TOKENIZERS_PARALLELISM" not in os.environ:  # off for forked children; batched tokenization turns it on
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        os.environ["LF_ENGINE_TOKENIZERS_PARALLELISM_DEFAULTED"] = "1"
    # Library deprecation chatter says nothing the user can act on; keep the log readable.
    warnings.filterwarnings("ignore", message=r".*deprecated and will be removed in v6.*", category=FutureWarning)
    warnings.filterwarnings("ignore", message=r".*'pin_memory' argument is set as true.*", category=UserWarning)
    # galore-torch and apollo-torch warn that their own AdamW is deprecated each time the Trainer builds it; a
    # GaLore or APOLLO run has no other optimizer to switch to
    warnings.filterwarnings("ignore", message=r"This implementation of AdamW is deprecated", category=FutureWarning)
    os.environ.setdefault("WANDB_DISABLED", "true")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # no \r progress bars in stdout.log
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if quiet_transformers:
        quiet_transformers_logs()


def quiet_transformers_logs() -> None:
    """transformers at warnings only, without progress bars (imports transformers)."""
    try:
        import transformers

        transformers.logging.set_verbosity_warning()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:
        pass
