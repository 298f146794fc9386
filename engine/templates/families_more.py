"""More LLaMA-Factory 0.9.5 text templates: families still fine-tuned today (Yi, SmolLM, InternLM, Granite,
Falcon, OLMo, Cohere, EXAONE, MiMo, gpt-oss, ...). Same slot syntax as ``families_core``."""

from __future__ import annotations

from engine.templates.base import Template
from engine.templates.families_core import CHATML, CHATML_TOOL_RESULT, IM_END, QWEN_TOOL_RESULT

_GRANITE = {
    "user": "<|start_of_role|>user<|end_of_role|>{content}<|end_of_text|>\n",
    "gen_prompt": "<|start_of_role|>assistant<|end_of_role|>", "assistant": "{content}<|end_of_text|>\n",
    "system": "<|start_of_role|>system<|end_of_role|>{content}<|end_of_text|>\n", "eos_text": "<|end_of_text|>",
}
_INTERN2_SYSTEM = (
    "You are an AI assistant whose name is InternLM (书生·浦语).\n"
    "- InternLM (书生·浦语) is a conversational language model that is developed by Shanghai AI Laboratory "
    "(上海人工智能实验室). It is designed to be helpful, honest, and harmless.\n"
    "- InternLM (书生·浦语) can understand and communicate fluently in the language "
    "chosen by the user such as English and 中文."
)

