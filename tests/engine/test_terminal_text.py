"""What the engine prints quotes values from configs and datasets: none of their characters may drive the terminal."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from engine.cli import main
from engine.terminal_text import TerminalSafeFilter, install, shown

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TITLE = "\x1b]0;pwned\x07"  # sets the terminal window's title
HIDE = "\x1b[2K\r"  # clears the line that was being printed


def test_shown_escapes_controls_and_keeps_text():
    assert shown(f"key {TITLE}x") == "key \\x1b]0;pwned\\x07x"
    assert shown("a\u202eb\x9bc\x7f") == "a\\u202eb\\x9bc\\x7f"
    assert shown("learning_rate\u200b \ufeffx\u2060") == "learning_rate\\u200b \\ufeffx\\u2060"
    assert shown("行 1\n\tzweite Zeile — ok 🙂") == "行 1\n\tzweite Zeile — ok 🙂"  # line breaks, tabs, any script


def test_check_error_quotes_a_hostile_key_inertly(capsys):
    """A config key (here an override; a YAML file can hold the same) was printed raw inside `Unknown key`."""
    assert main(["check", str(EXAMPLES / "sft_lora_demo.yaml"), f"lear{TITLE}ning_rate=1", f"x{HIDE}y=2"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and "\x07" not in err
    assert "Unknown key `lear\\x1b]0;pwned\\x07ning_rate`" in err and "x\\x1b[2K\\x0dy" in err


def test_check_never_prints_a_hostile_model_name_raw(capsys, tmp_path):
    """A model name with a terminal escape in it was printed raw in check's lines. The config loader now refuses such a
    name, naming its characters and where the first is; the checks' own line about that name ("does not exist",
    which quoted it escaped) is left out since a60573e, as a problem the loader already named."""
    config = tmp_path / "chat.yaml"
    config.write_text('model_name_or_path: "demo\\e]0;pwned\\a"\ntemplate: chatml\n', encoding="utf-8")
    assert main(["check", str(config), "--for", "chat"]) == 2
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "`model_name_or_path` holds U+001B (ESCAPE), U+0007 (a control character) (the first at character 5)" in out.err
    assert out.err.count("model_name_or_path") == 1


def test_log_records_and_tracebacks_are_inert():
    stream = io.StringIO()
    logger = logging.getLogger("test_terminal_text")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        install(logger)
        install(logger)  # once
        assert sum(isinstance(f, TerminalSafeFilter) for f in handler.filters) == 1
        logger.warning("Dataset %r has no rows", f"d{TITLE}")
        try:
            raise ValueError(f"column {HIDE}text")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "\x1b" not in text and "\r" not in text
    assert "d\\x1b]0;pwned\\x07" in text and "column \\x1b[2K\\x0dtext" in text


def test_engine_log_setup_installs_the_filter():
    from engine.log_setup import setup_logging

    root = logging.getLogger()
    setup_logging(debug=False)
    assert root.handlers and all(any(isinstance(f, TerminalSafeFilter) for f in h.filters) for h in root.handlers)


def test_a_model_reply_does_not_drive_the_terminal():
    """`lf-engine chat` wrote the model's reply as it came: byte-level tokens can spell any control sequence (OSC 52
    writes the clipboard in many terminals). On a terminal the reply's controls are now escapes; piped, it is as is."""
    from types import SimpleNamespace

    from engine.infer.cli_chat import interactive_chat

    pieces = ["Sure", "\x1b]52;c;cm0gLXJmIH4=\x07", " done\r\x1b[2K"]

    class Generation(list):
        def close(self):
            pass

    model = SimpleNamespace(
        start=lambda history, system, stop_event: Generation(pieces),
        finish=lambda generation: SimpleNamespace(text="".join(pieces), tool_calls=[{"name": "f\u202e", "arguments": {}}]),
    )

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for out, escaped in ((Terminal(), True), (io.StringIO(), False)):
        inputs = iter(["Hi", "exit"])
        interactive_chat(None, chat_model=model, read=lambda prompt, inputs=inputs: next(inputs), out=out)
        text = out.getvalue()
        if escaped:
            assert "\x1b" not in text and "\\x1b]52;c;cm0gLXJmIH4=\\x07 done\\x0d\\x1b[2K" in text
            assert "f\\u202e" in text and "\u202e" not in text
        else:
            assert "\x1b]52;c;" in text and "f\u202e" in text
