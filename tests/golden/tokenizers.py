"""The three tokenizer setups of the LLaMA-Factory parity tests, rebuilt from committed tokenizer files.

- ``plain``: a byte-level BPE tokenizer (BOS ``<s>``, EOS ``</s>``, PAD ``<pad>``) where template markers are plain
  text;
- ``special``: the same vocabulary plus every template marker (``MARKERS``) as a special token;
- ``family``: ``special`` with the family's own BOS/EOS (``FAMILY_SPECIALS``; no BOS where the family has none).

The files were trained once by ``build()`` and are committed, so the ids never depend on the installed
``tokenizers`` version's training behaviour.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUPS = ("plain", "special", "family")

MARKERS = [
    "<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "<start_of_turn>", "<end_of_turn>", "<|turn>",
    "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool>", "<tool|>", '<|"|>',
    "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<|end|>",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<|EOT|>", "<|start_of_role|>",
    "<|end_of_role|>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>",
    "<|END_OF_TURN_TOKEN|>", "<BOS_TOKEN>", "[|user|]", "[|assistant|]", "[|system|]", "[|endofturn|]", "<|start|>",
    "<|message|>", "<|channel|>", "<|return|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
    "<_user>", "<_bot>", "<_system>", "<_end>", "<|startoftext|>", "<|extra_0|>", "<|extra_4|>", "<|eos|>",
    "<|begin_of_sentence|>", "<|end_of_sentence|>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "<|endoftext|>", "<bos>", "<eos>", "<|end_of_turn|>", "<[begin▁of▁sentence]>", "<[end▁of▁sentence]>",
    # later families (Llama 4, MiniMax, Seed-OSS, LFM2, Hunyuan, ChatGLM3, ...)
    "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>", "sop", "<role>", "</role>", "<|role_end|>",
    "<beginning_of_sentence>", "<end_of_sentence>", "]~b]", "]~!b[", "[e~[", "<｜hy_User｜>", "<｜hy_Assistant｜>",
    "<｜hy_eos｜>", "<｜hy_begin▁of▁sentence｜>", "<｜hy_place▁holder▁no▁2｜>", "<｜hy_place▁holder▁no▁3｜>",
    "<｜hy_place▁holder▁no▁8｜>", "<|tool_response_start|>", "<|tool_response_end|>", "<|tool_call_start|>",
    "<|tool_call_end|>", "<|tool_list_start|>", "<|tool_list_end|>", "<seed:bos>", "<seed:eos>", "<seed:think>",
    "</seed:think>", "<seed:tool_call>", "</seed:tool_call>", "<sep>", "<eod>", "<|User|>", "<|Assistant|>",
    "<|tool|>", "<|/tool|>", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "<tool_calls>", "</tool_calls>",
    "<minimax:tool_call>", "</minimax:tool_call>",
]

# template -> (BOS, EOS) of the family's real tokenizer (None: the family has no BOS token)
FAMILY_SPECIALS = {
    "default": ("<s>", "</s>"), "empty": ("<s>", "</s>"), "alpaca": ("<s>", "</s>"), "vicuna": ("<s>", "</s>"),
    "zephyr": ("<s>", "</s>"), "chatml": (None, "<|endoftext|>"), "qwen": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"), "qwen3_nothink": (None, "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"), "llama2": ("<s>", "</s>"), "mistral": ("<s>", "</s>"),
    "ministral": ("<s>", "</s>"), "gemma": ("<bos>", "<eos>"), "gemma2": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"), "gemma4": ("<bos>", "<eos>"), "gemma4n": ("<bos>", "<eos>"),
    "glm4": (None, "<|endoftext|>"), "glm4_moe": (None, "<|endoftext|>"), "glmz1": (None, "<|endoftext|>"),
    "phi": ("<s>", "<|endoftext|>"), "phi4": (None, "<|im_end|>"),
    "deepseek3": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseekr1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"), "yi": ("<|startoftext|>", "<|im_end|>"),
    "smollm": ("<|im_start|>", "<|im_end|>"), "smollm2": ("<|im_start|>", "<|im_end|>"),
    "intern2": ("<s>", "</s>"), "opencoder": ("<|im_start|>", "<|im_end|>"), "cpm4": ("<s>", "<|im_end|>"),
    "falcon_h1": ("<|begin_of_text|>", "<|end_of_text|>"), "mimo": (None, "<|im_end|>"),
    "sailor": (None, "<|endoftext|>"), "moonlight": (None, "<|im_end|>"),
    "granite3": (None, "<|end_of_text|>"), "granite4": (None, "<|end_of_text|>"),
    "cohere": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"), "exaone": (None, "[|endofturn|]"),
    "falcon": (None, "<|endoftext|>"), "olmo": (None, "<|endoftext|>"), "openchat": ("<s>", "<|end_of_turn|>"),
    "solar": ("<s>", "</s>"), "starchat": (None, "<|endoftext|>"),
    "deepseekcoder": ("<｜begin▁of▁sentence｜>", "<|EOT|>"), "gpt_oss": ("<|startoftext|>", "<|return|>"),
    "breeze": ("<s>", "</s>"), "seed_coder": ("<[begin▁of▁sentence]>", "<[end▁of▁sentence]>"),
    "hunyuan": ("<|startoftext|>", "<|eos|>"), "ernie_nothink": ("<s>", "</s>"), "telechat2": ("<_start>", "<_end>"),
    "xuanyuan": ("<s>", "</s>"),
    "llama4": ("<|begin_of_text|>", "<|eot|>"), "glm4_7": (None, "<|endoftext|>"), "aeva": (None, "<|endoftext|>"),
    "chatglm3": (None, "</s>"), "mistral_small": ("<s>", "</s>"), "ministral3": ("<s>", "</s>"),
    "phi4_mini": (None, "<|endoftext|>"), "phi_small": ("<|endoftext|>", "<|endoftext|>"),
    "lfm2": ("<|startoftext|>", "<|im_end|>"), "mimo_v2": (None, "<|im_end|>"),
    "minimax1": (None, "<end_of_sentence>"), "minimax2": (None, "[e~["), "seed_oss": ("<seed:bos>", "<seed:eos>"),
    "hy3": ("<｜hy_begin▁of▁sentence｜>", "<｜hy_eos｜>"), "hunyuan_small": (None, "<｜hy_place▁holder▁no▁2｜>"),
    "youtu": ("<|begin_of_text|>", "<|end_of_text|>"), "openchat-3.6": ("<|begin_of_text|>", "<|eot_id|>"),
    "bailing": (None, "<|endoftext|>"), "bailing_v2": (None, "<|endoftext|>"), "dbrx": (None, "<|endoftext|>"),
    "chatml_de": (None, "<|endoftext|>"), "ernie": ("<s>", "</s>"), "llama2_zh": ("<s>", "</s>"),
    "yuan": (None, "<eod>"), "index": ("<s>", "</s>"), "fewshot": ("<s>", "</s>"),
}
# vision-language / omni templates (tests/golden/lf_vision_templates.json.gz)
VISION_FAMILY_SPECIALS = {
    "qwen2_vl": (None, "<|im_end|>"), "qwen3_vl": (None, "<|im_end|>"), "qwen3_vl_nothink": (None, "<|im_end|>"),
    "qwen3_5": (None, "<|im_end|>"), "qwen3_5_nothink": (None, "<|im_end|>"), "qwen3_6": (None, "<|im_end|>"),
    "qwen2_omni": (None, "<|im_end|>"), "qwen3_omni": (None, "<|im_end|>"), "qwen3_omni_nothink": (None, "<|im_end|>"),
    "minicpm_v": (None, "<|im_end|>"), "minicpm_o": (None, "<|im_end|>"), "glm4v": (None, "<|endoftext|>"),
    "glm4_5v": (None, "<|endoftext|>"), "glm_ocr": (None, "<|endoftext|>"), "llava": ("<s>", "</s>"),
    "llava_next": ("<s>", "</s>"), "gemma3n": ("<bos>", "<eos>"),
    "llava_next_llama3": ("<|begin_of_text|>", "<|eot_id|>"), "llava_next_mistral": ("<s>", "</s>"),
    "llava_next_qwen": (None, "<|im_end|>"), "llava_next_yi": ("<|startoftext|>", "<|im_end|>"),
    "granite3_vision": (None, "<|end_of_text|>"), "yi_vl": ("<|startoftext|>", "<|endoftext|>"),
    "mimo_vl": (None, "<|im_end|>"), "qwen2_audio": (None, "<|endoftext|>"),
    "intern_vl": ("<s>", "<|im_end|>"), "paligemma": ("<bos>", "<eos>"), "paligemma_chat": ("<bos>", "<eos>"),
    "pixtral": ("<s>", "</s>"), "mistral_small": ("<s>", "</s>"), "ministral3": ("<s>", "</s>"),
    "kimi_vl": (None, "<|im_end|>"), "keye_vl": (None, "<|im_end|>"), "dots_ocr": (None, "<|endofassistant|>"),
    "intern_s1": ("<s>", "<|im_end|>"), "ernie_vl": ("<s>", "<|end_of_sentence|>"), "lfm2_vl": (None, "<|im_end|>"),
    "minicpm_v_4_6": (None, "<|im_end|>"), "video_llava": ("<s>", "</s>"), "llava_next_video": ("<s>", "</s>"),
    "llava_next_video_mistral": ("<s>", "</s>"), "llava_next_video_yi": (None, "<|im_end|>"),
    "youtu_vl": (None, "<|end_of_text|>"),
    "mllama": ("<|begin_of_text|>", "<|eot_id|>"),
}

_CORPUS = [
    "Hello! How are you? I am fine, thank you. The weather in Paris is sunny and warm today.",
    "You are a helpful assistant. Answer the question briefly. Human: Assistant: User: System:",
    "system user assistant model tool response function arguments name description parameters required",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}, {"type": "object"}',
    "Two plus two is four. 0123456789 The quick brown fox jumps over the lazy dog.",
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.",
    "<think>\n\n</think>\n\n ### Instruction:\n### Response:\n Action: Action Input: Tool Name: Tool Description:",
    "你好，世界！今天天气很好。人工智能助手 可用工具 调用 函数 参数",
    "Identify the main verb in the following sentence. Give three tips for staying healthy. Translate to French.",
]


def build() -> None:
    """Train the base tokenizer once and write ``plain.json`` and ``special.json`` beside this file."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<s>", "</s>", "<pad>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(_CORPUS * 3, trainer=trainer)
    core.save(str(HERE / "plain.json"))
    core.add_special_tokens(MARKERS)
    core.save(str(HERE / "special.json"))


def load(setup: str, template: str | None = None):
    """A fresh tokenizer of ``setup`` (``family`` needs the template name)."""
    from transformers import PreTrainedTokenizerFast

    source = "plain" if setup == "plain" else "special"
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(HERE / f"{source}.json"), bos_token="<s>",
                                        eos_token="</s>", pad_token="<pad>", clean_up_tokenization_spaces=False)
    if setup == "family":
        bos, eos = {**FAMILY_SPECIALS, **VISION_FAMILY_SPECIALS}[template]
        tokenizer.add_special_tokens({"eos_token": eos, **({"bos_token": bos} if bos else {})})
        if bos is None:
            tokenizer.bos_token = None
    return tokenizer


def tokenizer_for(setup: str, chat_template: str):
    """A ``plain`` or ``special`` tokenizer with ``chat_template``, or ``bos``: ``special`` adding ``<s>`` to every encoding."""
    if setup != "bos":
        tokenizer = load(setup)
    else:
        from tokenizers import processors

        tokenizer = load("special")
        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tokenizer.convert_tokens_to_ids("<s>"))])
    tokenizer.chat_template = chat_template
    return tokenizer
