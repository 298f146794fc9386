"""Which models can train on packed rows (``packing`` / ``neat_packing``) with each row kept to itself.

Packed rows are kept apart by their attention masks and restarting positions (engine.data.collator,
engine.multimodal.packed_model). Three kinds of model cannot keep them apart, and a fourth is not packed by
LLaMA-Factory; all are refused with packing, before the run (``engine.preflight``) and again once the model is loaded:

- a layer that is not attention (a linear-attention, state-space or convolution layer: Qwen3-Next, Qwen3.5, Mamba,
  Jamba, LFM2, ...) carries its state from one row into the next one;
- a model whose transformers code builds no per-row attention from restarting ``position_ids`` (BLOOM, MPT, OPT,
  XGLM, BioGPT) attends over the whole packed sequence as one row;
- a model whose text cross-attends to images from one image token to the next (Llama 3.2 Vision) lets one row's
  text see another row's image;
- Qwen-Omni, whose rotary positions interleave video and audio per row, cannot get per-row positions in a packed
  sequence (LLaMA-Factory 0.9.5 refuses its `neat_packing`, the packing that keeps rows apart as ours does).
"""

from __future__ import annotations

from typing import Any

CARRYING_MARKERS = ("linear", "mamba", "conv", "hybrid", "recurrent", "ssm", "rwkv", "lstm", "delta", "compressed")
"""Parts of a layer type (``layer_types`` / ``layers_block_type`` of a config) whose layers reach from one row into
the next: state along the sequence (linear attention, state-space, convolution, recurrent layers) or key/value
entries compressed over several tokens. Any other type (full, sliding, chunked or indexed attention, an MLP or MoE
block) is kept to its row by the attention masks."""
RECURRENT_MODELS = frozenset({
    "mamba", "mamba2", "falcon_mamba", "falcon_h1", "rwkv", "rwkv5", "rwkv6", "rwkv7", "recurrent_gemma", "xlstm",
    "zamba", "zamba2", "bamba", "nemotron_h", "lfm2", "lfm2_moe", "lfm2_vl", "jamba", "qwen3_next", "qwen3_5",
    "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "minimax", "minimax_text_01", "minimax_m1", "kimi_linear",
    "granitemoehybrid", "bailing_hybrid", "bailing_moe_linear", "olmo_hybrid", "hymba", "plamo2", "phi4flash", "gla",
    "gated_deltanet", "delta_net", "retnet", "hgrn", "hgrn2"})
