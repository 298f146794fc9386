"""Typed configuration, one dataclass per concern.

Field names follow LLaMA-Factory's flat YAML convention so that its users' configs load unchanged.
Every field carries a ``help`` text and, for numbers, optional ``min``/``max`` bounds in its metadata; the
board builds its widgets from these (a ``Literal`` becomes a dropdown, a bounded number a slider).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from engine.config.parallel import ParallelArgs

MAX_WORKERS = 2048
"""Most worker processes ``preprocessing_num_workers`` and ``dataloader_num_workers`` may start (more than the largest
machine's cores): torch's DataLoader starts every worker it is given, whatever the data, so a config from elsewhere
with ``dataloader_num_workers: 100000`` passed every check and would have forked a hundred thousand processes."""

MAX_MEDIA_PIXELS = 178_956_970
"""Largest ``image_min_pixels`` / ``video_min_pixels``: the most pixels an image may have (Pillow's decompression-bomb
limit, twice its ``MAX_IMAGE_PIXELS``, which images and video frames are held to). Every smaller image or frame is
scaled up to the minimum, so ``image_min_pixels: 100000000000`` took one 32x32 image past 19 GB (the process was
killed), and 10**18 ended in a MemoryError traceback."""

MAX_VIDEO_FRAMES = 16384
"""Largest ``video_maxlen``: over two hours of video at 2 frames a second, each frame held in memory (3 GB at the
default 256x256). A stream that states no frame count is read for its first ``video_maxlen`` frames, so
``video_maxlen: 1000000000000`` listed a trillion frame numbers (the process's memory, then a MemoryError)."""


def opt(default: Any, help: str, *, min: float | None = None, max: float | None = None, step: float | None = None,
        advanced: bool = False, off_below_min: bool = False, board_min: float | None = None) -> Any:
    """A dataclass field with documentation and optional bounds. ``off_below_min``: a config value below ``min``
    is not refused, since LLaMA-Factory reads it as off (the cross checks warn and set it to ``min``); the board's
    widget keeps the bound. ``board_min``: where the board's widget starts, above ``min`` (a config may go lower)."""
    meta: dict[str, Any] = {"help": help, "advanced": advanced}
    if min is not None:
        meta["min"] = min
    if board_min is not None:
        meta["board_min"] = board_min
    if off_below_min:
        meta["off_below_min"] = True
    if max is not None:
        meta["max"] = max
    if step is not None:
        meta["step"] = step
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


Stage = Literal["pt", "sft", "rm", "dpo", "kto", "grpo", "rloo", "ppo"]
FinetuningType = Literal["lora", "oft", "full", "freeze"]
PrefLoss = Literal["sigmoid", "hinge", "ipo", "orpo", "simpo"]
GRPOLoss = Literal[None, "grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]
Scheduler = Literal[
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
    "inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr", "warmup_stable_decay",
]
Strategy = Literal["no", "steps", "epoch"]
SaveStrategy = Literal["no", "steps", "epoch", "best"]
Attention = Literal["auto", "eager", "sdpa", "flash_attention_2", "flash_attention_3"]
InferDtype = Literal["auto", "float32", "float16", "bfloat16"]


@dataclass
class ModelArgs:
    """Which model to load and how."""

    model_name_or_path: str = opt("", "Local folder or hub id of the base model (or `demo` for the built-in demo).")
    adapter_name_or_path: str | None = opt(None, "Adapter folder(s) to load on top of the model, comma separated.")
    template: str | None = opt(None, "Prompt template; empty uses the tokenizer's own chat template.")
    trust_remote_code: bool = opt(False, "Allow code shipped with the model to run.", advanced=True)
    cache_dir: str | None = opt(None, "Where downloaded models are cached.", advanced=True)
    model_revision: str = opt("main", "Model revision (branch, tag or commit).", advanced=True)
    flash_attn: Attention = opt("auto", "Attention implementation; auto picks sdpa where it is safe.", advanced=True)
    attn_implementation: str | None = opt(None, "Alias of flash_attn accepted for Hugging Face configs.", advanced=True)
    infer_dtype: InferDtype = opt("auto", "Data type for inference and export.")
    infer_backend: Literal["huggingface"] = opt("huggingface", "Inference engine for chat (transformers).")
    enable_liger_kernel: bool = opt(False, "Use Liger fused kernels (extra `liger`).", advanced=True)
    use_unsloth: bool = opt(False, "Use Unsloth kernels (not supported; refused with a message).", advanced=True)
    quantization_bit: Literal[None, 4, 8] = opt(None, "Load the base model quantized (QLoRA; extra `bitsandbytes`).",
                                                advanced=True)
    quantization_type: Literal["nf4", "fp4"] = opt("nf4", "4-bit data type of bitsandbytes (QLoRA).", advanced=True)
    double_quantization: bool = opt(True, "Quantize the 4-bit quantization constants too (QLoRA).", advanced=True)
    resize_vocab: bool = opt(False, "Resize the embeddings to the tokenizer's vocabulary.", advanced=True)
    add_tokens: str | None = opt(None, "Tokens to add to the vocabulary (comma-separated); the embeddings grow and "
                                       "their rows train.", advanced=True)
    add_special_tokens: str | None = opt(None, "Special tokens to add to the vocabulary (comma-separated, never "
                                               "split); the embeddings grow and their rows train.", advanced=True)
    use_fast_tokenizer: bool = opt(True, "Use the fast (Rust) tokenizer.", advanced=True)
    split_special_tokens: bool = opt(False, "Tokenize special tokens as plain text.", advanced=True)


@dataclass
class DataArgs:
    """Which data to train and evaluate on, and how to tokenize it."""

    dataset: str | None = opt(None, "Dataset name(s) from dataset_info.json or file paths, comma separated.")
    eval_dataset: str | None = opt(None, "Evaluation dataset name(s), comma separated.")
    eval_on_each_dataset: bool = opt(False, "Evaluate each eval_dataset on its own (eval_NAME_loss, ...) instead of "
                                            "all together, as LLaMA-Factory.", advanced=True)
    dataset_dir: str = opt("data", "Folder holding dataset_info.json and the data files.")
    cutoff_len: int = opt(2048, "Maximum tokens per example after tokenization.", min=1, max=1_048_576, step=8,
                          board_min=8)  # LLaMA-Factory takes any positive cutoff (a tiny one with a warning here)
    max_samples: int | None = opt(None, "Use at most this many rows of each dataset.", min=1)
    val_size: float = opt(0.0, "Fraction (<1) or count (>=1) of rows held out for evaluation.", min=0.0,
                          off_below_min=True)
    train_on_prompt: bool = opt(False, "Also compute the loss on prompt tokens.")
    mask_history: bool = opt(False, "Train only on the last assistant turn.")
    packing: bool | None = opt(None, "sft: pack several examples into one sequence without cross attention. pt: "
                               "unset or true, texts joined into cutoff_len blocks as in LLaMA-Factory; false, one "
                               "row per text.")
    neat_packing: bool = opt(False, "Pack whole examples (sft and pt) into sequences without attention across them.",
                             advanced=True)
    streaming: bool = opt(False, "Tokenize rows while training, in LLaMA-Factory's shuffled streaming order (needs "
                               "max_steps).", advanced=True)
    buffer_size: int = opt(16384, "streaming: rows in the shuffle buffer.", min=1, advanced=True)
    mix_strategy: Literal["concat", "interleave_under", "interleave_over"] = opt(
        "concat", "How several datasets are mixed.", advanced=True)
    interleave_probs: str | None = opt(None, "Sampling probabilities for interleaving.", advanced=True)
    preprocessing_num_workers: int | None = opt(None, "Processes for tokenization.", min=1, max=MAX_WORKERS,
                                                advanced=True)
    preprocessing_batch_size: int | None = opt(None, "Rows tokenized per chunk (empty: 2000); LLaMA-Factory's batch "
                                               "size where its batches shape the rows (pt blocks, packing, KTO "
                                               "pairs; empty: 1000).", min=1, advanced=True)
    overwrite_cache: bool = opt(False, "Ignore cached tokenized data.", advanced=True)
    tokenized_path: str | None = opt(None, "Save or load tokenized data here.", advanced=True)
    default_system: str | None = opt(None, "System prompt used when a row has none.", advanced=True)
    enable_thinking: bool | None = opt(True, "For reasoning templates: keep the thinking part and train on it "
                                       "(true; a reply without one trains the empty block), drop it (false), or "
                                       "empty (null) for LLaMA-Factory's mixed mode: a reply's own thinking is "
                                       "trained, a reply without one gets the empty block in its prompt, untrained.",
                                       advanced=True)
    preserve_thinking: bool = opt(False, "For reasoning templates: keep history thoughts in single-turn encodings "
                                  "and with mask_history.", advanced=True)
    keep_prompt_end: bool = opt(False, "Cut long prompts from the start, keeping the turns nearest the reply "
                                "(LLaMA-Factory keeps the start).", advanced=True)
    tool_format: str | None = opt(None, "Tool-call format; empty uses the template's own.", advanced=True)
    media_dir: str | None = opt(None, "Folder that relative image, video and audio paths are resolved against "
                                "(empty: dataset_dir).", advanced=True)
    image_max_pixels: int = opt(768 * 768, "Largest image size in pixels.", advanced=True, min=1)
    image_min_pixels: int = opt(32 * 32, "Smallest image size in pixels.", advanced=True, min=0,
                                max=MAX_MEDIA_PIXELS)
    video_fps: float = opt(2.0, "Frames sampled per second of video.", advanced=True, min=0.01)
    video_maxlen: int = opt(128, "Most frames sampled from a video.", advanced=True, min=1, max=MAX_VIDEO_FRAMES)
    video_max_pixels: int = opt(256 * 256, "Largest video frame size in pixels.", advanced=True, min=1)
    video_min_pixels: int = opt(16 * 16, "Smallest video frame size in pixels.", advanced=True, min=0,
                                max=MAX_MEDIA_PIXELS)
    audio_sampling_rate: int = opt(16000, "Audio sampling rate when the processor names none.", advanced=True,
                                  min=1)
    use_audio_in_video: bool = opt(False, "Qwen-Omni: each video's <audio> is its sound track, interleaved with the "
                                   "frames in 2-second chunks.", advanced=True)


@dataclass
class FinetuningArgs:
    """Training stage and the method: LoRA, freeze or full, plus preference settings."""

    stage: Stage = opt("sft", "Training stage: pre-training, supervised, reward model, DPO, KTO, GRPO or RLOO.")
    finetuning_type: FinetuningType = opt("lora", "Which weights are trained.")
    lora_rank: int = opt(8, "LoRA rank.", min=1, max=1024)
    lora_alpha: int | None = opt(None, "LoRA scaling alpha; empty means 2 x rank.", min=1, max=4096)
    lora_dropout: float = opt(0.0, "Dropout on the LoRA path.", min=0.0, max=0.9, step=0.01)
    lora_target: str = opt("all", "Modules that get LoRA: `all` (every linear layer of the blocks) or names.")
    additional_target: str | None = opt(None, "Extra modules trained fully beside LoRA (e.g. embed_tokens).",
                                        advanced=True)
    use_rslora: bool = opt(False, "Rank-stabilised LoRA scaling.")
    use_dora: bool = opt(False, "Weight-decomposed LoRA (DoRA).")
    pissa_init: bool = opt(False, "PiSSA initialisation of LoRA.", advanced=True)
    create_new_adapter: bool = opt(False, "Start a new adapter on top of a loaded one.", advanced=True)
    freeze_trainable_layers: int = opt(2, "Freeze: train this many last layers (negative: first layers).",
                                       min=-1024, max=1024)
    freeze_trainable_modules: str = opt("all", "Freeze: module names trained inside those layers.")
    use_llama_pro: bool = opt(False, "LLaMA Pro: train only the expanded blocks of a block-expanded model "
                                     "(freeze_trainable_layers of them, evenly spaced: freeze tuning trains them, "
                                     "LoRA adapts only them).", advanced=True)
    freeze_extra_modules: str | None = opt(None, "Freeze: extra modules trained besides the layers.", advanced=True)
    freeze_vision_tower: bool = opt(True, "Keep the vision tower frozen (multimodal models).", advanced=True)
    freeze_multi_modal_projector: bool = opt(True, "Keep the projectors frozen (multimodal models).", advanced=True)
    freeze_language_model: bool = opt(False, "Keep the language model frozen.", advanced=True)
    pref_beta: float = opt(0.1, "Beta of the preference loss.", min=0.0, max=10.0, step=0.01)
    pref_ftx: float = opt(0.0, "Weight of the SFT loss added to the preference loss.", min=0.0, max=10.0)
    pref_loss: PrefLoss = opt("sigmoid", "Preference loss: sigmoid (DPO), hinge, ipo, orpo or simpo.")
    dpo_label_smoothing: float = opt(0.0, "Label smoothing for the DPO loss.", min=0.0, max=0.5, advanced=True)
    kto_chosen_weight: float = opt(1.0, "KTO weight of desirable examples.", min=0.0, advanced=True)
    kto_rejected_weight: float = opt(1.0, "KTO weight of undesirable examples.", min=0.0, advanced=True)
    simpo_gamma: float = opt(0.5, "SimPO target reward margin.", min=0.0, advanced=True)
    ref_model: str | None = opt(None, "Reference model for DPO/KTO; empty uses the frozen base.", advanced=True)
    plot_loss: bool = opt(True, "Draw loss.png when training ends.")
    compute_accuracy: bool = opt(False, "Evaluation also reports next-token accuracy (eval_accuracy: the mean over "
                                        "rows of each row's share of trained tokens predicted right), as "
                                        "LLaMA-Factory.", advanced=True)
    # GRPO / RLOO (engine/train/rl.py, engine/rewards): rewards, sampling and the KL term
    reward_funcs: str | None = opt(None, "GRPO/RLOO rewards, comma separated: exact_match, numeric_match, format, "
                                   "length, json, tool_call, or `path/to/file.py:function`.")
    reward_weights: str | None = opt(None, "Weights of reward_funcs (and reward_model last), comma separated.")
    reward_model: str | None = opt(None, "GRPO/RLOO: output folder of an `rm` run, used as one more reward.")
    reward_format: str = opt(r"^<think>.*?</think>\s*<answer>.*?</answer>$",
                             "Regular expression the `format` reward matches.", advanced=True)
    reward_min_tokens: int = opt(1, "`length` reward: fewest tokens that earn the full reward.", min=0)
    reward_max_tokens: int = opt(256, "`length` reward: most tokens that earn the full reward.", min=1)
    num_generations: int = opt(8, "GRPO/RLOO: completions sampled per prompt.", min=2, max=1024)
    max_completion_length: int = opt(256, "GRPO/RLOO: most tokens per sampled completion.", min=1, max=131072)
    beta: float | None = opt(None, "GRPO/RLOO KL coefficient; empty uses TRL's (0.0 GRPO, 0.05 RLOO).", min=0.0)
    loss_type: GRPOLoss = opt(None, "GRPO loss; empty uses TRL's default (dapo).", advanced=True)
    log_completions_steps: int = opt(1, "GRPO/RLOO: write sampled completions with rewards every N steps.", min=1)
    use_muon: bool = opt(False, "Muon optimizer for 2-D weight matrices (AdamW for the rest).", advanced=True)


@dataclass
class TrainArgs:
    """The usual Hugging Face training arguments (a typed subset; others pass through)."""

    output_dir: str = opt("saves/run", "Where checkpoints, adapters and logs go.")
    overwrite_output_dir: bool = opt(False, "Allow writing into a non-empty output_dir.")
    do_train: bool = opt(True, "Train.")
    do_eval: bool = opt(False, "Evaluate: eval loss and perplexity.")
    do_predict: bool = opt(False, "Predict on the eval dataset and score it.")
    per_device_train_batch_size: int = opt(8, "Batch size per device.", min=1, max=4096)
    per_device_eval_batch_size: int = opt(8, "Evaluation batch size per device.", min=1, max=4096)
    gradient_accumulation_steps: int = opt(1, "Batches accumulated before an optimizer step.", min=1, max=4096)
    learning_rate: float = opt(5e-5, "Peak learning rate.", min=0.0, max=1.0)
    num_train_epochs: float = opt(3.0, "Epochs over the training data.", min=0.0, max=10_000.0)
    max_steps: int = opt(-1, "Stop after this many optimizer steps (-1: use epochs).", min=-1)
    lr_scheduler_type: Scheduler = opt("linear", "Learning-rate schedule.")
    lr_scheduler_kwargs: str | None = opt(
        None, "Settings of the learning-rate schedule as a mapping (YAML or a JSON object), e.g. "
        "`{\"min_lr_rate\": 0.1}` for cosine_with_min_lr, `{\"num_decay_steps\": 100}` for warmup_stable_decay.",
        advanced=True)
    warmup_ratio: float = opt(0.0, "Fraction of steps spent warming up.", min=0.0, max=1.0, step=0.01)
    warmup_steps: int = opt(0, "Warm-up steps (overrides warmup_ratio when > 0).", min=0)
    weight_decay: float = opt(0.0, "Weight decay.", min=0.0, max=10.0)
    max_grad_norm: float = opt(1.0, "Gradient clipping norm.", min=0.0, max=1000.0)
    optim: str = opt("adamw_torch", "Optimizer name as Hugging Face knows it.", advanced=True)
    logging_steps: int = opt(5, "Log every this many steps.", min=1, max=100_000)
    save_steps: int = opt(100, "Save a checkpoint every this many steps.", min=1, max=1_000_000)
    save_strategy: SaveStrategy = opt("steps", "When checkpoints are saved.")
    save_total_limit: int | None = opt(None, "Keep at most this many checkpoints.", min=1, advanced=True)
    eval_strategy: Strategy = opt("no", "When to evaluate during training.")
    eval_steps: int | None = opt(None, "Evaluate every this many steps.", min=1)
    resume_from_checkpoint: str | None = opt(None, "Checkpoint folder to resume from (or `true` for the last).")
    seed: int = opt(42, "Random seed (numpy takes 0 to 2**32 - 1).", min=0, max=2**32 - 1)
    bf16: bool = opt(False, "Train in bfloat16 mixed precision.")
    fp16: bool = opt(False, "Train in float16 mixed precision.")
    pure_bf16: bool = opt(False, "Keep the weights themselves in bfloat16.", advanced=True)
    gradient_checkpointing: bool = opt(False, "Recompute activations to save memory (slower).")
    group_by_length: bool | None = opt(
        None, "Batch examples of similar length together (less padding). Auto: only where batches cannot be "
        "padding-free (as in LLaMA-Factory, no grouping; with padding-free batches that was also faster).", advanced=True)
    max_tokens_per_batch: int = opt(
        0, "Token-budget batches: as many rows per batch as fit this many tokens (padded tokens, rows x longest "
        "row; with padding-free batches the rows' own tokens; 0: a fixed batch size).",
        min=0, advanced=True)
    max_tokens_per_pass: int | None = opt(
        None, "Padding-free batches run forward and backward over groups of whole rows of at most this many tokens: "
        "the same loss, gradients and steps with less memory (0: the whole batch in one pass; empty: 2048 on the CPU, "
        "one pass on accelerators).", min=0, advanced=True)
    padding_free: bool = opt(
        True, "Lay each batch's rows back to back without padding: the same loss with no work on padding (pt/sft "
        "text models with sdpa attention; others pad as usual).", advanced=True)
    report_to: str = opt("none", "Experiment trackers: none, tensorboard, wandb, ...", advanced=True)
    dataloader_num_workers: int = opt(0, "Data loading worker processes.", min=0, max=MAX_WORKERS, advanced=True)
    ddp_timeout: int = opt(180000000, "Distributed timeout in seconds.", advanced=True)
    deepspeed: str | None = opt(None, "DeepSpeed config file (extra `deepspeed`).", advanced=True)
    fsdp: str | None = opt(None, "FSDP options, e.g. `full_shard auto_wrap`.", advanced=True)
    fsdp_config: str | None = opt(None, "FSDP settings: a JSON file's path, or the settings inline (a YAML mapping "
                                        "or a JSON object).", advanced=True)
    fsdp_transformer_layer_cls_to_wrap: str | None = opt(
        None, "FSDP: the decoder layer classes wrapped as units (comma-separated, e.g. `LlamaDecoderLayer`; default: "
              "the model's own).", advanced=True)
    predict_with_generate: bool = opt(False, "Generate text when predicting (for BLEU/ROUGE).")


@dataclass
class GenerationArgs:
    """Sampling settings for chat and prediction."""

    do_sample: bool = opt(True, "Sample instead of greedy decoding.")
    temperature: float = opt(0.95, "Sampling temperature; 0 decodes greedily.", min=0.0, max=2.0, step=0.01)
    top_p: float = opt(0.7, "Nucleus sampling probability mass.", min=0.01, max=1.0, step=0.01)
    top_k: int = opt(50, "Sample among the k most likely tokens.", min=0, max=1000)
    num_beams: int = opt(1, "Beam search width.", min=1, max=16, advanced=True)
    max_new_tokens: int = opt(1024, "Most tokens generated per reply.", min=1, max=131072)  # LLaMA-Factory's default
    repetition_penalty: float = opt(1.0, "Penalty for repeated tokens.", min=1.0, max=2.0, step=0.01)
    length_penalty: float = opt(1.0, "Beam search length penalty.", advanced=True)
    skip_special_tokens: bool = opt(True, "Hide special tokens in the output.", advanced=True)


@dataclass
class ExportArgs:
    """Merging adapters into a standalone model."""

    export_dir: str | None = opt(None, "Where the merged model is written.")
    export_size: int = opt(5, "Largest shard size in GB.", min=1, max=100)
    export_device: Literal["cpu", "auto"] = opt("cpu", "Device used to merge.")
    export_legacy_format: bool = opt(False, "Write .bin instead of safetensors.")
    export_quantization_bit: int | None = opt(None, "Quantize the export (not supported here).", advanced=True)
    export_hub_model_id: str | None = opt(None, "Push the export to this hub repo.", advanced=True)


from engine.config.methods import MethodArgs  # noqa: E402  (after `opt`, which it uses)


def packs_rows(stage: str, data: Any) -> bool:
    """Whether rows are packed into sequences without attention across them (``position_ids`` restarting per
    row): sft with ``packing`` or ``neat_packing``, pt with ``neat_packing`` (pt's ``packing`` is LLaMA-Factory's
    joining of texts into blocks, see ``engine.data.tokenize.tokenize_pt``)."""
    if stage == "sft":
        return bool(data.packing or data.neat_packing)
    return stage == "pt" and bool(data.neat_packing)


SECTIONS: dict[str, type] = {
    "model": ModelArgs,
    "data": DataArgs,
    "finetuning": FinetuningArgs,
    "train": TrainArgs,
    "generation": GenerationArgs,
    "export": ExportArgs,
    "methods": MethodArgs,
    "parallel": ParallelArgs,
}
