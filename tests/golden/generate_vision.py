"""Regenerate tests/golden/lf_vision_templates.json.gz from LLaMA-Factory 0.9.5 itself (run from the repository root).

    python -m tests.golden.generate_vision

The vision-language and omni templates, on the text cases of ``generate`` plus rows with ``<image>``, ``<video>``
and ``<audio>`` placeholders. LLaMA-Factory's media plugin is stubbed (``lf_harness``), so the golden text is the
template's own, before plugin expansion (which tests/engine/test_multimodal_plugins.py checks against the
processors). Needs the LLaMA-Factory git mirror (``LF_MIRROR``); tests only read the JSON it writes.
"""

from __future__ import annotations

import gzip
import json

from tests.golden import cases
from tests.golden.generate import FIXED_DATE, fix_date, template_entry
from tests.golden.lf_harness import load_lf
from tests.golden.tokenizers import VISION_FAMILY_SPECIALS

PATH = "tests/golden/lf_vision_templates.json.gz"


def main() -> None:
    load_lf()
    from llamafactory.data import template as lf_template
    from llamafactory.data import tool_utils

    fix_date(tool_utils)
    out: dict = {"date": FIXED_DATE.strftime("%d %b %Y"), "templates": {}}
    for name in VISION_FAMILY_SPECIALS:
        out["templates"][name] = template_entry(lf_template, name, cases.media_conversations)
        out["templates"][name]["stop_words"] = list(lf_template.TEMPLATES[name].stop_words)
        out["templates"][name]["default_system"] = lf_template.TEMPLATES[name].default_system
    data = json.dumps(out, ensure_ascii=False, sort_keys=True).encode("utf-8")
    with open(PATH, "wb") as handle:
        handle.write(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
