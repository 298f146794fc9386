"""Whether a tracker that needs an account can log in, told before a run starts.

With ``report_to: wandb`` and no W&B API key, ``wandb`` cannot ask for one in an engine process without a terminal
(the board starts every run in the background), so the run stopped at the trainer's start with ``UsageError: No
API key configured`` and a traceback. From a terminal wandb asks for the key itself, as with LLaMA-Factory, and
nothing is refused. :func:`wandb_login_problem` looks where wandb looks, without importing it or asking
the network: the ``WANDB_API_KEY`` and ``WANDB_IDENTITY_TOKEN_FILE`` variables, the ``.netrc`` file (``$NETRC``,
``~/.netrc``, ``~/_netrc``) that ``wandb login`` writes, and wandb's settings files; ``WANDB_MODE`` offline,
dryrun or disabled needs no key. It only reports a problem when it finds none of them (a file it cannot read counts
as found: wandb then decides), and the key itself is never read into a message.
"""

from __future__ import annotations

import io
import netrc
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

NO_KEY_MODES = frozenset({"offline", "dryrun", "disabled"})
DEFAULT_HOST = "api.wandb.ai"
MAX_LOGIN_FILE_BYTES = 1 << 20
"""The most of a ``.netrc`` or wandb settings file read (bytes; each holds a few lines): a larger one, a named pipe
or a device there counts as found without being read (it was read whole, or waited on for good)."""


def wandb_login_problem(report_to: str = "wandb", environ: Mapping[str, str] | None = None,
                        interactive: bool | None = None) -> str | None:
    """A sentence naming the fix when a wandb run could not log in; None when it can (or may). ``report_to``: the
    value that brings wandb in (``wandb``, or ``all`` with wandb installed); ``interactive``: whether wandb could
    ask for a key on this process's terminal (default: whether standard input is one)."""
    if interactive is None:
        interactive = _stdin_is_terminal()
    if interactive:
        return None
    env = os.environ if environ is None else environ
    if env.get("WANDB_MODE", "").strip().lower() in NO_KEY_MODES:
        return None
    if env.get("WANDB_API_KEY", "").strip() or env.get("WANDB_IDENTITY_TOKEN_FILE", "").strip():
        return None
    if _netrc_has_host(env) or _settings_have_key(env):
        return None
    via = "" if report_to == "wandb" else " (it includes W&B, which is installed)"
    return (f"`report_to: {report_to}`{via} needs a W&B API key and none is set up: set WANDB_API_KEY in the "
            "environment the board or `lf-engine` starts from (or run `wandb login` once), set WANDB_MODE=offline "
            "to log locally, or set `report_to: none`.")


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):  # replaced or closed standard input
        return False


def _host(env: Mapping[str, str]) -> str:
    base = env.get("WANDB_BASE_URL", "").strip()
    return (urlsplit(base).netloc or base) if base else DEFAULT_HOST


def _read_bounded(path: Path) -> str | None:
    """The text of a login file (read only as a regular file of at most :data:`MAX_LOGIN_FILE_BYTES`); None when
    it is missing. Raises OSError or ValueError when it is there but cannot be read so (a pipe, a folder, outsized):
    such a file counts as found, and wandb then reads it (or says why) itself."""
    import locale

    from engine.small_json import read_small

    try:
        raw = read_small(path, MAX_LOGIN_FILE_BYTES)
    except FileNotFoundError:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # as the netrc module reads it
        return raw.decode(locale.getpreferredencoding(False), errors="replace")


class _NetrcText(netrc.netrc):
    """A ``.netrc`` parsed from text already read (``netrc.netrc`` opens and reads its file whole itself)."""

    def __init__(self, name: str, text: str):  # noqa: D107
        self.hosts, self.macros = {}, {}
        self._parse(name, io.StringIO(text), False)  # the module's own parser (False: no ownership checks)


def _netrc_has_host(env: Mapping[str, str]) -> bool:
    home = Path(env.get("HOME") or Path.home())
    candidates = [Path(env["NETRC"]).expanduser()] if env.get("NETRC") else [home / ".netrc", home / "_netrc"]
    for path in candidates:
        try:
            text = _read_bounded(path)
            if text is None:
                continue
            return _NetrcText(str(path), text).authenticators(_host(env)) is not None
        except (OSError, ValueError, netrc.NetrcParseError, AttributeError, TypeError):
            return True  # unreadable here (or the parser changed): wandb reads it (or says why) itself
    return False


def _settings_have_key(env: Mapping[str, str]) -> bool:
    """wandb's global settings file (``$WANDB_CONFIG_DIR/settings``, default ``~/.config/wandb/settings``) or a
    project's ``wandb/settings`` naming an ``api_key``."""
    home = Path(env.get("HOME") or Path.home())
    config_dir = Path(env["WANDB_CONFIG_DIR"]).expanduser() if env.get("WANDB_CONFIG_DIR") else (
        home / ".config" / "wandb")
    for path in (config_dir / "settings", Path(env.get("WANDB_DIR") or ".") / "wandb" / "settings"):
        try:
            text = _read_bounded(path)
        except (OSError, ValueError):  # a pipe, a folder, outsized: wandb decides
            return True
        if text is None:
            continue
        if any(line.split("=", 1)[0].strip() == "api_key" for line in text.splitlines() if "=" in line):
            return True
    return False
