"""Every built-in chat template, in one explicit dict (name -> Template).

The strings follow each family's official chat template (as its tokenizer_config.json writes it), so that a model
fine-tuned here sees at inference exactly the format it was trained on.
"""

from __future__ import annotations

from engine.templates.base import Template

_CHATML_SYSTEM = "<|im_start|>system\n{content}<|im_end|>\n"
_CHATML_USER = "<|im_start|>user\n{content}<|im_end|>\n"
_CHATML_GEN = "<|im_start|>assistant\n"
_CHATML_REPLY = "{content}<|im_end|>\n"
_CHATML_TURNS = {"system": _CHATML_SYSTEM, "user": _CHATML_USER, "gen_prompt": _CHATML_GEN, "assistant": _CHATML_REPLY}
_CHATML_STOP = {"stop_words": ("<|im_end|>",), "replace_eos": True}
_QWEN_TOOL_RESULT = "<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n"
_QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def _gemma4(name: str, modalities: tuple[str, ...], description: str) -> Template:
    return Template(
        name=name,
        prefix="{bos}",
        system="<|turn>system\n{content}<turn|>\n",
        think_signal="<|think|>",
        user="<|turn>user\n{content}<turn|>\n",
        gen_prompt="<|turn>model\n",
        assistant="{content}<turn|>\n",
        observation="<|turn>tool\n{content}<turn|>\n",
        default_system="You are a helpful assistant.",
        stop_words=("<turn|>",),
        replace_eos=True,
        reasoning=True,
        thought_words=("<|channel>thought\n", "<channel|>"),
        tool_format="gemma4",
        bos_text="<bos>",
        eos_text="<eos>",
        modalities=modalities,
        description=description,
    )


TEMPLATES: dict[str, Template] = {
    "default": Template(
        name="default",
        prefix="{bos}",
        system="System: {content}\n",
        user="Human: {content}\n",
        gen_prompt="Assistant:",
        assistant=" {content}{eos}\n",
        observation="Observation: {content}\n",
        eos_text="</s>",
        description="Plain 'Human:/Assistant:' turns for base models without a chat format.",
    ),
    "empty": Template(
        name="empty",
        user="{content}",
        assistant="{content}",
        append_eos=True,
        description="Turns concatenated without any markup (EOS after each reply).",
    ),
    "chatml": Template(
        name="chatml",
        **_CHATML_TURNS,
        observation="<|im_start|>tool\n{content}<|im_end|>\n",
        **_CHATML_STOP,
        description="Generic ChatML (<|im_start|>role ... <|im_end|>).",
    ),
    "qwen": Template(
        name="qwen",
        **_CHATML_TURNS,
        observation=_QWEN_TOOL_RESULT,
        default_system=_QWEN_SYSTEM,
        **_CHATML_STOP,
        tool_format="qwen",
        description="Qwen 2 / 2.5 instruct models.",
    ),
    "qwen3": Template(
        name="qwen3",
        **_CHATML_TURNS,
        observation=_QWEN_TOOL_RESULT,
        **_CHATML_STOP,
        reasoning=True,
        thought_words=("<think>\n", "\n</think>\n\n"),
        empty_thought=True,
        tool_format="qwen",
        description="Qwen3 hybrid thinking models (<think> blocks; enable_thinking switches them).",
    ),
    "qwen3_nothink": Template(
        name="qwen3_nothink",
        **_CHATML_TURNS,
        observation=_QWEN_TOOL_RESULT,
        **_CHATML_STOP,
        tool_format="qwen",
        description="Qwen3 instruct models that never think (e.g. Qwen3-2507-Instruct).",
    ),
    "llama3": Template(
        name="llama3",
        prefix="<|begin_of_text|>",
        system="<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
        user="<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>",
        gen_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
        assistant="{content}<|eot_id|>",
        observation="<|start_header_id|>ipython<|end_header_id|>\n\n{content}<|eot_id|>",
        stop_words=("<|eot_id|>", "<|eom_id|>"),
        replace_eos=True,
        tool_format="llama3",
        description="Llama 3 / 3.1 / 3.2 / 3.3 instruct models.",
    ),
    "mistral": Template(
        name="mistral",
        prefix="{bos}",
        system="{content}\n\n",
        system_in_user=True,
        user="[INST] {content}[/INST]",
        assistant=" {content}{eos}",
        observation="[TOOL_RESULTS] {content}[/TOOL_RESULTS]",
        bos_text="<s>",
        eos_text="</s>",
        description="Mistral / Mixtral instruct ([INST] ... [/INST]); the system text opens the first turn.",
    ),
    "gemma3": Template(
        name="gemma3",
        prefix="{bos}",
        system="{content}\n\n",
        system_in_user=True,
        user="<start_of_turn>user\n{content}<end_of_turn>\n",
        gen_prompt="<start_of_turn>model\n",
        assistant="{content}<end_of_turn>\n",
        observation="<start_of_turn>tool\n{content}<end_of_turn>\n",
        stop_words=("<end_of_turn>",),
        replace_eos=True,
        bos_text="<bos>",
        eos_text="<eos>",
        modalities=("image",),
        description="Gemma 2 / 3 (model role; the system text is merged into the first user turn).",
    ),
    "gemma4": _gemma4("gemma4", ("image", "video"), "Gemma 4 26B-A4B and 31B (thinking; image and video)."),
    "gemma4n": _gemma4("gemma4n", ("image", "video", "audio"), "Gemma 4 E2B and E4B (thinking; image, video, audio)."),
    "glm4": Template(
        name="glm4",
        prefix="[gMASK]<sop>",
        system="<|system|>\n{content}",
        user="<|user|>\n{content}",
        gen_prompt="<|assistant|>",
        assistant="\n{content}",
        function="{content}",
        observation="<|observation|>\n{content}",
        stop_words=("<|user|>", "<|observation|>"),
        append_eos=True,
        tool_format="glm4",
        description="GLM-4 chat models ([gMASK]<sop>, <|user|>, <|assistant|>, <|observation|>).",
    ),
    "phi4": Template(
        name="phi4",
        system="<|im_start|>system<|im_sep|>{content}<|im_end|>",
        user="<|im_start|>user<|im_sep|>{content}<|im_end|>",
        gen_prompt="<|im_start|>assistant<|im_sep|>",
        assistant="{content}<|im_end|>",
        observation="<|im_start|>tool<|im_sep|>{content}<|im_end|>",
        **_CHATML_STOP,
        description="Microsoft Phi-4 (<|im_start|>role<|im_sep|> ... <|im_end|>).",
    ),
    "deepseek3": Template(
        name="deepseek3",
        prefix="<｜begin▁of▁sentence｜>",
        system="{content}",
        user="<｜User｜>{content}",
        gen_prompt="<｜Assistant｜>",
        assistant="{content}<｜end▁of▁sentence｜>",
        observation="<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
        stop_words=("<｜end▁of▁sentence｜>",),
        replace_eos=True,
        description="DeepSeek V3 / V3.1 chat models.",
    ),
}


def _register_vision() -> None:
    from engine.templates.vision import VISION_TEMPLATES

    for name, template in VISION_TEMPLATES.items():
        TEMPLATES.setdefault(name, template)


_register_vision()


def list_templates() -> list[str]:
    """Names of the built-in templates, in registry order."""
    return list(TEMPLATES)
