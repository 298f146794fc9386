"""gradio's hard-coded English chrome gets the board's translations (app/page_script.py)."""

from __future__ import annotations

from pathlib import Path

import gradio

from app.i18n import SET_LOCALE_JS
from app.page_script import CHROME, chrome_table, page_js


def test_every_chrome_string_has_a_translation_and_reaches_the_page():
    table = chrome_table()
    assert table["zh"]["Search..."] == "搜索…" and table["zh"]["Copy table data"] == "复制表格数据"
    assert all(table["en"][english] == english for english in CHROME)  # English shows gradio's own words
    assert all(table["zh"][english] != english for english in CHROME)
    script = page_js()
    assert "搜索…" in script and "lfBoardLocalize" in script and "lfBoardLocalize" in SET_LOCALE_JS


def test_the_strings_are_still_hard_coded_in_the_installed_gradio():
    """When a gradio upgrade renames or translates one of them, the entry is stale: this says which."""
    assets = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
    bundle = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in assets.glob("*.js"))
    templated = {"Enter text to search the table", "Enter text to filter the table"}  # `Enter text to ${mode} the table`
    assert "`Enter text to ${" in bundle
    missing = [s for s in set(CHROME) - templated
               if f"`{s}`" not in bundle and f'"{s}"' not in bundle and f"'{s}'" not in bundle]
    assert not missing, f"not in gradio {gradio.__version__}'s frontend: {missing}"
