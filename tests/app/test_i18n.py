"""Every locale has every key, and every key the board uses exists (static labels and server-side messages)."""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

from app.i18n import LANGUAGES, LOCALES_DIR, build_i18n, normalize_lang, t

APP_DIR = Path(__file__).resolve().parents[2] / "app"


def locale(lang: str) -> dict[str, str]:
    return json.loads((LOCALES_DIR / f"{lang}.json").read_text(encoding="utf-8"))


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_language_has_every_key_with_the_same_placeholders():
    en = locale("en")
    for lang in LANGUAGES:
        strings = locale(lang)
        assert set(strings) == set(en), f"{lang}: missing {set(en) - set(strings)}, extra {set(strings) - set(en)}"
        for key, text in strings.items():
            assert text.strip(), f"{lang}:{key} is empty"
            assert placeholders(text) == placeholders(en[key]), f"{lang}:{key} placeholders differ from English"


def test_chinese_is_really_translated():
    en, zh = locale("en"), locale("zh")
    same = [k for k in en if en[k] == zh[k] and re.search(r"[a-z]{4,}", en[k]) and not k.startswith("f_")]
    assert len(same) <= 5, f"untranslated: {same}"
    assert re.search(r"[\u4e00-\u9fff]", zh["tab_train"])


def _key_sites() -> tuple[set[str], set[str]]:
    """(literal keys, prefixes of keys composed at run time) from every L(...), t(lang, ...), JobError(...) and
    said(...) call in app/."""
    literal, prefixes = set(), set()
    for path in APP_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            # JobError("job_...", **params); said("upload_...", **params): a message kept to be said again (train_data)
            if node.func.id in ("L", "JobError", "said") and node.args:
                arg = node.args[0]
                if node.func.id == "JobError" and not (isinstance(arg, ast.Constant) and arg.value.startswith("job_")):
                    continue  # a message as it is (a full disk's)
            elif node.func.id == "t" and len(node.args) >= 2:
                arg = node.args[1]
            else:
                continue
            options = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
            for option in options:
                if isinstance(option, ast.Constant):
                    literal.add(option.value)
                elif isinstance(option, ast.JoinedStr) and isinstance(option.values[0], ast.Constant):
                    prefixes.add(option.values[0].value)
                elif isinstance(option, ast.BinOp) and isinstance(option.left, ast.Constant):
                    prefixes.add(option.left.value)
                else:
                    raise AssertionError(f"{path.name}:{node.lineno}: a locale key the test cannot follow")
    return literal, prefixes


def test_every_key_used_in_the_app_exists():
    en = locale("en")
    literal, prefixes = _key_sites()
    assert len(literal) > 150
    missing = sorted(k for k in literal if k not in en)
    assert not missing, f"keys used in app/ but missing from locales/en.json: {missing}"
    # keys composed at run time: each prefix with every suffix the code can produce
    from app.dataset_preview import MEDIA_LABELS
    from app.engine_text import CODES as ENGINE_CODES
    from app.page_script import CHROME
    from app.progress_view import PARALLEL_WORDS, STAGES
    from app.tabs.evaluate import METRIC_COLUMNS, PREDICTION_COLUMNS
    from app.tabs.profile import COLUMNS as PROFILE_COLUMNS
    from app.tabs.runs import COLUMNS
    from app.tabs.strategy import PARTS
    from engine.config import all_keys
    from engine.runs import KINDS, STATUSES

    families = {
        "status_": [*STATUSES, "unknown"],
        "abort_": ["cancelled", "stopping", "finished"],
        "col_": [*COLUMNS, *METRIC_COLUMNS, *PREDICTION_COLUMNS, *PROFILE_COLUMNS],
        "stage_": STAGES,
        "preview_": ["trained", "masked", "chosen", "rejected", "kto_tag", *MEDIA_LABELS],
        "f_": list(all_keys()),
        "h_": list(all_keys()),
        "strategy_part_": list(PARTS),
        "parallel_": list(PARALLEL_WORDS),
        "kind_": list(KINDS),
        "ekind_": list(ENGINE_CODES),
        "chrome_": list(CHROME.values()),
    }
    assert prefixes <= set(families), f"new run-time key families: {prefixes - set(families)}"
    missing = [p + s for p in prefixes for s in families[p] if p + s not in en]
    assert not missing, f"missing run-time keys: {missing}"


def test_the_page_shows_no_raw_keys(tmp_path):
    """Build the page and check that every translatable label, info and value names an existing key."""
    import gradio as gr

    from app.context import Board
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    en = locale("en")
    marker = re.compile(r"__i18n__(\{[^}]*\})")
    seen = 0
    for block in demo.blocks.values():
        for attr in ("label", "info", "placeholder", "value"):
            value = getattr(block, attr, None)
            text = str(value) if value is not None else ""
            for found in marker.findall(text):
                key = json.loads(found)["key"]
                assert key in en, f"{type(block).__name__}.{attr} uses the missing key {key!r}"
                seen += 1
        if isinstance(block, gr.Dropdown):
            for label, _ in block.choices:
                for found in marker.findall(str(label)):
                    assert json.loads(found)["key"] in en
    assert seen > 200


def test_server_side_translation():
    assert normalize_lang("zh-CN") == "zh" and normalize_lang("en-GB") == "en" and normalize_lang("fr") == "en"
    assert t("zh", "train_started", run="x") == "运行 `x` 已开始。"
    assert t("de", "train_started", run="x") == "Run `x` started."
    i18n = build_i18n()
    assert i18n.translations_dict["zh-CN"]["tab_train"] == "训练"


