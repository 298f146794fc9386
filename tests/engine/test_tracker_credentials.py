"""report_to: wandb without a way to log in is a config problem before the run starts, found where wandb looks."""

from __future__ import annotations

import functools

import pytest

from engine import tracker_credentials

wandb_login_problem = functools.partial(tracker_credentials.wandb_login_problem, interactive=False)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no project wandb/settings here
    return tmp_path


def test_no_key_anywhere_names_the_fixes(home):
    problem = wandb_login_problem(environ={"HOME": str(home)})
    assert problem.startswith("`report_to: wandb` needs a W&B API key")
    for fix in ("WANDB_API_KEY", "wandb login", "WANDB_MODE=offline", "report_to: none"):
        assert fix in problem
    assert "includes W&B" in wandb_login_problem("all", environ={"HOME": str(home)})


@pytest.mark.parametrize("env", [{"WANDB_API_KEY": "k" * 40}, {"WANDB_MODE": "offline"}, {"WANDB_MODE": "Disabled"},
                                 {"WANDB_MODE": "dryrun"}, {"WANDB_IDENTITY_TOKEN_FILE": "/run/token"}])
def test_a_key_or_a_mode_without_one_is_enough(home, env):
    assert wandb_login_problem(environ={"HOME": str(home), **env}) is None


def test_netrc_entry_for_the_wandb_host(home):
    netrc = home / ".netrc"
    netrc.write_text("machine github.com\n  login me\n  password x\n")
    netrc.chmod(0o600)
    assert wandb_login_problem(environ={"HOME": str(home)}) is not None  # another host only
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    assert wandb_login_problem(environ={"HOME": str(home)}) is None
    # a self-hosted server: its host, from WANDB_BASE_URL
    assert wandb_login_problem(environ={"HOME": str(home), "WANDB_BASE_URL": "https://wandb.corp:8080"}) is not None
    netrc.write_text("machine wandb.corp:8080\n  login user\n  password " + "k" * 40 + "\n")
    assert wandb_login_problem(environ={"HOME": str(home), "WANDB_BASE_URL": "https://wandb.corp:8080"}) is None
    # $NETRC wins over ~/.netrc; a file wandb would have to judge (unparsable) is not refused here
    other = home / "other-netrc"
    other.write_text("machine")
    assert wandb_login_problem(environ={"HOME": str(home), "NETRC": str(other)}) is None
    assert wandb_login_problem(environ={"HOME": str(home), "NETRC": str(home / "missing")}) is not None


def test_settings_file_with_an_api_key(home):
    settings = home / ".config" / "wandb" / "settings"
    settings.parent.mkdir(parents=True)
    settings.write_text("[default]\nbase_url = https://api.wandb.ai\n")
    assert wandb_login_problem(environ={"HOME": str(home)}) is not None
    settings.write_text("[default]\napi_key = " + "k" * 40 + "\n")
    assert wandb_login_problem(environ={"HOME": str(home)}) is None
    moved = home / "cfg"
    moved.mkdir()
    assert wandb_login_problem(environ={"HOME": str(home), "WANDB_CONFIG_DIR": str(moved)}) is not None


def test_from_a_terminal_wandb_asks_for_the_key_itself(home, monkeypatch):
    assert tracker_credentials.wandb_login_problem(environ={"HOME": str(home)}, interactive=True) is None
    monkeypatch.setattr(tracker_credentials, "_stdin_is_terminal", lambda: True)
    assert tracker_credentials.wandb_login_problem(environ={"HOME": str(home)}) is None
    monkeypatch.setattr(tracker_credentials, "_stdin_is_terminal", lambda: False)
    assert tracker_credentials.wandb_login_problem(environ={"HOME": str(home)}) is not None
