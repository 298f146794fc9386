"""The board's workspace folder: runs, saved configs, uploaded datasets and exports.

Nothing is written outside it except the output paths the user names (such as an export folder).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.runs import read_regular, write_text_atomic

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKSPACE = "lfboard-workspace"
WORKSPACE_ENV = "LF_BOARD_WORKSPACE"
LAST_CONFIG = "last-used"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,79}$")

# What a newcomer gets on a fresh workspace: the demo model on the demo data, done in a minute or two on a CPU.
DEMO_SETTINGS: dict[str, Any] = {
    "model_name_or_path": "demo",
    "template": "chatml",
    "stage": "sft",
    "finetuning_type": "lora",
    "dataset": "demo_identity,demo_alpaca",
    "cutoff_len": 256,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "learning_rate": 5e-3,
    "num_train_epochs": 10.0,
    "logging_steps": 1,
    "save_steps": 50,
    "lora_rank": 16,
    "lora_alpha": 32,
    "warmup_ratio": 0.05,
    "lr_scheduler_type": "cosine",
}


def default_workspace() -> Path:
    """``$LF_BOARD_WORKSPACE`` or ``./lfboard-workspace``."""
    return Path(os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE).expanduser().resolve()


def demo_dataset_dir() -> Path | None:
    """The demo datasets (``$LF_DEMO_DATA_DIR`` or the project's ``examples/data``), when present."""
    override = os.environ.get("LF_DEMO_DATA_DIR")
    path = Path(override).expanduser() if override else REPO_ROOT / "examples" / "data"
    return path if (path / "dataset_info.json").is_file() else None


class SavedConfigError(ValueError):
    """A saved config (``configs/NAME.yaml``) that cannot be read; the message names the file and the reason."""


def valid_name(name: str) -> bool:
    """Whether ``name`` is usable as a file name for a saved config or an uploaded dataset."""
    return bool(_NAME.match(name or "")) and ".." not in name


class WorkspaceBusy(RuntimeError):
    """Another board process holds the workspace."""


class SecretUnusable(RuntimeError):
    """The workspace's browser key can be neither read nor replaced; the message names the file and the fix."""


MAX_SECRET_BYTES = 4096
"""The largest browser key file read (the board writes 32 characters)."""


@dataclass
class Workspace:
    """One workspace folder and its layout."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser().resolve()

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"

    @property
    def datasets_dir(self) -> Path:
        return self.root / "datasets"

    @property
    def exports_dir(self) -> Path:
        return self.root / "exports"

    def ensure(self) -> Workspace:
        """Create the folders (idempotent)."""
        for path in (self.runs_dir, self.configs_dir, self.datasets_dir, self.exports_dir):
            path.mkdir(parents=True, exist_ok=True)
        return self

    def contains(self, path: str | Path) -> bool:
        """Whether ``path`` lies inside the workspace."""
        try:
            Path(path).resolve().relative_to(self.root)
        except ValueError:
            return False
        return True

    def scratch_call(self, prefix: str) -> Path:
        """A new private folder (mode 0700) for one call's scratch files (a worker's config, result and log), inside
        the workspace's ``.scratch``; the caller removes it.

        The file names inside it were predictable in a shared folder: in a workspace another user can write, a link
        planted at a worker's result or log path (or as ``.scratch`` itself) had the worker write through it into
        any file of the board's user. ``.scratch`` is used only when it is a real folder of this user's that nobody
        else can write (a link there is removed and the folder made afresh); otherwise the system's temp folder,
        whose sticky bit keeps others from renaming the call's folder, takes its place.
        """
        import stat
        import tempfile

        scratch = self.root / ".scratch"
        try:
            if scratch.is_symlink():
                logger.warning("%s was a link (to %s); it is removed and a folder of the board's own takes its place.",
                               scratch, os.readlink(scratch))
                scratch.unlink()
            scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = scratch.lstat()
            private = (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                       and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
        except OSError:
            private = False
        if not private:
            logger.warning("%s is not a folder that only this user can write; scratch files go to the system's temp "
                           "folder instead.", scratch)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch if private else None))

    def is_fresh(self) -> bool:
        """True before the first run or saved config."""
        has_runs = self.runs_dir.is_dir() and any(self.runs_dir.iterdir())
        return not has_runs and not self.list_configs()

    def default_dataset_dir(self) -> Path:
        """The demo data when available, else the workspace's own dataset folder."""
        return demo_dataset_dir() or self.datasets_dir

    def dataset_dirs(self) -> list[str]:
        """Dataset folders offered in the pickers: the demo data and the uploads folder."""
        dirs = [str(d) for d in (demo_dataset_dir(), self.datasets_dir) if d is not None]
        return list(dict.fromkeys(dirs))

    def secret(self) -> str:
        """A random key kept in the workspace, so that what pages store in the browser survives a board restart.

        The key is read only from a regular file of at most MAX_SECRET_BYTES: a named pipe put there held the
        board's start for good (reading waited for a writer), and a huge or sparse file took its time and memory.
        Such a file, one that is not UTF-8 text or one too short to be a key is not a key this board wrote: a new
        key replaces it (with a warning in the log), since a key protects only what pages kept in the browser, which
        they then forget, and a user who never made that file should not have to remove it to start the board.

        Raises:
            SecretUnusable: the file cannot be replaced either (a folder of that name, no permission).
        """
        path = self.root / ".browser-secret"
        try:
            raw = read_regular(path, max_bytes=MAX_SECRET_BYTES + 1)
            text = raw.decode("utf-8").strip()
            if len(raw) > MAX_SECRET_BYTES:
                reason = f"larger than {MAX_SECRET_BYTES:,} bytes"
            elif len(text) < 16:
                reason = "shorter than 16 characters"
            else:
                return text
        except FileNotFoundError:
            reason = None
        except (OSError, UnicodeDecodeError) as err:
            reason = " ".join(str(err).split())[:200]
        if reason:
            logger.warning("%s is not a key this board wrote (%s): a new one replaces it, so pages forget what they "
                           "kept in the browser.", path, reason)
        self.root.mkdir(parents=True, exist_ok=True)
        text = secrets.token_urlsafe(24)
        try:
            write_text_atomic(path, text, mode=0o600)  # readable by the owner alone from the first byte, and whole
        except OSError as err:
            raise SecretUnusable(f"the browser key {path} cannot be read or replaced ({err.strerror or err}); remove "
                                 "it (the board writes a new one) or pick another workspace with --workspace.") from None
        return text

    @property
    def lock_path(self) -> Path:
        """The file a running board holds locked (its chat workers watch it, see ``engine.infer.board_watch``)."""
        return self.root / ".board.lock"

    def lock(self, wait: float = 1.0) -> Any:
        """Hold the workspace for this board process (one board per workspace, so a queued run starts once).

        A chat worker checks now and then whether a board holds the lock by taking it shared for an instant, so a
        refused lock is tried again for up to ``wait`` seconds before another board is assumed.

        Returns:
            The open lock file; keep it for the life of the process.

        Raises:
            WorkspaceBusy: when another running board holds it.
        """
        import errno
        import fcntl
        import stat

        self.root.mkdir(parents=True, exist_ok=True)
        # never through a link (one to a file of the user's was truncated and overwritten with the pid), and never
        # waiting on a pipe: a workspace copied from elsewhere may hold either under that name
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.lock_path, flags, 0o600)
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            raise OSError(err.errno, "its lock file is a link; remove it", str(self.lock_path)) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "its lock file is not a plain file; remove it", str(self.lock_path))
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "a+", encoding="utf-8")  # held for the process's life
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                handle.seek(0)
                owner = handle.read().strip() or "?"
                handle.close()
                raise WorkspaceBusy(
                    f"Another lf-board (pid {owner}) is using the workspace {self.root}. Stop it, or start this one "
                    "with another --workspace."
                ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    # -- saved configs ----------------------------------------------------------------------------------
    def config_path(self, name: str) -> Path:
        if not valid_name(name):
            raise ValueError(name)
        return self.configs_dir / f"{name}.yaml"

    def list_configs(self) -> list[str]:
        if not self.configs_dir.is_dir():
            return []
        return sorted(p.stem for p in self.configs_dir.glob("*.yaml"))

    def save_config(self, name: str, mapping: dict[str, Any]) -> Path:
        """Write a flat config mapping as YAML under ``configs/NAME.yaml``."""
        path = self.config_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all: a full disk keeps the config saved before under that name
        write_text_atomic(path, yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True))
        return path

    def read_config(self, name: str) -> dict[str, Any]:
        """A saved config's mapping ({} when missing).

        Raises:
            SavedConfigError: the file cannot be read or is not YAML (edited by hand, written by another tool);
                the message says why.
        """
        path = self.config_path(name)
        from engine.config.limits import MAX_CONFIG_BYTES
        from engine.config.loader import ConfigError, load_yaml_text
        from engine.small_json import TooLarge, read_small

        try:  # one descriptor, checked and read: the file cannot be swapped between the size check and the read
            raw = read_small(path, MAX_CONFIG_BYTES)  # a regular file (a link to one included), at most cap + 1 read
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except TooLarge:  # as lf-engine refuses it (an 11 MB last-used.yaml held the board's start and every page
            # load for minutes before it was refused)
            raise SavedConfigError(f"{path} is larger than {MAX_CONFIG_BYTES:,} bytes, the most a config may be "
                                   "(a LLaMA-Factory config is a few dozen lines).") from None
        except OSError as err:  # a pipe, device or socket, or a folder (refused at once, never waited on); no access
            what = "a folder, not a config file" if path.is_dir() else err.strerror or str(err)
            raise SavedConfigError(f"{path}: {what}; save the config again from the form.") from None
        try:  # the engine's reading: an alias bomb, a number past 4,300 digits or a nesting too deep is named
            data = load_yaml_text(raw.decode("utf-8"), f"`{path}`", warn=False)
        except ConfigError as err:
            raise SavedConfigError(" ".join(err.problems[0].split())[:300]) from None
        except (UnicodeDecodeError, yaml.YAMLError) as err:
            reason = " ".join(str(err).split())
            raise SavedConfigError(f"{path}: {reason[:300]}") from None
        return data if isinstance(data, dict) else {}

    def startup_settings(self) -> dict[str, Any]:
        """The form values a page opens with: the last started config, else the demo settings (also when the last
        one cannot be read: a broken file must not keep the board from starting)."""
        try:
            last = self.read_config(LAST_CONFIG) if (self.configs_dir / f"{LAST_CONFIG}.yaml").is_file() else {}
        except SavedConfigError as err:
            logger.warning("The last-used config cannot be read (%s); the form opens on the demo settings.", err)
            last = {}
        if last:
            return last
        settings = dict(DEMO_SETTINGS)
        settings["dataset_dir"] = str(self.default_dataset_dir())
        if demo_dataset_dir() is None:
            settings["dataset"] = None
        return settings
