"""What a newcomer hit: a pasteable Train command, the preview after registering, run pickers without chat loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.tabs import train

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_train_command_works_when_pasted(board, tmp_path):
    from tests.app.test_handlers import TRAIN_KEYS, train_values

    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    command, text, pending = train.preview_command(board, mapping, "", "en")
    assert not (board.jobs.runs_dir / pending).exists()  # the folder does not exist yet: the command must not need it
    # paste it into a shell (checking instead of training, with the engine of this checkout)
    pasted = command.replace("lf-engine train", f"{sys.executable} -m engine check", 1)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("OK: - is valid for `train`")


def test_a_config_containing_the_marker_still_pastes():
    command = train.pasteable_command("train", "a: LF_CONFIG\n")
    assert command.startswith("lf-engine train - <<'LF_CONFIG_'\n") and command.endswith("\nLF_CONFIG_")
