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

import netrc
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

NO_KEY_MODES = frozenset({"offline", "dryrun", "disabled"})
DEFAULT_HOST = "api.wandb.ai"


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


def _netrc_has_host(env: Mapping[str, str]) -> bool:
    home = Path(env.get("HOME") or Path.home())
    candidates = [Path(env["NETRC"]).expanduser()] if env.get("NETRC") else [home / ".netrc", home / "_netrc"]
    for path in candidates:
        if not path.exists():
            continue
        try:
            return netrc.netrc(str(path)).authenticators(_host(env)) is not None
        except (OSError, netrc.NetrcParseError):
            return True  # unreadable here: wandb reads it (or says why) itself
    return False


def _settings_have_key(env: Mapping[str, str]) -> bool:
    """wandb's global settings file (``$WANDB_CONFIG_DIR/settings``, default ``~/.config/wandb/settings``) or a
    project's ``wandb/settings`` naming an ``api_key``."""
    home = Path(env.get("HOME") or Path.home())
    config_dir = Path(env["WANDB_CONFIG_DIR"]).expanduser() if env.get("WANDB_CONFIG_DIR") else (
        home / ".config" / "wandb")
    for path in (config_dir / "settings", Path(env.get("WANDB_DIR") or ".") / "wandb" / "settings"):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError:
            return True
        if any(line.split("=", 1)[0].strip() == "api_key" for line in text.splitlines() if "=" in line):
            return True
    return False