"""Model types with such layers whatever their config.json lists (a real Qwen3-Next config gives only
``full_attention_interval``; several are remote code, named as their config.json names them)."""
ROW_BLIND_MODELS = frozenset({
    "bloom", "mpt", "opt", "xglm", "biogpt", "gpt_oss", "afmoe", "cpmant", "openai-gpt", "bert", "big_bird",
    "camembert", "data2vec-text", "megatron-bert", "prophetnet", "rembert", "roberta", "roberta-prelayernorm",
    "roformer", "trocr", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet"})
"""Model types whose transformers code does not build per-row attention from restarting ``position_ids`` (it
attends over the whole packed sequence as one row, or builds its masks without the positions, as GPT-OSS and AFMoE
do, or is an encoder used as a decoder). Measured on a tiny model of each causal-LM type of transformers 5.25 that
builds on a CPU: a packed row's logits differ from the row's alone by 7e-4 to 28 in each of these; tests/engine/test_packing_support.py checks a
set of them against Llama, Qwen, Mistral, Gemma, Phi, GPT-2, GPT-J, GPT-NeoX and Falcon (ALiBi or rotary), which
match to 1e-7."""

OMNI_MODELS = frozenset({"qwen2_5_omni", "qwen2_5_omni_thinker", "qwen3_omni_moe", "qwen3_omni_moe_thinker"})
"""Model types whose 3D rotary positions interleave video and audio (Qwen-Omni): LLaMA-Factory 0.9.5 refuses its
row-separating packing for them (`neat_packing`: "Omni models are not supported for packed sequences"); packing here
always keeps rows apart, so it is refused for them too."""

CROSS_ATTENTION_MODELS = frozenset({"mllama"})
"""Model types whose text cross-attends to the images through a mask that runs from an image token to the next one
(Llama 3.2 Vision): in a packed sequence the text of one row would see another row's image."""


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, dict) else getattr(config, key, None)


def packing_problem(config: dict[str, Any] | Any) -> str | None:
    """Why packed rows would reach each other in the model of ``config`` (a ``config.json`` mapping or a
    transformers config), with the fix; None when packing keeps them apart."""
    if not config:
        return None
    text = _get(config, "text_config") or _get(config, "llm_config") or _get(config, "language_config") or config
    types = {_get(text, "model_type"), _get(config, "model_type")}
    kinds: set[str] = set()
    for source in (text, config):
        for key in ("layer_types", "layers_block_type"):
            values = _get(source, key) or ()
            kinds.update(str(kind) for kind in (values if isinstance(values, (list, tuple)) else ())
                         if any(marker in str(kind) for marker in CARRYING_MARKERS))
    name = _get(text, "model_type") or _get(config, "model_type")
    if _get(config, "model_type") in CROSS_ATTENTION_MODELS:
        return (f"`packing` cannot keep packed rows apart in this model ({_get(config, 'model_type')}): its text "
                "cross-attends to the images by a mask that runs from one image token to the next, across the rows of "
                "a packed sequence, and it takes its images per row. Set `packing: false` and `neat_packing: false` "
                "(rows are then padded to the longest of their batch).")
    if _get(config, "model_type") in OMNI_MODELS:
        return (f"`packing` is not available for this model ({_get(config, 'model_type')}): its rotary positions "
                "interleave video and audio per row, which a packed sequence cannot keep apart (LLaMA-Factory 0.9.5 refuses "
                "`neat_packing` for Qwen-Omni for that reason). Set "
                "`packing: false` and `neat_packing: false` (rows are then padded to the longest of their batch).")
    if types & ROW_BLIND_MODELS:
        return (f"`packing` cannot keep packed rows apart in this model ({name}): transformers runs its attention over "
                "the whole packed sequence as one row (it does not restart with each row's positions). Set `packing: "
                "false` and `neat_packing: false` (rows are then padded to the longest of their batch).")
    for source in (text, config):  # MiniMax: 0 marks a linear-attention layer, 1 a softmax one
        if 0 in (_get(source, "attn_type_list") or ()):
            kinds.add("linear_attention")
    if not kinds and not types & RECURRENT_MODELS:
        return None
    what = f"its {', '.join(sorted(kinds))} layers reach" if kinds else "some of its layers reach"
    return (f"`packing` cannot keep packed rows apart in this model ({name}): {what} from one row into the next "
            "(a state along the sequence, which attention masks do not cut). Set `packing: false` and "
            "`neat_packing: false` (rows are then padded to the longest of their batch).")


SAVED_PACKED = ("Here the rows were packed when the tokenized data (tokenized_path) was saved: set `overwrite_cache: "
                "true` to tokenize them again without packing.")
"""Added to a refusal when the packing comes from a saved ``tokenized_path``, not from the config."""


def packed_rows_problems(cfg: Any, model_config: dict[str, Any] | Any, from_saved: bool = False) -> list[str]:
    """Every problem of training ``cfg`` on packed rows with the model of ``model_config`` (None: not known yet),
    each with the fix. ``from_saved``: the rows were packed when its ``tokenized_path`` was saved, and the config
    itself does not pack, so it may also ask for what packed rows cannot give."""
    problems = []
    if from_saved and cfg.train.max_tokens_per_batch:
        problems.append("The tokenized data (tokenized_path) holds packed rows, and `max_tokens_per_batch` works "
                        "without packing; unset it, or set `overwrite_cache: true` to tokenize the data again "
                        "without packing.")
    if from_saved and int(getattr(cfg.parallel, "cp_size", 1) or 1) > 1:
        problems.append("The tokenized data (tokenized_path) holds packed rows, and `cp_size > 1` splits one sequence "
                        "across ranks, which packed rows cannot take; set `overwrite_cache: true` to tokenize the "
                        "data again without packing, or `cp_size: 1`.")
    problem = packing_problem(model_config)
    if problem:
        problems.append(f"{problem} {SAVED_PACKED}" if from_saved else problem)
    return problems
