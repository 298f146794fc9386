"""User-visible strings: ``locales/<lang>.json``, served to the page through gradio's I18n.

Static text (labels, help, buttons, headings) is passed to components as ``L("key")``: gradio sends the key
to the page and the browser shows it in the page's language. Text that handlers compose at run time
(status lines, tables, errors) is translated on the server with ``t(lang, "key", **params)``, where ``lang``
is the language the page reports (see ``app.topbar``).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

from gradio.i18n import I18n, I18nData

logger = logging.getLogger(__name__)

LOCALES_DIR = Path(__file__).resolve().parent.parent / "locales"
LANGUAGES: dict[str, str] = {"en": "English", "zh": "中文"}
"""Languages the board ships, code -> name shown in the language picker."""
DEFAULT_LANG = "en"
# The browser-side locale code used for each language (gradio's own strings exist for ``zh-CN``).
BROWSER_LOCALES = {"en": "en", "zh": "zh-CN"}


@functools.cache
def load_locale(lang: str) -> dict[str, str]:
    """The strings of one language (empty when the file is missing or broken, with a log line)."""
    path = LOCALES_DIR / f"{lang}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        logger.error("Cannot read the locale file %s (%s); its strings fall back to English.", path, err)
        return {}
    return {str(k): str(v) for k, v in data.items()}


def normalize_lang(code: str | None) -> str:
    """Map a browser or user language code (``zh-CN``, ``en-US``, ``auto``...) to a shipped language."""
    code = (code or "").strip().lower().replace("_", "-")
    for lang in LANGUAGES:
        if code == lang or code.startswith(lang + "-"):
            return lang
    return DEFAULT_LANG


def L(key: str) -> I18nData:
    """A static, translatable string for a component's label, info, value or placeholder."""
    return I18nData(key)


def t(lang: str | None, key: str, **params: Any) -> str:
    """The text of ``key`` in ``lang`` (English when missing there), with ``{name}`` parameters filled in."""
    return _text(lang, key, params)


def translate(lang: str | None, key: str, **params: Any) -> str:
    """:func:`t` for a key chosen where the message was raised (``JobError("job_...")``), whose literal the
    locale tests find there."""
    return _text(lang, key, params)


_board_language = "auto"
"""The board's ``--lang`` (``auto`` follows each browser); set by :func:`set_board_language` when the board starts."""


def set_board_language(lang: str) -> None:
    """The language the board was started in (``lf-board --lang``); ``auto`` or an unknown code: each browser's."""
    global _board_language
    _board_language = lang if lang in LANGUAGES else "auto"


def unknown_page_language() -> str:
    """The language of text composed before the page's own language has reached the server: the board's ``--lang``
    when it was started in one (the page opens in it unless the browser saved another choice), else the browser's
    (:func:`request_language`)."""
    return _board_language if _board_language in LANGUAGES else request_language()


def request_language() -> str:
    """The language of the page whose handler runs now, as its browser asks for it (the request's
    ``Accept-Language``: its first shipped language), else :data:`DEFAULT_LANG`. For text composed before the page's
    own language has reached the server: the hidden ``lang`` box (app.topbar) is empty until the page has loaded and
    set it, which took 3-60 s on a busy board, and a click on Start or Abort in that time answered in English on a
    Chinese page."""
    from gradio.context import LocalContext

    request = LocalContext.request.get(None)  # gradio sets it in the thread that runs a handler
    headers = getattr(request, "headers", None) or {}
    for part in str(headers.get("accept-language") or "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag and normalize_lang(tag) == tag.split("-")[0]:
            return normalize_lang(tag)
    return DEFAULT_LANG


def _text(lang: str | None, key: str, params: dict[str, Any]) -> str:
    if lang == "":  # the page's language is not known yet (app.lang_gate.LANG_UNKNOWN)
        lang = unknown_page_language()
    text = load_locale(normalize_lang(lang)).get(key) or load_locale(DEFAULT_LANG).get(key)
    if text is None:
        logger.warning("Missing locale key %r", key)
        text = key
    if params:
        try:
            return text.format(**params)
        except (KeyError, IndexError, ValueError):
            return text + " " + ", ".join(f"{k}={v}" for k, v in params.items())
    return text


def build_i18n() -> I18n:
    """The gradio I18n object with every shipped language (also under the browser's regional codes)."""
    translations: dict[str, dict[str, str]] = {}
    for lang in LANGUAGES:
        strings = load_locale(lang)
        translations[lang] = strings
        regional = BROWSER_LOCALES[lang]
        if regional != lang:
            translations[regional] = strings
    return I18n(**translations)


# Runs in the page: switch gradio's display language to the chosen one and report the language in effect
# (``auto`` follows the browser). The page's own i18n module is located among the loaded scripts; if it cannot
# be found the page keeps the browser's language (gradio's footer Settings can still switch it).
SET_LOCALE_JS = """
async (choice) => {
  const codes = __CODES__;
  let lang = choice;
  if (!lang || lang === "auto") {
    const nav = (navigator.language || "en").toLowerCase();
    lang = Object.keys(codes).find((c) => nav === c || nav.startsWith(c + "-")) || "__DEFAULT__";
  }
  try {
    const url = performance.getEntriesByType("resource").map((e) => e.name)
      .find((n) => /\\/assets\\/core-[^/]*\\.js$/.test(n));
    if (url) {
      const mod = await import(url);
      if (mod.changeLocale) { mod.changeLocale(codes[lang] || lang); }
    }
  } catch (err) { console.warn("LF Board: cannot switch the language", err); }
  window.lfBoardLang = lang;  // gradio's hard-coded chrome strings follow it (app.page_script)
  if (window.lfBoardLocalize) { window.lfBoardLocalize(); }
  return [lang, choice];
}
""".replace("__CODES__", json.dumps(BROWSER_LOCALES)).replace("__DEFAULT__", DEFAULT_LANG)
