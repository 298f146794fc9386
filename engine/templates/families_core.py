"""The core text templates: generic formats and the families most fine-tuned today (LLaMA-Factory 0.9.5 strings).

Patterns use the slot syntax of ``engine.templates.slots``. A user turn is written as ``user`` + ``gen_prompt``;
splitting LLaMA-Factory's user slot there keeps the element boundaries (and so the token ids) identical.
"""

from __future__ import annotations

from engine.templates.base import Template

CHATML_SYSTEM = "<|im_start|>system\n{content}<|im_end|>\n"
CHATML_USER = "<|im_start|>user\n{content}<|im_end|>\n"
CHATML_GEN = "<|im_start|>assistant\n"
CHATML_REPLY = "{content}<|im_end|>\n"
CHATML_TOOL_RESULT = "<|im_start|>tool\n{content}<|im_end|>\n"
QWEN_TOOL_RESULT = "<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
CHATML = {"system": CHATML_SYSTEM, "user": CHATML_USER, "gen_prompt": CHATML_GEN, "assistant": CHATML_REPLY}
IM_END = ("<|im_end|>",)

_GEMMA = {
    "prefix": "{bos}", "user": "<start_of_turn>user\n{content}<end_of_turn>\n", "gen_prompt": "<start_of_turn>model\n",
    "assistant": "{content}<end_of_turn>\n", "system": "{content}\n\n", "system_in_user": True,
    "observation": "<start_of_turn>tool\n{content}<end_of_turn>\n", "bos_text": "<bos>", "eos_text": "<eos>",
}
_GLM4 = {
    "prefix": "[gMASK]<sop>", "system": "<|system|>\n{content}", "user": "<|user|>\n{content}",
    "gen_prompt": "<|assistant|>", "assistant": "\n{content}", "function": "{content}",
    "observation": "<|observation|>\n{content}", "stop_words": ("<|user|>", "<|observation|>"), "efficient_eos": True,
    "eos_text": "<|endoftext|>",
}
_DEEPSEEK3 = {
    "prefix": "{bos}", "user": "<｜User｜>{content}", "gen_prompt": "<｜Assistant｜>", "assistant": "{content}{eos}",
    "bos_text": "<｜begin▁of▁sentence｜>", "eos_text": "<｜end▁of▁sentence｜>",
}
_LLAMA3 = {
    "prefix": "{bos}", "system": "<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
    "user": "<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>",
    "gen_prompt": "<|start_header_id|>assistant<|end_header_id|>\n\n", "assistant": "{content}<|eot_id|>",
    "observation": "<|start_header_id|>ipython<|end_header_id|>\n\n{content}<|eot_id|>",
    "stop_words": ("<|eot_id|>", "<|eom_id|>"), "replace_eos": True, "tool_format": "llama3",
    "bos_text": "<|begin_of_text|>", "eos_text": "<|end_of_text|>",
}
_MISTRAL = {"prefix": "{bos}", "system": "{content}\n\n", "system_in_user": True, "tool_format": "mistral",
            "bos_text": "<s>", "eos_text": "</s>"}


