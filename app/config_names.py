"""The name a config is saved under, from what was typed in **Config name**.

A typed name is trimmed (spaces around a name are never meant), and a name typed with the file's extension
(``mine.yaml``, ``mine.yml``) names the same file as ``mine``: the config is saved as ``configs/mine.yaml``, never
``mine.yaml.yaml``. What is left must be a usable file name, and not the name of the last Start's config.
"""

from __future__ import annotations

from app.i18n import t
from app.visible_text import name_problem
from app.workspace import LAST_CONFIG, valid_name

EXTENSIONS = (".yaml", ".yml")


def config_name(typed: str | None) -> str:
    """The name ``typed`` saves under: trimmed, without a ``.yaml``/``.yml`` ending (any case)."""
    name = (typed or "").strip()
    for ext in EXTENSIONS:
        if name.lower().endswith(ext) and len(name) > len(ext):
            return name[: -len(ext)].strip()
    return name


def checked_config_name(typed: str | None, lang: str | None) -> tuple[str, str | None]:
    """(the name to save under, None) or (that name, the refusal in ``lang`` naming the problem and the fix)."""
    name = config_name(typed)
    if name_problem(name):
        return name, t(lang, "name_hidden_chars", name=name, chars=name_problem(name))
    if not valid_name(name):
        return name, t(lang, "config_bad_name", name=name)
    if name == LAST_CONFIG:  # every Start rewrites it
        return name, t(lang, "config_reserved_name", name=name)
    return name, None