def test_no_key_is_defined_twice():
    """json.loads keeps the last of two equal keys silently; a merge that doubles a key must fail here."""
    for lang in LANGUAGES:
        pairs = json.loads((LOCALES_DIR / f"{lang}.json").read_text(encoding="utf-8"), object_pairs_hook=list)
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})


def test_every_run_card_is_composed_again_as_soon_as_the_page_language_is_set(tmp_path):
    """The cards of the Train, Evaluate and Export tabs start in the board's default language; the page's language
    (the browser's, or the one saved) must redraw them at once, not at the tab's next timer tick (a Chinese page
    showed English cards for 1.5 s after each tab was opened)."""
    import gradio as gr

    from app.context import Board
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    cards = [b for b in demo.blocks.values() if isinstance(b, gr.HTML) and "lf-empty" in str(b.value or "")]
    assert len(cards) == 3
    for card in cards:
        on_lang = [f for f in demo.fns.values()
                   if (lang._id, "change") in [(t[0], t[1]) for t in f.targets] and card in f.outputs]
        assert len(on_lang) == 1, "a run card is not redrawn when the page's language is set"
        fn = on_lang[0]
        assert [(t[0], t[1]) for t in fn.targets if t[1] == "tick"], "the same handler as the timer's tick"
        values = fn.fn(*[None if b is not lang else "zh" for b in fn.inputs])
        assert "还没有运行" in values[fn.outputs.index(card)]


def test_no_timer_composes_a_status_line_before_the_page_language_is_known(board):
    """A page that gradio loads again (a board restart under a Chinese page left open) runs its timers before its
    language arrives: each timer handler that reads the language leaves its outputs as they are until then, instead
    of composing them in English for 10-30 s (the language's arrival composes them)."""
    import gradio as gr

    from app.ui import build_ui

    def skipped(value):
        return isinstance(value, dict) and value == gr.skip()

    demo = build_ui(board)
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    assert lang.value == ""  # unknown until the page sets it
    cards = [b for b in demo.blocks.values() if isinstance(b, gr.HTML) and "lf-empty" in str(b.value or "")]
    assert len(cards) == 3 and not any("No run yet" in b.value for b in cards)  # no words before the language
    timers = {b._id for b in demo.blocks.values() if isinstance(b, gr.Timer)}
    ticking = [f for f in demo.fns.values() if lang in f.inputs and any(t[0] in timers for t in f.targets)]
    assert len(ticking) >= 5  # the devices line, the Train, Evaluate and Export cards, History
    for fn in ticking:
        args = [getattr(b, "value", None) for b in fn.inputs]
        outputs = fn.fn(*args)
        assert all(skipped(o) for o in (outputs if isinstance(outputs, tuple) else (outputs,))), fn.fn
        args[fn.inputs.index(lang)] = "zh"
        composed = fn.fn(*args)
        assert not all(skipped(o) for o in (composed if isinstance(composed, tuple) else (composed,))), fn.fn


def test_the_history_table_is_brought_up_to_date_as_its_tab_opens(board):
    """A run that ended while another tab was open must show when History is opened, not at its 4 s timer's next
    tick (the History timer starts only as its tab is selected)."""
    import gradio as gr

    from app.ui import build_ui

    demo = build_ui(board)
    history_tab = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-tab-history")
    on_open = [f for f in demo.fns.values() if (history_tab._id, "select") in [(t[0], t[1]) for t in f.targets]
               and not any(isinstance(out, gr.Timer) for out in f.outputs)]  # app.tab_timers' is the other
    assert len(on_open) == 1
    fn = on_open[0]
    run_id = board.jobs.submit("train", {"fake_steps": 1, "stage": "sft"})
    assert board.jobs.wait(run_id, 30) == "completed"
    table, picker, _, empty = fn.fn(*[None if getattr(b, "elem_id", None) != "lf-lang-code" else "en" for b in fn.inputs])
    assert run_id in list(table.iloc[:, 0]) and picker["choices"] == [(run_id, run_id)]
    assert empty["visible"] is False  # the "no runs yet" line goes once a run exists


def test_no_chart_with_translated_axis_titles_is_drawn_before_the_page_language_is_known(tmp_path):
    """A chart that has data as the page opens may be drawn before the page's translations are ready; it then
    keeps ``__i18n__{"__type__": ...}`` as its axis titles, even after later updates (the data preview's token
    histogram did so in about one page load of three). Such charts start without data, as the loss charts do."""
    import gradio as gr

    from app.context import Board
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    plots = [b for b in demo.blocks.values() if isinstance(b, (gr.BarPlot, gr.LinePlot, gr.ScatterPlot))]
    titled = [p for p in plots if "__i18n__" in str(p.x_title) + str(p.y_title)]
    assert len(titled) >= 4
    drawn = [p.label for p in titled if p.value is not None]
    assert not drawn, f"charts with translated axis titles start with data: {drawn}"


def test_the_strategy_picker_names_its_plain_choice_in_the_page_language():
    """The parallel strategy picker showed "single" on a Chinese page, beside choices named after their launchers
    (DDP, FSDP2, DeepSpeed, Ray: proper nouns); the plain one is a word and follows the page's language."""
    from gradio.i18n import I18nData

    from app.tabs.strategy import STRATEGY_CHOICES

    words = [(label, value) for label, value in STRATEGY_CHOICES if not re.match(r"(DDP|FSDP2?|DeepSpeed|Ray)\b", str(label))]
    assert words and all(isinstance(label, I18nData) for label, _ in words), words
    for label, _ in words:
        key = label.key
        assert re.search(r"[\u4e00-\u9fff]", t("zh", key)) and not re.search(r"[\u4e00-\u9fff]", t("en", key))