def _gemma4(name: str, modalities: tuple[str, ...], description: str) -> Template:
    return Template(
        name=name,
        prefix="{bos}",
        system="<|turn>system\n<|think|>{content}<turn|>\n",
        user="<|turn>user\n{content}<turn|>\n",
        gen_prompt="<|turn>model\n",
        assistant="{content}<turn|>\n",
        observation="<|turn>tool\n{content}<turn|>\n",
        function="<|tool>{content}<tool|>",
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


CORE_TEMPLATES: tuple[Template, ...] = (
    Template(name="default", system="System: {content}{eos}\n", user="Human: {content}{eos}",
             gen_prompt="\nAssistant:", assistant="{content}{eos}\n", eos_text="</s>",
             description="Plain 'Human:/Assistant:' turns for base models without a chat format."),
    Template(name="empty", user="{content}", assistant="{content}",
             description="Turns concatenated without any markup (no EOS)."),
    Template(name="alpaca", user="### Instruction:\n{content}\n\n", gen_prompt="### Response:\n",
             assistant="{content}{eos}\n\n", eos_text="</s>",
             default_system="Below is an instruction that describes a task. Write a response that appropriately "
                            "completes the request.\n\n",
             description="Stanford Alpaca's '### Instruction: / ### Response:' format."),
    Template(name="vicuna", user="USER: {content} ", gen_prompt="ASSISTANT:", assistant="{content}{eos}",
             eos_text="</s>",
             default_system="A chat between a curious user and an artificial intelligence assistant. The assistant "
                            "gives helpful, detailed, and polite answers to the user's questions.",
             description="Vicuna v1.1 ('USER: ... ASSISTANT:')."),
    Template(name="zephyr", user="<|user|>\n{content}{eos}", gen_prompt="<|assistant|>\n",
             system="<|system|>\n{content}{eos}", assistant="{content}{eos}", eos_text="</s>",
             default_system="You are Zephyr, a helpful assistant.",
             description="Zephyr (<|system|>, <|user|>, <|assistant|> closed by EOS)."),
    Template(name="chatml", **CHATML, observation=CHATML_TOOL_RESULT, stop_words=("<|im_end|>", "<|im_start|>"),
             replace_eos=True, description="Generic ChatML (<|im_start|>role ... <|im_end|>)."),
    Template(name="qwen", **CHATML, observation=QWEN_TOOL_RESULT, default_system=QWEN_SYSTEM, stop_words=IM_END,
             replace_eos=True, tool_format="qwen", eos_text="<|im_end|>",
             description="Qwen 2 / 2.5 instruct models."),
    Template(name="qwen3", **CHATML, observation=QWEN_TOOL_RESULT, stop_words=IM_END, replace_eos=True,
             reasoning=True, tool_format="qwen", eos_text="<|im_end|>",
             description="Qwen3 hybrid thinking models (<think> blocks; enable_thinking switches them)."),
    Template(name="qwen3_nothink", **CHATML, observation=QWEN_TOOL_RESULT, stop_words=IM_END, replace_eos=True,
             tool_format="qwen", eos_text="<|im_end|>",
             description="Qwen3 instruct models that never think (e.g. Qwen3-2507-Instruct)."),
    Template(name="llama3", **_LLAMA3, description="Llama 3 / 3.1 / 3.2 / 3.3 instruct models."),
    Template(name="llama2", user="{bos}[INST] {content} [/INST]", system="<<SYS>>\n{content}\n<</SYS>>\n\n",
             system_in_user=True, assistant="{content}{eos}", bos_text="<s>", eos_text="</s>",
             description="Llama 2 chat ([INST] with a <<SYS>> block in the first turn)."),
    Template(name="mistral", **_MISTRAL, user="[INST] {content}[/INST]", assistant=" {content}{eos}",
             function="[TOOL_CALLS] {content}{eos}", observation='[TOOL_RESULTS] {"content": {content}}[/TOOL_RESULTS]',
             description="Mistral / Mixtral instruct v0.3 ([INST] ... [/INST]); the system text opens the first turn."),
    Template(name="ministral", **_MISTRAL, user="[INST]{content}[/INST]", assistant="{content}{eos}",
             function="[TOOL_CALLS]{content}{eos}", observation='[TOOL_RESULTS]{"content": {content}}[/TOOL_RESULTS]',
             description="Ministral / Mistral-Nemo (Tekken tokenizer: [INST] without spaces)."),
    Template(name="gemma", **_GEMMA, stop_words=("<end_of_turn>",), replace_eos=True,
             description="Gemma 1 (model role; the system text is merged into the first user turn)."),
    Template(name="gemma2", **_GEMMA, stop_words=("<eos>", "<end_of_turn>"), efficient_eos=True,
             description="Gemma 2 (like Gemma, one EOS at the end of the sequence)."),
    Template(name="gemma3", **_GEMMA, stop_words=("<end_of_turn>",), replace_eos=True, modalities=("image",),
             description="Gemma 3 (model role; the system text is merged into the first user turn)."),
    _gemma4("gemma4", ("image", "video"), "Gemma 4 26B-A4B and 31B (thinking; image and video)."),
    _gemma4("gemma4n", ("image", "video", "audio"), "Gemma 4 E2B and E4B (thinking; image, video, audio)."),
    Template(name="glm4", **_GLM4, tool_format="glm4",
             description="GLM-4 chat models ([gMASK]<sop>, <|user|>, <|assistant|>, <|observation|>)."),
    Template(name="glm4_moe", **_GLM4, tool_format="glm4_moe", reasoning=True,
             description="GLM-4.5 / 4.6 (thinking; XML-style tool calls)."),
    Template(name="glmz1", **_GLM4, tool_format="glm4", reasoning=True,
             description="GLM-Z1 reasoning models (GLM-4 format with <think> blocks)."),
    Template(name="phi", system="<|system|>\n{content}<|end|>\n", user="<|user|>\n{content}<|end|>\n",
             gen_prompt="<|assistant|>\n", assistant="{content}<|end|>\n", stop_words=("<|end|>",),
             replace_eos=True, description="Phi-3 / Phi-3.5 (<|user|> ... <|end|>)."),
    Template(name="phi4", system="<|im_start|>system<|im_sep|>{content}<|im_end|>",
             user="<|im_start|>user<|im_sep|>{content}<|im_end|>", gen_prompt="<|im_start|>assistant<|im_sep|>",
             assistant="{content}<|im_end|>", stop_words=IM_END, replace_eos=True,
             description="Microsoft Phi-4 (<|im_start|>role<|im_sep|> ... <|im_end|>)."),
    Template(name="deepseek3", **_DEEPSEEK3, description="DeepSeek V3 / V3.1 chat models."),
    Template(name="deepseekr1", **_DEEPSEEK3, reasoning=True,
             description="DeepSeek R1 and its distilled models (<think> blocks)."),
    Template(name="deepseek", prefix="{bos}", user="User: {content}\n\n", gen_prompt="Assistant:",
             system="{content}\n\n", assistant="{content}{eos}", bos_text="<｜begin▁of▁sentence｜>",
             eos_text="<｜end▁of▁sentence｜>", description="DeepSeek LLM / V2 chat ('User: ... Assistant:')."),
)