MORE_TEMPLATES: tuple[Template, ...] = (
    Template(name="yi", **CHATML, stop_words=IM_END, description="Yi / Yi-1.5 chat (ChatML)."),
    Template(name="smollm", **CHATML, stop_words=IM_END, description="SmolLM instruct (ChatML)."),
    Template(name="smollm2", **CHATML, stop_words=IM_END,
             default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face.",
             description="SmolLM2 instruct (ChatML with SmolLM's system prompt)."),
    Template(name="intern2", prefix="{bos}", **CHATML, stop_words=IM_END, default_system=_INTERN2_SYSTEM,
             bos_text="<s>", description="InternLM 2 / 2.5 chat (ChatML after BOS)."),
    Template(name="opencoder", **CHATML, observation=CHATML_TOOL_RESULT, stop_words=IM_END,
             default_system="You are OpenCoder, created by OpenCoder Team.", description="OpenCoder instruct."),
    Template(name="cpm4", prefix="{bos}", **CHATML, observation=CHATML_TOOL_RESULT, stop_words=IM_END,
             bos_text="<s>", description="MiniCPM 4 (ChatML after BOS)."),
    Template(name="falcon_h1", prefix="{bos}", **CHATML, observation=CHATML_TOOL_RESULT,
             stop_words=("<|im_end|>", "<|end_of_text|>"), description="Falcon-H1 instruct (ChatML after BOS)."),
    Template(name="mimo", **CHATML, observation=QWEN_TOOL_RESULT, default_system="You are a helpful assistant.",
             stop_words=IM_END, replace_eos=True, reasoning=True, tool_format="qwen",
             description="Xiaomi MiMo (Qwen-style ChatML with <think> blocks)."),
    Template(name="sailor", system=CHATML["system"], user="<|im_start|>question\n{content}<|im_end|>\n",
             gen_prompt="<|im_start|>answer\n", assistant="{content}<|im_end|>\n", stop_words=IM_END,
             default_system="You are an AI assistant named Sailor created by Sea AI Lab. Your answer should be "
                            "friendly, unbiased, faithful, informative and detailed.",
             description="Sailor / Sailor2 (question/answer roles)."),
    Template(name="moonlight", system="<|im_system|>system<|im_middle|>{content}<|im_end|>",
             user="<|im_user|>user<|im_middle|>{content}<|im_end|>",
             gen_prompt="<|im_assistant|>assistant<|im_middle|>", assistant="{content}<|im_end|>",
             default_system="You are a helpful assistant provided by Moonshot-AI.", stop_words=IM_END,
             replace_eos=True, description="Moonshot Moonlight instruct."),
    Template(name="granite3", **_GRANITE, description="IBM Granite 3.x instruct."),
    Template(name="granite4", **_GRANITE, function="{content}<|end_of_text|>\n",
             observation="<|start_of_role|>tool<|end_of_role|>{content}<|end_of_text|>\n",
             observation_gen="<|start_of_role|>assistant\n", stop_words=("<|end_of_text|>",),
             default_system="You are Granite, developed by IBM. You are a helpful AI assistant.",
             description="IBM Granite 4 instruct (tool role)."),
    Template(name="cohere", prefix="{bos}",
             system="<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{content}<|END_OF_TURN_TOKEN|>",
             user="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{content}<|END_OF_TURN_TOKEN|>",
             gen_prompt="<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", assistant="{content}{eos}",
             bos_text="<BOS_TOKEN>", eos_text="<|END_OF_TURN_TOKEN|>", description="Cohere Command R / R+ / Aya."),
    Template(name="exaone", system="[|system|]{content}[|endofturn|]\n", user="[|user|]{content}\n",
             gen_prompt="[|assistant|]", assistant="{content}{eos}\n", eos_text="[|endofturn|]",
             description="LG EXAONE 3.x instruct."),
    Template(name="falcon", user="User: {content}\n", gen_prompt="Falcon:", assistant="{content}\n",
             efficient_eos=True, eos_text="<|endoftext|>", description="Falcon instruct ('User: ... Falcon:')."),
    Template(name="olmo", prefix="{eos}", user="<|user|>\n{content}", gen_prompt="<|assistant|>\n",
             assistant="{content}{eos}", eos_text="<|endoftext|>", description="AI2 OLMo instruct."),
    Template(name="openchat", prefix="{bos}", user="GPT4 Correct User: {content}{eos}",
             gen_prompt="GPT4 Correct Assistant:", assistant="{content}{eos}", bos_text="<s>",
             eos_text="<|end_of_turn|>", description="OpenChat 3.5 ('GPT4 Correct User:')."),
    Template(name="solar", system="### System:\n{content}\n\n", user="### User:\n{content}\n\n",
             gen_prompt="### Assistant:\n", assistant="{content}", efficient_eos=True, eos_text="</s>",
             description="Upstage SOLAR instruct."),
    Template(name="starchat", system="<|system|>\n{content}<|end|>\n", user="<|user|>\n{content}<|end|>\n",
             gen_prompt="<|assistant|>", assistant="{content}<|end|>\n", stop_words=("<|end|>",),
             description="StarChat / StarCoder2 chat."),
    Template(name="deepseekcoder", prefix="{bos}", user="### Instruction:\n{content}\n", gen_prompt="### Response:",
             assistant="\n{content}\n<|EOT|>\n", bos_text="<｜begin▁of▁sentence｜>",
             default_system="You are an AI programming assistant, utilizing the DeepSeek Coder model, developed by "
                            "DeepSeek Company, and you only answer questions related to computer science. For "
                            "politically sensitive questions, security and privacy issues, and other non-computer "
                            "science questions, you will refuse to answer.\n",
             description="DeepSeek Coder instruct."),
    Template(name="gpt_oss", system="<|start|>system<|message|>{content}<|end|>",
             user="<|start|>user<|message|>{content}<|end|>", gen_prompt="<|start|>assistant",
             assistant="{content}", default_system="You are ChatGPT, a large language model trained by OpenAI.",
             thought_words=("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>"),
             efficient_eos=True, reasoning=True, eos_text="<|return|>", description="OpenAI gpt-oss (harmony channels)."),
    Template(name="breeze", prefix="{bos}", user="[INST] {content} [/INST] ", assistant="{content}",
             efficient_eos=True, bos_text="<s>", eos_text="</s>", description="MediaTek Breeze instruct."),
    Template(name="seed_coder", system="{bos}system\n{content}{eos}", user="{bos}user\n{content}{eos}",
             gen_prompt="{bos}assistant\n", assistant="{content}{eos}", bos_text="<[begin▁of▁sentence]>",
             eos_text="<[end▁of▁sentence]>",
             default_system="You are an AI programming assistant, utilizing the Seed-Coder model, developed by "
                            "ByteDance Seed, and you only answer questions related to computer science. For "
                            "politically sensitive questions, security and privacy issues, and other non-computer "
                            "science questions, you will refuse to answer.\n\n",
             description="ByteDance Seed-Coder instruct."),
    Template(name="hunyuan", prefix="<|startoftext|>", system="{content}<|extra_4|>", user="{content}",
             gen_prompt="<|extra_0|>", assistant="{content}<|eos|>", stop_words=("<|eos|>",),
             description="Tencent Hunyuan instruct."),
    Template(name="ernie_nothink", prefix="<|begin_of_sentence|>", system="{content}\n", user="User: {content}\n",
             gen_prompt="Assistant: ", assistant="{content}<|end_of_sentence|>", stop_words=("<|end_of_sentence|>",),
             description="Baidu ERNIE 4.5 (non-thinking)."),
    Template(name="telechat2", system="<_system>{content}", user="<_user>{content}", gen_prompt="<_bot>",
             assistant="{content}{eos}", eos_text="<_end>",
             default_system="你是中国电信星辰语义大模型，英文名是TeleChat，你是由中电信人工智能科技有限公司和中国电信人工智能研究院"
                            "（TeleAI）研发的人工智能助手。",
             description="China Telecom TeleChat 2."),
    Template(name="xuanyuan", user="Human: {content} ", gen_prompt="Assistant:", assistant="{content}{eos}",
             eos_text="</s>",
             default_system="以下是用户和人工智能助手之间的对话。用户以Human开头，人工智能助手以Assistant开头，"
                            "会对人类提出的问题给出有帮助、高质量、详细和礼貌的回答，并且总是拒绝参与与不道德、"
                            "不安全、有争议、政治敏感等相关的话题、问题和指示。\n",
             description="Du Xiaoman XuanYuan."),
)
