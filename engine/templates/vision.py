"""Chat templates of the vision-language and omni families (LLaMA-Factory 0.9.5's strings, registered by name).

Registered into :data:`engine.templates.registry.TEMPLATES` through :data:`VISION_TEMPLATES`. Patterns follow the
slot syntax of ``engine.templates.slots``; a user turn is ``user`` + ``gen_prompt`` as in the text families.
Media placeholders (``<image>``, ``<video>``, ``<audio>``) stay in the text here; :mod:`engine.multimodal.plugins`
expands them. tests/engine/test_templates_vision.py checks every template against ids produced by LLaMA-Factory
itself (tests/golden/lf_vision_templates.json.gz). Gemma 3 / 4 / 4n live in ``families_core``.
"""

from __future__ import annotations

import dataclasses

from engine.templates.base import Template
from engine.templates.families_core import _GEMMA, CHATML, CORE_TEMPLATES, IM_END, QWEN_TOOL_RESULT
from engine.templates.families_later import LATER_TEMPLATES
from engine.templates.families_more import MORE_TEMPLATES

_HELPFUL = "You are a helpful assistant."
_QWEN = {**CHATML, "observation": QWEN_TOOL_RESULT, "stop_words": IM_END, "replace_eos": True,
         "eos_text": "<|im_end|>"}
_GLM = {
    "prefix": "[gMASK]<sop>", "system": "<|system|>\n{content}", "user": "<|user|>\n{content}",
    "gen_prompt": "<|assistant|>", "assistant": "\n{content}", "function": "{content}",
    "observation": "<|observation|>\n{content}", "efficient_eos": True, "eos_text": "<|endoftext|>",
}
_VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. The assistant gives "
                  "helpful, detailed, and polite answers to the user's questions.")
_LLAVA = {"user": "USER: {content} ", "gen_prompt": "ASSISTANT:", "assistant": "{content}{eos}",
          "default_system": _VICUNA_SYSTEM, "bos_text": "<s>", "eos_text": "</s>"}
_YI_VL_SYSTEM = (
    "This is a chat between an inquisitive human and an AI assistant. Assume the role of the AI assistant. Read all "
    "the images carefully, and respond to the human's questions with informative, helpful, detailed and polite "
    "answers. 这是一个好奇的人类和一个人工智能助手之间的对话。假设你扮演这个AI助手的角色。仔细阅读所有的图像，并对人类的问题做出"
    "信息丰富、有帮助、详细的和礼貌的回答。\n\n"
)
_INTERN_VL_SYSTEM = "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的多模态大语言模型。"
_IMAGE_VIDEO = ("image", "video")
_ALL = ("image", "video", "audio")


def _qwen(name: str, description: str, *, thinking: bool, modalities: tuple[str, ...] = _IMAGE_VIDEO,
          default_system: str = "", tool_format: str = "qwen") -> Template:
    return Template(name=name, **_QWEN, default_system=default_system, tool_format=tool_format,
                    reasoning=thinking, modalities=modalities, description=description)


def like_text_template(text: str, name: str, description: str, **changes) -> Template:
    """A template whose turns are text template ``text``'s, renamed, with ``changes``."""
    base = next(t for t in (*CORE_TEMPLATES, *MORE_TEMPLATES, *LATER_TEMPLATES) if t.name == text)
    return dataclasses.replace(base, name=name, description=description, **changes)


def _text_family(text: str, name: str, description: str, **changes) -> Template:
    """An image template whose turns are a text template's (LLaVA-NeXT over Llama 3, Mistral, Qwen, Yi; Pixtral over
    Ministral 3)."""
    return like_text_template(text, name, description, modalities=("image",), **changes)


def _minicpm(name: str, default_system: str, modalities: tuple[str, ...], description: str) -> Template:
    # LLaMA-Factory gives MiniCPM-V no observation, function or tool formats: tool results are written as user
    # turns, calls in the default format; <|im_end|> is a stop word but EOS stays the tokenizer's.
    return Template(name=name, **CHATML, default_system=default_system, stop_words=IM_END, modalities=modalities,
                    description=description)


