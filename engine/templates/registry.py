"""Every built-in chat template, in one explicit dict (name -> Template).

The strings are LLaMA-Factory 0.9.5's, so a config written for LLaMA-Factory trains on the same token ids here
(tests/engine/test_templates_lf.py checks every template against golden ids produced by LLaMA-Factory itself).
Families live in their own modules; this table is the only place that lists them.
"""

from __future__ import annotations

from engine.templates.base import Template
from engine.templates.families_core import CORE_TEMPLATES
from engine.templates.families_later import LATER_TEMPLATES
from engine.templates.families_more import MORE_TEMPLATES
from engine.templates.vision import VISION_TEMPLATES
from engine.templates.vision_text_only import TEXT_ONLY_VISION_TEMPLATES

TEMPLATES: dict[str, Template] = {
    template.name: template for template in (*CORE_TEMPLATES, *MORE_TEMPLATES, *LATER_TEMPLATES,
                                             *VISION_TEMPLATES.values(), *TEXT_ONLY_VISION_TEMPLATES)
}


def list_templates() -> list[str]:
    """Names of the built-in templates, in registry order."""
    return list(TEMPLATES)
