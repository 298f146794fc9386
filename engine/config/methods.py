"""Keys of the optional training methods LLaMA-Factory exposes: LoRA+, PiSSA conversion, OFT, GaLore, APOLLO,
BAdam, RoPE scaling, hub sources and the per-module profiler.

Names, defaults and choices follow LLaMA-Factory (v0.9.5 ``hparams``) so its configs load unchanged; each key is
read by the module that implements it (:mod:`engine.train.methods`, :mod:`engine.models.rope`,
:mod:`engine.models.peft_methods`, :mod:`engine.data.hub`, :mod:`engine.train.profiler`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.config.schema import opt

RopeScaling = Literal[None, "linear", "dynamic", "yarn", "llama3"]


@dataclass
class MethodArgs:
    """Optional methods on top of LoRA / freeze / full training."""

    # LoRA+ (PEFT's create_loraplus_optimizer)
    loraplus_lr_ratio: float | None = opt(None, "LoRA+: learning-rate ratio of the B matrices to the A matrices "
                                          "(e.g. 16); empty turns LoRA+ off.", min=0.0, advanced=True)
    loraplus_lr_embedding: float = opt(1e-6, "LoRA+: learning rate of LoRA embedding layers.", min=0.0,
                                       advanced=True)
    # PiSSA
    pissa_iter: int = opt(16, "PiSSA: fast-SVD iterations (-1: exact SVD).", min=-1, advanced=True)
    pissa_convert: bool = opt(True, "PiSSA: save the adapter converted to plain LoRA (loads correctly on the "
                                    "original base model).", advanced=True)
    # OFT (finetuning_type: oft)
    oft_rank: int = opt(0, "OFT: number of blocks (0: derived from oft_block_size).", min=0, advanced=True)
    oft_block_size: int = opt(32, "OFT: block size (0: derived from oft_rank).", min=0, advanced=True)
    oft_target: str = opt("all", "OFT: modules that get OFT: `all` (every linear layer of the blocks) or names.",
                          advanced=True)
    module_dropout: float = opt(0.0, "OFT: multiplicative dropout.", min=0.0, max=0.9, advanced=True)
    # GaLore (galore-torch)
    use_galore: bool = opt(False, "GaLore: gradient low-rank projection optimizer (extra `methods`).",
                           advanced=True)
    galore_target: str = opt("all", "GaLore: modules whose weights are projected (`all` or names).", advanced=True)
    galore_rank: int = opt(16, "GaLore: rank of the projected gradients.", min=1, advanced=True)
    galore_update_interval: int = opt(200, "GaLore: steps between projection updates.", min=1, advanced=True)
    galore_scale: float = opt(2.0, "GaLore: scaling coefficient.", min=0.0, advanced=True)
    galore_proj_type: Literal["std", "reverse_std", "right", "left", "full"] = opt(
        "std", "GaLore: projection type.", advanced=True)
    galore_layerwise: bool = opt(False, "GaLore: update layer by layer during backward (saves memory).",
                                 advanced=True)
    # APOLLO (apollo-torch)
    use_apollo: bool = opt(False, "APOLLO: approximated gradient scaling optimizer (extra `methods`).",
                           advanced=True)
    apollo_target: str = opt("all", "APOLLO: modules whose weights are projected (`all` or names).", advanced=True)
    apollo_rank: int = opt(16, "APOLLO: rank of the projected gradients.", min=1, advanced=True)
    apollo_update_interval: int = opt(200, "APOLLO: steps between projection updates.", min=1, advanced=True)
    apollo_scale: float = opt(32.0, "APOLLO: scaling coefficient.", min=0.0, advanced=True)
    apollo_proj: Literal["svd", "random"] = opt("random", "APOLLO: low-rank projection algorithm.", advanced=True)
    apollo_proj_type: Literal["std", "right", "left"] = opt("std", "APOLLO: projection type.", advanced=True)
    apollo_scale_type: Literal["channel", "tensor"] = opt("channel", "APOLLO: scaling granularity.", advanced=True)
    apollo_layerwise: bool = opt(False, "APOLLO: update layer by layer during backward (saves memory).",
                                 advanced=True)
    apollo_scale_front: bool = opt(False, "APOLLO: norm-growth limiter in front of gradient scaling.",
                                   advanced=True)
    # BAdam (badam)
    use_badam: bool = opt(False, "BAdam: block-coordinate Adam, one block of layers at a time (extra `methods`).",
                          advanced=True)
    badam_mode: Literal["layer", "ratio"] = opt("layer", "BAdam: layer-wise or ratio-wise blocks.", advanced=True)
    badam_start_block: int | None = opt(None, "BAdam: first block index (layer mode).", min=0, advanced=True)
    badam_switch_mode: Literal[None, "ascending", "descending", "random", "fixed"] = opt(
        "ascending", "BAdam: order in which blocks are picked (layer mode).", advanced=True)
    badam_switch_interval: int | None = opt(50, "BAdam: steps between block switches (-1: never).", min=-1,
                                            advanced=True)
    badam_update_ratio: float = opt(0.05, "BAdam: fraction of each weight updated (ratio mode).", min=0.0, max=1.0,
                                    advanced=True)
    badam_mask_mode: Literal["adjacent", "scatter"] = opt("adjacent", "BAdam: mask layout (ratio mode).",
                                                          advanced=True)
    badam_verbose: int = opt(0, "BAdam: 0 quiet, 1 block names, 2 trainable parameters.", min=0, max=2,
                             advanced=True)
    # Adam-mini (adam-mini)
    use_adam_mini: bool = opt(False, "Adam-mini: Adam with one learning rate per block (head, neuron, token), about "
                                     "half AdamW's optimizer memory (extra `methods`).", advanced=True)
    # RoPE scaling (applied to the model config)
    rope_scaling: RopeScaling = opt(None, "RoPE scaling to reach cutoff_len beyond the model's length: linear, "
                                          "dynamic, yarn or llama3.", advanced=True)
    # Hub sources
    use_modelscope_hub: bool = opt(False, "Load hub models and datasets from ModelScope (package `modelscope`).",
                                   advanced=True)
    use_openmind_hub: bool = opt(False, "Load hub models and datasets from Modelers/OpenMind (package "
                                        "`openmind_hub`).", advanced=True)
    # Data order
    disable_shuffling: bool = opt(False, "Feed the training examples in order instead of shuffled.", advanced=True)
    # Early stopping (transformers' EarlyStoppingCallback, as LLaMA-Factory adds it)
    early_stopping_steps: int | None = opt(None, "Stop training when the eval loss has not improved for this many "
                                                 "evaluations in a row (needs `eval_strategy`); empty: never.",
                                           min=1, advanced=True)
    # Token-weighted SFT losses (LLaMA-Factory's)
    use_dft_loss: bool = opt(False, "sft: the DFT loss, each token's cross-entropy weighted by the (detached) "
                                    "probability the model gives it.", advanced=True)
    use_eaft_loss: bool = opt(False, "sft: the EAFT loss, each token's cross-entropy weighted by the entropy of "
                                     "the model's top 20 predictions there (divided by 3, to the power eaft_alpha).",
                              advanced=True)
    eaft_alpha: float = opt(1.0, "EAFT: the power of the entropy weight.", min=0, advanced=True)
    use_asft_loss: bool = opt(False, "sft: the ASFT loss, the DFT loss plus asft_alpha times the KL divergence from "
                                     "a reference model's predictions (ref_model; else the frozen base model).",
                              advanced=True)
    asft_alpha: float = opt(0.1, "ASFT: the weight of the KL term.", min=0, advanced=True)
    # Per-module profiler
    profile_modules: str | None = opt(None, "Profile these modules' forward/backward time: comma-separated name "
                                            "patterns with * wildcards (e.g. `*.layers.0.self_attn,*.mlp`).",
                                      advanced=True)
    profiler_warmup_steps: int = opt(1, "Profiler: steps skipped before timing starts.", min=0, advanced=True)
    profiler_active_steps: int = opt(3, "Profiler: steps timed after the warm-up.", min=1, advanced=True)