VISION_TEMPLATES: dict[str, Template] = {template.name: template for template in (
    _qwen("qwen2_vl", "Qwen2-VL / Qwen2.5-VL (image and video).", thinking=False, default_system=_HELPFUL),
    _qwen("qwen3_vl", "Qwen3-VL thinking models (image and video).", thinking=True),
    _qwen("qwen3_vl_nothink", "Qwen3-VL instruct models (image and video).", thinking=False),
    _qwen("qwen3_5", "Qwen3.5 (thinking; image and video).", thinking=True, tool_format="qwen3_5"),
    _qwen("qwen3_5_nothink", "Qwen3.5 without thinking (image and video).", thinking=False, tool_format="qwen3_5"),
    _qwen("qwen3_6", "Qwen3.6 (thinking; image and video).", thinking=True, tool_format="qwen3_5"),
    _qwen("qwen2_omni", "Qwen2.5-Omni (image, video, audio).", thinking=False, modalities=_ALL,
          default_system=_HELPFUL),
    _qwen("qwen3_omni", "Qwen3-Omni (thinking; image, video, audio).", thinking=True, modalities=_ALL),
    _qwen("qwen3_omni_nothink", "Qwen3-Omni instruct (image, video, audio).", thinking=False, modalities=_ALL),
    _minicpm("minicpm_v", _HELPFUL, _IMAGE_VIDEO, "MiniCPM-V 2.6 / 4 (ChatML; image and video)."),
    _minicpm("minicpm_v_4_6", _HELPFUL, ("image",), "MiniCPM-V 4.6 (ChatML; image: video is refused, as LLaMA-Factory "
             "0.9.5 cannot build its video rows)."),
    _minicpm("minicpm_o", "You are a helpful assistant. You can accept audio and text input and output voice and "
             "text.", _ALL, "MiniCPM-o (ChatML; image, video, audio)."),
    Template(name="glm4v", **_GLM, stop_words=("<|user|>", "<|observation|>", "</answer>"), reasoning=True,
             tool_format="glm4", modalities=_IMAGE_VIDEO,
             description="GLM-4.1V thinking models (image and video)."),
    Template(name="glm4_5v", **_GLM, stop_words=("<|user|>", "<|observation|>", "</answer>"), reasoning=True,
             tool_format="glm4_moe", modalities=_IMAGE_VIDEO,
             description="GLM-4.5V / 4.6V (thinking; XML-style tool calls; image and video)."),
    Template(name="glm_ocr", **_GLM, stop_words=("<|user|>", "<|observation|>"), tool_format="glm4",
             modalities=_IMAGE_VIDEO, description="GLM-OCR (GLM-4V format without thinking; image and video)."),
    Template(name="gemma3n", **_GEMMA, stop_words=("<end_of_turn>",), replace_eos=True, modalities=("image", "audio"),
             description="Gemma 3n (Gemma 3 format; image and audio)."),
    Template(name="llava", **_LLAVA, modalities=("image",), description="LLaVA 1.5 (USER: ... ASSISTANT:; image)."),
    Template(name="llava_next", **_LLAVA, modalities=("image",),
             description="LLaVA-NeXT with a Vicuna language model (USER: ... ASSISTANT:; image)."),
    _text_family("llama3", "llava_next_llama3", "LLaVA-NeXT with Llama 3 (image)."),
    _text_family("llama3", "mllama", "Llama 3.2 Vision (Llama 3 turns; one <|image|> per image, cross-attended; "
                 "image)."),
    _text_family("mistral", "llava_next_mistral", "LLaVA-NeXT with Mistral (image)."),
    _text_family("qwen", "llava_next_qwen", "LLaVA-NeXT with Qwen (image).", default_system=_HELPFUL),
    _text_family("yi", "llava_next_yi", "LLaVA-NeXT with Yi (image)."),
    _text_family("ministral3", "pixtral", "Pixtral 12B (Ministral 3 turns; image)."),
    Template(name="llava_next_video", **_LLAVA, modalities=_IMAGE_VIDEO,
             description="LLaVA-NeXT-Video with Vicuna (USER: ... ASSISTANT:; image and video)."),
    like_text_template("mistral", "llava_next_video_mistral", "LLaVA-NeXT-Video with Mistral (image and video).",
                       modalities=_IMAGE_VIDEO),
    like_text_template("yi", "llava_next_video_yi", "LLaVA-NeXT-Video with Yi (image and video).",
                       modalities=_IMAGE_VIDEO),
    Template(name="video_llava", **_LLAVA, modalities=_IMAGE_VIDEO,
             description="Video-LLaVA (USER: ... ASSISTANT:; image and video)."),
    Template(name="granite3_vision", system="<|system|>\n{content}\n", user="<|user|>\n{content}\n",
             gen_prompt="<|assistant|>\n", assistant="{content}{eos}", default_system=_VICUNA_SYSTEM,
             modalities=("image",), description="IBM Granite 3.x Vision (LLaVA-NeXT; image)."),
    Template(name="yi_vl", user="### Human: {content}\n", gen_prompt="### Assistant:", assistant="{content}\n",
             default_system=_YI_VL_SYSTEM, stop_words=("###",), efficient_eos=True, modalities=("image",),
             description="Yi-VL (LLaVA; image)."),
    Template(name="intern_vl", prefix="{bos}", **CHATML, default_system=_INTERN_VL_SYSTEM, stop_words=IM_END,
             bos_text="<s>", modalities=("image",), description="InternVL 2.5 / 3 / 3.5 (ChatML after BOS; image)."),
    Template(name="paligemma", prefix="{bos}", system="{content}", system_in_user=True, user="{content}\n",
             assistant="{content}{eos}", bos_text="<bos>", eos_text="<eos>", modalities=("image",),
             description="PaliGemma / PaliGemma 2 pretrained (image tokens before the text; image)."),
    Template(name="paligemma_chat", prefix="{bos}", system="{content}", system_in_user=True,
             user="<start_of_turn>user\n{content}<end_of_turn>\n", gen_prompt="<start_of_turn>model\n",
             assistant="{content}<end_of_turn>\n", observation="<start_of_turn>tool\n{content}<end_of_turn>\n",
             stop_words=("<end_of_turn>",), replace_eos=True, bos_text="<bos>", eos_text="<eos>", modalities=("image",),
             description="PaliGemma 2 mix / chat (Gemma turns; image)."),
    Template(name="qwen2_audio", **CHATML, default_system=_HELPFUL, stop_words=IM_END, replace_eos=True,
             modalities=("audio",), description="Qwen2-Audio (audio)."),
    Template(name="ernie_vl", system="{content}\n", user="User: {content}", assistant="\nAssistant: {content}"
             "<|end_of_sentence|>", stop_words=("<|end_of_sentence|>",), replace_eos=True,
             eos_text="<|end_of_sentence|>", reasoning=True, modalities=("image",),
             description="Baidu ERNIE-4.5-VL (thinking; image)."),
    Template(name="mimo_vl", **_QWEN, default_system="You are MiMo, an AI assistant developed by Xiaomi.",
             tool_format="qwen", reasoning=True, modalities=_IMAGE_VIDEO,
             description="Xiaomi MiMo-VL (Qwen2.5-VL; thinking; image and video)."),
)}
