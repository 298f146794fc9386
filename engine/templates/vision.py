"""Chat templates of the vision-language and omni families (LLaMA-Factory's strings, registered by name).

Registered into :data:`engine.templates.registry.TEMPLATES` through :data:`VISION_TEMPLATES`. Media placeholders
(``<image>``, ``<video>``, ``<audio>``) stay in the text here; :mod:`engine.multimodal.plugins` expands them.
"""

from __future__ import annotations

from engine.templates.base import Template

_SYSTEM = "<|im_start|>system\n{content}<|im_end|>\n"
_USER = "<|im_start|>user\n{content}<|im_end|>\n"
_GEN = "<|im_start|>assistant\n"
_REPLY = "{content}<|im_end|>\n"
_TOOL_RESULT = "<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n"
_CHATML = {"system": _SYSTEM, "user": _USER, "gen_prompt": _GEN, "assistant": _REPLY}
_STOP = {"stop_words": ("<|im_end|>",), "replace_eos": True}
_THINKING = {"reasoning": True, "thought_words": ("<think>\n", "\n</think>\n\n"), "empty_thought": True}
_IMAGE_VIDEO = ("image", "video")
_ALL = ("image", "video", "audio")


def _qwen(name: str, description: str, *, thinking: bool, modalities: tuple[str, ...] = _IMAGE_VIDEO,
          default_system: str = "", tool_format: str = "qwen") -> Template:
    return Template(name=name, **_CHATML, observation=_TOOL_RESULT, default_system=default_system, **_STOP,
                    tool_format=tool_format, modalities=modalities, description=description,
                    **(_THINKING if thinking else {}))


VISION_TEMPLATES: dict[str, Template] = {
    "qwen2_vl": _qwen("qwen2_vl", "Qwen2-VL / Qwen2.5-VL (image and video).", thinking=False,
                      default_system="You are a helpful assistant."),
    "qwen3_vl": _qwen("qwen3_vl", "Qwen3-VL thinking models (image and video).", thinking=True),
    "qwen3_vl_nothink": _qwen("qwen3_vl_nothink", "Qwen3-VL instruct models (image and video).", thinking=False),
    # LLaMA-Factory writes Qwen3.5's tool calls in its own qwen3_5 format; the qwen format stands in until it exists.
    "qwen3_5": _qwen("qwen3_5", "Qwen3.5 (thinking; image and video).", thinking=True),
    "qwen2_omni": _qwen("qwen2_omni", "Qwen2.5-Omni (image, video, audio).", thinking=False, modalities=_ALL,
                        default_system="You are a helpful assistant."),
    "qwen3_omni": _qwen("qwen3_omni", "Qwen3-Omni (thinking; image, video, audio).", thinking=True,
                        modalities=_ALL),
    "minicpm_v": Template(name="minicpm_v", **_CHATML, default_system="You are a helpful assistant.",
                          stop_words=("<|im_end|>",), modalities=_IMAGE_VIDEO,
                          description="MiniCPM-V / MiniCPM-o (ChatML; image and video)."),
    "glm4v": Template(
        name="glm4v",
        prefix="[gMASK]<sop>",
        system="<|system|>\n{content}",
        user="<|user|>\n{content}",
        gen_prompt="<|assistant|>",
        assistant="\n{content}",
        function="{content}",
        observation="<|observation|>\n{content}",
        stop_words=("<|user|>", "<|observation|>", "</answer>"),
        append_eos=True,
        tool_format="glm4",
        modalities=_IMAGE_VIDEO,
        **_THINKING,
        description="GLM-4.1V / GLM-4.5V thinking models (image and video).",
    ),
    "llava": Template(
        name="llava",
        system="{content}",
        user="USER: {content} ",
        gen_prompt="ASSISTANT:",
        assistant="{content}{eos}",
        default_system=("A chat between a curious user and an artificial intelligence assistant. The assistant gives "
                        "helpful, detailed, and polite answers to the user's questions."),
        eos_text="</s>",
        modalities=("image",),
        description="LLaVA 1.5 (USER: ... ASSISTANT:; image).",
    ),
}
