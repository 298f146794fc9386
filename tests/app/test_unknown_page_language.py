"""Text a handler composes before the page's language has reached the server (the hidden ``lang`` box is still empty
while a busy board's page loads) is in the language the page's browser asks for, not always English: a click on
Abort 3 s after a Chinese page opened answered "There is no run to abort here."."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from gradio.context import LocalContext

from app import i18n
from app.i18n import t
from app.lang_gate import LANG_UNKNOWN


@pytest.fixture()
def page_asking(request):
    """Run the test as if inside a handler of a page whose browser sends ``Accept-Language: <param>``."""
    token = LocalContext.request.set(SimpleNamespace(headers={"accept-language": request.param}))
    yield
    LocalContext.request.reset(token)


@pytest.mark.parametrize("page_asking", ["zh-CN,zh;q=0.9,en;q=0.8"], indirect=True)
def test_a_chinese_page_whose_language_has_not_arrived_gets_chinese(page_asking):
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("zh", "train_nothing_to_abort") != t(
        "en", "train_nothing_to_abort")
    assert t(LANG_UNKNOWN, "train_started", run="r1") == t("zh", "train_started", run="r1")


@pytest.mark.parametrize("page_asking", ["fr-FR,fr;q=0.9,zh-TW;q=0.8,en;q=0.5"], indirect=True)
def test_the_first_shipped_language_the_browser_asks_for(page_asking):
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("zh", "train_nothing_to_abort")


@pytest.mark.parametrize("page_asking", ["fr-FR,de;q=0.5", "", "zhx"], indirect=True)
def test_no_shipped_language_asked_for_is_english(page_asking):
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("en", "train_nothing_to_abort")


@pytest.mark.parametrize("page_asking", ["zh-CN"], indirect=True)
def test_a_known_language_is_kept(page_asking):
    assert t("en", "train_nothing_to_abort") == "There is no run to abort here."


def test_outside_a_handler_it_is_english():
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == "There is no run to abort here."


@pytest.fixture()
def board_language():
    """Set the board's ``--lang`` for one test and put back the default (``auto``) after it."""
    yield i18n.set_board_language
    i18n.set_board_language("auto")


@pytest.mark.parametrize("page_asking", ["en-US,en;q=0.9"], indirect=True)
def test_a_board_started_in_chinese_answers_in_chinese_before_the_page_language_arrives(page_asking, board_language):
    # `lf-board --lang zh` opens its pages in Chinese whatever the browser asks for: an early click follows it
    board_language("zh")
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("zh", "train_nothing_to_abort")
    assert t("en", "train_nothing_to_abort") == "There is no run to abort here."  # a known language is kept
    board_language("auto")
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("en", "train_nothing_to_abort")
    board_language("xx")  # not a shipped language: the browser's
    assert t(LANG_UNKNOWN, "train_nothing_to_abort") == t("en", "train_nothing_to_abort")


def test_lf_board_passes_its_lang_on_before_the_page_is_built(tmp_path, monkeypatch, board_language):
    import app.jobs
    import app.main

    seen = []

    def job_manager(runs_dir):  # the first thing built after the language is set: stop there, nothing started
        seen.append(i18n._board_language)
        raise SystemExit(7)

    monkeypatch.setattr(app.main, "listen_while_starting", lambda host, port, lang: SimpleNamespace(port=port))
    monkeypatch.setattr(app.jobs, "JobManager", job_manager)
    with pytest.raises(SystemExit):
        app.main.main(["--workspace", str(tmp_path / "ws"), "--port", "0", "--lang", "zh"])
    assert seen == ["zh"]
