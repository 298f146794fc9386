"""More text-only model families, each with its LLaMA-Factory template (merged into ``registry.FAMILIES``).

Each entry: family name -> (template, {display name: hub id}, config ``model_type`` values that identify the family
unambiguously). Architectures shared by several families (``llama``, ``mistral``, ``qwen2``, ``phi3``) are left out
of ``model_types``: such models are recognised by name.
"""

from __future__ import annotations


def hub_ids(org: str, names: list[str]) -> dict[str, str]:
    """Display name -> hub id for repos named ``org/name``."""
    return {name: f"{org}/{name}" for name in names}


TEXT_FAMILIES: dict[str, tuple[str, dict[str, str], tuple[str, ...]]] = {
    "Qwen3-2507-Instruct": ("qwen3_nothink", hub_ids("Qwen", [
        "Qwen3-4B-Instruct-2507", "Qwen3-30B-A3B-Instruct-2507", "Qwen3-235B-A22B-Instruct-2507"]), ()),
    "DeepSeek-R1": ("deepseekr1", hub_ids("deepseek-ai", [
        "DeepSeek-R1", "DeepSeek-R1-0528", "DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-7B",
        "DeepSeek-R1-Distill-Qwen-14B", "DeepSeek-R1-Distill-Qwen-32B", "DeepSeek-R1-Distill-Llama-8B",
        "DeepSeek-R1-Distill-Llama-70B"]), ()),
    "DeepSeek LLM": ("deepseek", hub_ids("deepseek-ai", [
        "deepseek-llm-7b-chat", "deepseek-llm-67b-chat", "DeepSeek-V2-Lite-Chat"]), ()),
    "DeepSeek Coder": ("deepseekcoder", hub_ids("deepseek-ai", [
        "deepseek-coder-1.3b-instruct", "deepseek-coder-6.7b-instruct", "deepseek-coder-33b-instruct"]), ()),
    "Llama 2": ("llama2", hub_ids("meta-llama", ["Llama-2-7b-chat-hf", "Llama-2-13b-chat-hf", "Llama-2-70b-chat-hf"]),
                ()),
    "Vicuna": ("vicuna", hub_ids("lmsys", ["vicuna-7b-v1.5", "vicuna-13b-v1.5"]), ()),
    "Zephyr": ("zephyr", hub_ids("HuggingFaceH4", ["zephyr-7b-beta", "zephyr-7b-alpha"]), ()),
    "Ministral": ("ministral", hub_ids("mistralai", ["Ministral-8B-Instruct-2410", "Mistral-Nemo-Instruct-2407"]), ()),
    "Gemma": ("gemma", hub_ids("google", ["gemma-2b-it", "gemma-7b-it", "gemma-1.1-2b-it", "gemma-1.1-7b-it"]),
              ("gemma",)),
    "Gemma 2": ("gemma2", hub_ids("google", ["gemma-2-2b-it", "gemma-2-9b-it", "gemma-2-27b-it"]), ("gemma2",)),
    "GLM-4.5": ("glm4_moe", hub_ids("zai-org", ["GLM-4.5", "GLM-4.5-Air", "GLM-4.6"]), ("glm4_moe",)),
    "GLM-Z1": ("glmz1", hub_ids("zai-org", ["GLM-Z1-9B-0414", "GLM-Z1-32B-0414"]), ()),
    "Phi-3": ("phi", hub_ids("microsoft", [
        "Phi-3-mini-4k-instruct", "Phi-3-mini-128k-instruct", "Phi-3-medium-4k-instruct", "Phi-3.5-mini-instruct"]),
        ()),
    "Yi": ("yi", hub_ids("01-ai", ["Yi-6B-Chat", "Yi-34B-Chat", "Yi-1.5-6B-Chat", "Yi-1.5-9B-Chat", "Yi-1.5-34B-Chat"]),
           ()),
    "SmolLM": ("smollm", hub_ids("HuggingFaceTB", ["SmolLM-135M-Instruct", "SmolLM-360M-Instruct",
                                                "SmolLM-1.7B-Instruct"]), ()),
    "SmolLM2": ("smollm2", hub_ids("HuggingFaceTB", ["SmolLM2-135M-Instruct", "SmolLM2-360M-Instruct",
                                                  "SmolLM2-1.7B-Instruct"]), ()),
    "InternLM 2": ("intern2", hub_ids("internlm", ["internlm2-chat-7b", "internlm2_5-7b-chat", "internlm2_5-20b-chat"]),
                   ("internlm2",)),
    "OpenCoder": ("opencoder", hub_ids("infly", ["OpenCoder-1.5B-Instruct", "OpenCoder-8B-Instruct"]), ()),
    "MiniCPM 4": ("cpm4", hub_ids("openbmb", ["MiniCPM4-0.5B", "MiniCPM4-8B"]), ()),
    "Falcon": ("falcon", hub_ids("tiiuae", ["falcon-7b-instruct", "falcon-40b-instruct"]), ("falcon",)),
    "Falcon-H1": ("falcon_h1", hub_ids("tiiuae", [
        "Falcon-H1-0.5B-Instruct", "Falcon-H1-1.5B-Instruct", "Falcon-H1-3B-Instruct", "Falcon-H1-7B-Instruct",
        "Falcon-H1-34B-Instruct"]), ("falcon_h1",)),
    "MiMo": ("mimo", hub_ids("XiaomiMiMo", ["MiMo-7B-SFT", "MiMo-7B-RL"]), ("mimo",)),
    "Sailor": ("sailor", hub_ids("sail", ["Sailor-7B-Chat", "Sailor2-8B-Chat"]), ()),
    "Moonlight": ("moonlight", hub_ids("moonshotai", ["Moonlight-16B-A3B-Instruct"]), ()),
    "Granite 3": ("granite3", hub_ids("ibm-granite", [
        "granite-3.0-2b-instruct", "granite-3.1-8b-instruct", "granite-3.3-8b-instruct"]), ("granite",)),
    "Granite 4": ("granite4", hub_ids("ibm-granite", ["granite-4.0-micro", "granite-4.0-h-tiny", "granite-4.0-h-small"]),
                  ("granitemoehybrid",)),
    "Command R": ("cohere", hub_ids("CohereForAI", ["c4ai-command-r-v01", "c4ai-command-r-plus", "aya-23-8B"]),
                  ("cohere",)),
    "EXAONE": ("exaone", hub_ids("LGAI-EXAONE", [
        "EXAONE-3.0-7.8B-Instruct", "EXAONE-3.5-2.4B-Instruct", "EXAONE-3.5-7.8B-Instruct"]), ("exaone",)),
    "OLMo": ("olmo", hub_ids("allenai", ["OLMo-7B-Instruct-hf"]), ()),
    "OpenChat": ("openchat", hub_ids("openchat", ["openchat-3.5-0106"]), ()),
    "SOLAR": ("solar", hub_ids("upstage", ["SOLAR-10.7B-Instruct-v1.0"]), ()),
    "StarChat": ("starchat", hub_ids("HuggingFaceH4", ["starchat-beta", "starchat2-15b-v0.1"]), ()),
    "gpt-oss": ("gpt_oss", hub_ids("openai", ["gpt-oss-20b", "gpt-oss-120b"]), ("gpt_oss",)),
    "Breeze": ("breeze", hub_ids("MediaTek-Research", ["Breeze-7B-Instruct-v1_0"]), ()),
    "Seed-Coder": ("seed_coder", hub_ids("ByteDance-Seed", ["Seed-Coder-8B-Instruct", "Seed-Coder-8B-Reasoning"]), ()),
    "Hunyuan": ("hunyuan", hub_ids("tencent", ["Hunyuan-7B-Instruct-0124"]), ()),
    "ERNIE 4.5": ("ernie_nothink", hub_ids("baidu", ["ERNIE-4.5-0.3B-PT", "ERNIE-4.5-21B-A3B-PT"]),
                  ("ernie4_5", "ernie4_5_moe")),
    "TeleChat2": ("telechat2", hub_ids("Tele-AI", ["TeleChat2-3B", "TeleChat2-7B", "TeleChat2-35B"]), ()),
    "XuanYuan": ("xuanyuan", hub_ids("Duxiaoman-DI", ["XuanYuan-6B-Chat", "XuanYuan-13B-Chat", "XuanYuan-70B-Chat"]),
                 ()),
    # LLaMA-Factory 0.9.5's later text families (templates in engine/templates/families_later.py)
    "ChatGLM3": ("chatglm3", {"ChatGLM3-6B-Base": "zai-org/chatglm3-6b-base", "ChatGLM3-6B-Chat": "zai-org/chatglm3-6b"},
                 ()),
    "Chinese Llama 2": ("llama2_zh", hub_ids("hfl", [
        "chinese-llama-2-1.3b", "chinese-llama-2-7b", "chinese-llama-2-13b", "chinese-alpaca-2-1.3b",
        "chinese-alpaca-2-7b", "chinese-alpaca-2-13b"]), ()),
    "DBRX": ("dbrx", hub_ids("databricks", ["dbrx-base", "dbrx-instruct"]), ("dbrx",)),
    "Mistral Small": ("mistral_small", hub_ids("mistralai", [
        "Mistral-Small-24B-Base-2501", "Mistral-Small-24B-Instruct-2501", "Devstral-Small-2507"]), ()),
    "ERNIE 4.5 Thinking": ("ernie", hub_ids("baidu", ["ERNIE-4.5-21B-A3B-Thinking"]), ()),
    "GLM-4.7": ("glm4_7", hub_ids("zai-org", ["GLM-4.7-Flash"]), ()),
    "Aeva": ("aeva", hub_ids("louzongzhi", ["Aeva-Flash", "Aeva-Air", "Aeva", "Aeva-Pro", "Aeva-Max"]), ()),
    "MiniMax-M1": ("minimax1", hub_ids("MiniMaxAI", ["MiniMax-Text-01-hf", "MiniMax-M1-40k-hf", "MiniMax-M1-80k-hf"]),
                   ("minimax",)),
    "MiniMax-M2": ("minimax2", hub_ids("MiniMaxAI", ["MiniMax-M2", "MiniMax-M2.1"]), ("minimax_m2",)),
    "Hunyuan small": ("hunyuan_small", hub_ids("tencent", ["HY-MT1.5-1.8B"]), ()),
    "Hunyuan 3": ("hy3", hub_ids("tencent", ["Hy3-preview"]), ()),
    "Youtu-LLM": ("youtu", hub_ids("tencent", ["Youtu-LLM-2B", "Youtu-LLM-2B-Base"]), ()),
    "Index": ("index", hub_ids("IndexTeam", [
        "Index-1.9B", "Index-1.9B-Pure", "Index-1.9B-Chat", "Index-1.9B-Character", "Index-1.9B-32K"]), ()),
    "LFM2.5": ("lfm2", hub_ids("LiquidAI", ["LFM2.5-1.2B-Base", "LFM2.5-1.2B-Instruct"]), ("lfm2",)),
    "MiMo-V2": ("mimo_v2", hub_ids("XiaomiMiMo", ["MiMo-V2-Flash-Base", "MiMo-V2-Flash"]), ("mimo_v2_flash",)),
    "OpenChat 3.6": ("openchat-3.6", hub_ids("openchat", ["openchat-3.6-8b-20240522"]), ()),
    "Phi-3 small": ("phi_small", hub_ids("microsoft", ["Phi-3-small-8k-instruct", "Phi-3-small-128k-instruct"]),
                    ()),
    "Phi-4-mini": ("phi4_mini", hub_ids("microsoft", ["Phi-4-mini-instruct"]), ()),
    "Seed-OSS": ("seed_oss", hub_ids("ByteDance-Seed", [
        "Seed-OSS-36B-Base", "Seed-OSS-36B-Base-woSyn", "Seed-OSS-36B-Instruct"]), ("seed_oss",)),
    "Yuan 2": ("yuan", hub_ids("IEITYuan", ["Yuan2-2B-hf", "Yuan2-51B-hf", "Yuan2-102B-hf"]), ()),
}
"""Family name -> (template, models, model types)."""
