"""Which models keep packed rows apart (engine.models.packing_support), checked against the models themselves.

For each family a tiny model built from its config runs a row alone and the same row packed behind another: the
refusal list must hold exactly the families where the packed row's logits differ.
"""

from __future__ import annotations

import pytest
import torch

from engine.data.collator import PaddingCollator
from engine.models.packing_support import packing_problem

BASE = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, pad_token_id=0, head_dim=8)
FAMILIES = {
    "llama": {}, "qwen2": {}, "mistral": {}, "gemma2": {"sliding_window": 4}, "phi3": {}, "olmo": {},
    "gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4}, "gptj": {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4},
    "gpt_neox": {}, "stablelm": {}, "qwen3_moe": {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16},
    # attention over the whole packed sequence
    "bloom": {"n_layer": 2, "n_head": 4}, "mpt": {"d_model": 32, "n_layers": 2, "n_heads": 4},
    "opt": {"ffn_dim": 64, "word_embed_proj_dim": 32}, "xglm": {"d_model": 32, "ffn_dim": 64}, "biogpt": {},
    # masks built without the positions
    "gpt_oss": {"num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": 4}, "afmoe": {},
    "openai-gpt": {"n_embd": 32, "n_layer": 2, "n_head": 4},
}


class _Tokenizer:
    pad_token_id, eos_token_id, padding_side = 0, 1, "right"


def _leak(config) -> float:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    try:
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    except ValueError:  # no SDPA (GPT-OSS): the loader then picks eager
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    first, second = list(range(2, 14)), list(range(20, 29))
    collate = PaddingCollator(tokenizer=_Tokenizer())
    with torch.no_grad():
        alone = model(**collate([{"input_ids": second, "labels": second}])).logits[0, :len(second)]
        packed = model(**collate([{"input_ids": first + second, "labels": first + second,
                                   "position_ids": list(range(len(first))) + list(range(len(second)))}])).logits
    return float((packed[0, len(first):len(first) + len(second)] - alone).abs().max())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_refused_exactly_where_packed_rows_would_reach_each_other(family):
    from transformers import AutoConfig

    config = AutoConfig.for_model(family, **{**BASE, **FAMILIES[family]})
    leaks = _leak(config) > 1e-4
    assert leaks == (packing_problem(config) is not None) == (packing_problem(config.to_dict()) is not None)


@pytest.mark.parametrize("alibi", [False, True])
def test_falcon_packs_with_rotary_positions_and_with_alibi(alibi):
    """ALiBi biases depend on the distance between tokens only, so a per-row mask keeps them right."""
    from transformers import FalconConfig

    config = FalconConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, alibi=alibi)
    assert _leak(config) < 1e-5 and packing_problem(config) is None


@pytest.mark.parametrize("name", ["Qwen3NextConfig", "JambaConfig", "MambaConfig", "FalconH1Config", "Lfm2Config",
                                  "MiniMaxConfig"])
def test_models_with_layers_that_carry_state_refuse_packing(name):
    import transformers

    from engine.models.packing_support import packing_problem

    config = getattr(transformers, name)()
    for source in (config, config.to_dict()):  # the loaded model's config and its config.json
        assert "cannot keep packed rows apart" in packing_problem(source)


@pytest.mark.parametrize("name", ["LlamaConfig", "Qwen3Config", "Gemma3TextConfig", "MistralConfig",
                                  "DeepseekV32Config", "Llama4TextConfig"])
def test_attention_only_models_pack(name):
    import transformers

    from engine.models.packing_support import packing_problem

    config = getattr(transformers, name)()
    assert packing_problem(config) is None and packing_problem(config.to_dict()) is None


def test_a_real_qwen3_next_config_json_is_refused_and_only_stateful_layers_are_named():
    from transformers import NemotronHConfig

    from engine.models.packing_support import packing_problem

    # Qwen/Qwen3-Next-80B-A3B's config.json lists no layer_types, only the interval of its full-attention layers
    assert "(qwen3_next)" in packing_problem({"model_type": "qwen3_next", "full_attention_interval": 4})
    problem = packing_problem(NemotronHConfig())
    assert "its linear_attention layers reach" in problem and "mlp" not in problem and "moe" not in problem




@pytest.mark.parametrize("config", [
    {"model_type": "minimax_text_01", "attn_type_list": [0, 0, 1]},  # remote code: 0 marks linear attention
    {"model_type": "rwkv7"}, {"model_type": "plamo2"}, {"model_type": "hymba"},
    {"model_type": "internvl_chat", "llm_config": {"model_type": "nemotron_h"}},  # the language model under llm_config
])
def test_remote_code_and_wrapped_hybrids_are_refused_from_their_config_json(config):
    assert "cannot keep packed rows apart" in packing_problem(config)
