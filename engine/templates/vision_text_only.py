"""LLaMA-Factory 0.9.5's vision templates whose media no plugin serves here yet, registered for their text turns.

A config naming one of these (Kimi-VL, Keye-VL, dots.ocr, Intern-S1, LFM2-VL,
Youtu-VL) trains and chats on text rows with LLaMA-Factory's exact strings. On such a
vision-language model a row with images, videos or audio is refused (the pre-flight check, then the data layer:
``engine.multimodal.UnservedMedia``), so no media is dropped silently; with a text-only model the rows train on their
text with the warning every text model gives. Their ``modalities`` stay empty for that reason.
tests/engine/test_templates_vision.py checks each against ids produced by LLaMA-Factory itself.
"""

from __future__ import annotations

from engine.templates.base import Template
from engine.templates.families_core import CHATML, IM_END, QWEN_TOOL_RESULT
from engine.templates.vision import _HELPFUL, like_text_template

_YOUTU = "<|begin_of_text|>{role}\n{{content}}<|end_of_text|>\n"



TEXT_ONLY_VISION_TEMPLATES: tuple[Template, ...] = (
    Template(name="kimi_vl", system="<|im_system|>system<|im_middle|>{content}<|im_end|>",
             user="<|im_user|>user<|im_middle|>{content}<|im_end|>", gen_prompt="<|im_assistant|>assistant<|im_middle|>",
             assistant="{content}<|im_end|>", default_system="You are a helpful assistant", stop_words=IM_END,
             reasoning=True, thought_words=("◁think▷", "◁/think▷"),
             description="Moonshot Kimi-VL (thinking; text turns: its media are not processed here yet)."),
    Template(name="keye_vl", **CHATML, observation=QWEN_TOOL_RESULT, stop_words=IM_END, replace_eos=True,
             eos_text="<|im_end|>", reasoning=True, tool_format="qwen",
             description="Kwai Keye-VL (ChatML, thinking; text turns: its media are not processed here yet)."),
    Template(name="dots_ocr", system="<|system|>{content}<|endofsystem|>\n", user="<|user|>{content}<|endofuser|>",
             gen_prompt="<|assistant|>", assistant="{content}<|endofassistant|>", stop_words=("<|endofassistant|>",),
             efficient_eos=True, description="rednote dots.ocr (text turns: its images are not processed here yet)."),
    Template(name="intern_s1", prefix="{bos}", **CHATML, stop_words=IM_END, bos_text="<s>",
             description="Intern-S1 (ChatML after BOS; text turns: its media are not processed here yet)."),
    like_text_template("lfm2", "lfm2_vl", "Liquid LFM2-VL / LFM2.5-VL (text turns: its images are not processed here yet).",
          default_system="You are a helpful multimodal assistant by Liquid AI."),
    Template(name="youtu_vl", system=_YOUTU.format(role="system"), user=_YOUTU.format(role="user"),
             gen_prompt="<|begin_of_text|>assistant\n", assistant="{content}<|end_of_text|>\n",
             default_system=_HELPFUL, stop_words=("<|end_of_text|>",),
             description="Tencent Youtu-VL (text turns: its media are not processed here yet)."),
)
