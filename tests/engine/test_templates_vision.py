"""Vision-language and omni templates: LLaMA-Factory 0.9.5's exact strings and token ids.

tests/golden/lf_vision_templates.json.gz was produced by LLaMA-Factory's own template code
(``python -m tests.golden.generate_vision``) for the text cases of test_templates_lf.py plus rows carrying
``<image>``, ``<video>`` and ``<audio>`` placeholders (the template's text before the media plugin expands them),
on the same three tokenizer setups, with thinking on, off and history discarded for reasoning templates.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import pytest
from golden import cases

from engine.models.registry import FAMILIES
from engine.templates import TEMPLATES, get_template, list_templates
from engine.templates import tool_formats as tool_formats_module
from engine.templates.vision import VISION_TEMPLATES

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lf_vision_templates.json.gz"
CHAT = [{"role": "user", "content": "<image>Hi"}, {"role": "assistant", "content": "Yo"}]


@lru_cache(maxsize=1)
def golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()).decode("utf-8"))


@pytest.fixture(autouse=True)
def _fixed_date(monkeypatch):
    monkeypatch.setattr(tool_formats_module, "today", lambda: golden()["date"])


def test_every_multimodal_template_has_golden_ids():
    """Every template with media (except the Gemma ones, checked in lf_templates.json.gz) is checked here."""
    from test_templates_lf import golden as text_golden

    media = {name for name, template in TEMPLATES.items() if template.modalities}
    checked = set(golden()["templates"]) | set(text_golden()["templates"])
    assert media - checked == set()
    assert set(VISION_TEMPLATES) <= set(golden()["templates"])


@pytest.mark.parametrize("name", sorted(golden()["templates"]))
def test_vision_template_matches_llamafactory(name):
    from test_templates_lf import check_template

    entry = golden()["templates"][name]
    problems = check_template(name, entry, cases.media_conversations)
    assert not problems, "\n".join(problems[:6])
    template = get_template(name)
    assert list(template.stop_words) == entry["stop_words"]
    assert template.default_system == entry["default_system"]


def test_placeholders_stay_for_the_plugin():
    """The template writes the placeholders as they are: the media plugin expands them before encoding."""
    entry = golden()["templates"]["qwen2_vl"]["cases"]["media|think=1|discard=0"]["special"]
    assert entry["pairs_text"][1][0] == ("<|im_start|>user\nCompare <image> with <video> and <audio>.<|im_end|>\n"
                                         "<|im_start|>assistant\n")
    assert get_template("qwen2_vl").render(CHAT) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<image>Hi<|im_end|>\n"
        "<|im_start|>assistant\nYo<|im_end|>\n")


def test_glm4v_writes_the_empty_thought_before_the_reply_newline():
    # LLaMA-Factory's ReasoningTemplate puts the thought ids in front of the reply slot ("\n{content}").
    assert get_template("glm4v").render(CHAT) == "[gMASK]<sop><|user|>\n<image>Hi<|assistant|><think>\n\n</think>\n\n\nYo"
    assert get_template("glm4v").uses_efficient_eos


def test_stop_words_and_modalities():
    assert get_template("qwen2_vl").stop_words == ("<|im_end|>",) and get_template("qwen2_vl").replace_eos
    assert get_template("minicpm_v").stop_words == ("<|im_end|>",) and not get_template("minicpm_v").replace_eos
    assert get_template("glm4v").stop_words == ("<|user|>", "<|observation|>", "</answer>")
    assert get_template("qwen3_omni").modalities == ("image", "video", "audio")
    assert get_template("llava").modalities == ("image",)
    assert get_template("qwen3_5").tool_format == "qwen3_5" and get_template("glm4_5v").tool_format == "glm4_moe"


def test_every_family_template_exists():
    """The model list no longer points at templates that do not exist (lf-engine check failed for seven)."""
    missing = {family.name: family.template for family in FAMILIES.values() if family.template not in list_templates()}
    assert missing == {}


def test_model_list_says_which_media_each_family_takes():
    from engine.models.registry import default_template, model_media

    assert model_media("Qwen/Qwen2-VL-7B-Instruct") == ("image", "video")
    assert model_media("google/gemma-4-E2B-it") == ("image", "video", "audio")
    assert model_media("google/gemma-3-4b-it") == ("image",)
    assert model_media("demo-vlm") == ("image", "video") and default_template("demo-vlm") == "qwen2_vl"
    assert model_media("demo") == () and model_media("Qwen/Qwen3-4B") == ()


def test_board_picker_shows_media_badges():
    from app import catalog

    choices, note = catalog.models()
    labels = dict((value, label) for label, value in choices)
    assert note is None and choices[0][1] == "demo"
    assert labels["Qwen/Qwen2-VL-2B-Instruct"] == "Qwen2-VL-2B-Instruct  [image, video]"
    assert labels["demo-vlm"] == "LF-Demo-VLM  [image, video]" and labels["demo"] == "LF-Demo"


@pytest.mark.parametrize(("model", "template"), [
    # LLaMA-Factory 0.9.5's constants: Instruct models take the *_nothink templates, Thinking models think.
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl_nothink"), ("Qwen/Qwen3-VL-8B-Thinking", "qwen3_vl"),
    ("Qwen/Qwen3-Omni-30B-A3B-Instruct", "qwen3_omni_nothink"), ("Qwen/Qwen3-Omni-30B-A3B-Thinking", "qwen3_omni"),
    ("zai-org/GLM-4.5V", "glm4_5v"), ("zai-org/GLM-OCR", "glm_ocr"), ("openbmb/MiniCPM-o-2_6", "minicpm_o"),
    ("llava-hf/llava-v1.6-vicuna-7b-hf", "llava_next"), ("google/gemma-3n-E2B-it", "gemma3n"),
    ("openbmb/MiniCPM-V-4_6", "minicpm_v_4_6"),
])
def test_family_templates_follow_llamafactory(model, template):
    from engine.models.registry import default_template, model_media

    assert default_template(model) == template
    assert model_media(model) == get_template(template).modalities
