"""Vision-language templates: exact strings as LLaMA-Factory v0.9.5 writes them."""

from __future__ import annotations

import pytest

from engine.models.registry import FAMILIES
from engine.templates import get_template, list_templates

CHAT = [{"role": "user", "content": "<image>Hi"}, {"role": "assistant", "content": "Yo"}]


@pytest.mark.parametrize(("name", "expected"), [
    ("qwen2_vl", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<image>Hi<|im_end|>\n"
                 "<|im_start|>assistant\nYo<|im_end|>\n"),
    ("qwen3_vl", "<|im_start|>user\n<image>Hi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nYo<|im_end|>\n"),
    ("qwen3_vl_nothink", "<|im_start|>user\n<image>Hi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"),
    ("qwen3_5", "<|im_start|>user\n<image>Hi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nYo<|im_end|>\n"),
    ("qwen2_omni", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<image>Hi"
                   "<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"),
    ("qwen3_omni", "<|im_start|>user\n<image>Hi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nYo<|im_end|>\n"),
    ("minicpm_v", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<image>Hi<|im_end|>\n"
                  "<|im_start|>assistant\nYo<|im_end|>\n"),
    ("glm4v", "[gMASK]<sop><|user|>\n<image>Hi<|assistant|>\n<think>\n\n</think>\n\nYo"),
    ("llava", "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
              "detailed, and polite answers to the user's questions.USER: <image>Hi ASSISTANT:Yo</s>"),
])
def test_exact_strings(name, expected):
    assert get_template(name).render(CHAT) == expected


def test_stop_words_and_modalities():
    assert get_template("qwen2_vl").stop_words == ("<|im_end|>",) and get_template("qwen2_vl").replace_eos
    assert get_template("minicpm_v").stop_words == ("<|im_end|>",) and not get_template("minicpm_v").replace_eos
    assert get_template("glm4v").stop_words == ("<|user|>", "<|observation|>", "</answer>")
    assert get_template("qwen3_omni").modalities == ("image", "video", "audio")
    assert get_template("llava").modalities == ("image",)


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
