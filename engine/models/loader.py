"""Load a tokenizer and a model for training, chat, evaluation or export.

:func:`load_model` picks the dtype and attention through :mod:`engine.devices`, loads the weights
(quantized with bitsandbytes when asked), applies device kernels, then sets up what trains (LoRA, freeze
or full; :mod:`engine.models.adapters`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import pickle
import re
from pathlib import Path
from typing import Any

import torch

from engine import devices
from engine.errors import ModelError
from engine.models import adapters
from engine.models.adapters import count_parameters
from engine.models.load_report import new_reward_head
from engine.models.registry import DEMO_MODEL_NAME, DEMO_MODEL_PATH, ModelFamily, composite_info
from engine.models.value_head import draw_lf_head, quiet_head_draw

__all__ = [
    "check_quantization", "count_parameters", "load_model", "load_processor", "load_tokenizer", "looks_like_hub_id",
    "resolve_model_path",
]

logger = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
_SKIP_DOWNLOAD = ["*.pth", "*.pt", "*.h5", "*.msgpack", "*.onnx", "*.ot", "*.gguf", "original/*"]

# Composite checkpoints whose trainable part is one sub-model (the "thinker" of the omni models).
_THINKER_MODEL_TYPES = {"qwen2_5_omni", "qwen3_omni_moe"}


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` without a leading ``.``, ``/`` or ``~`` (so ``./org/name`` is a path)."""
    return bool(_HUB_ID.match(name)) and not name.startswith((".", "/", "~")) and ".." not in name


def _from_pretrained(model_cls: Any, path: str, config: Any, kwargs: dict[str, Any], auto_attention: bool = True,
                     ) -> Any:
    """``model_cls.from_pretrained``; a composite model whose encoder lacks the chosen attention (Gemma 4 E's audio
    tower has no SDPA) keeps it for the other parts and gets eager attention in that encoder; a model that lacks it
    altogether (GPT-OSS has no SDPA) loads with eager attention when the choice was ``auto``
    (``auto_attention``), and is refused with the fix when the config asked for it."""
    try:
        return model_cls.from_pretrained(path, **kwargs)
    except ValueError as err:
        attention = kwargs.get("attn_implementation")
        subs = list(getattr(config, "sub_configs", {}) or {})
        if "does not support an attention implementation" not in str(err) or attention == "eager":
            raise
        if not subs:  # the whole model lacks it (GPT-OSS has no SDPA): eager where the choice was ours
            if not auto_attention:
                raise ModelError(f"This model ({getattr(config, 'model_type', '?')}) does not support `{attention}` "
                                 "attention; set `flash_attn: eager` (or `auto`, which picks what it supports).") from None
            logger.info("%s attention is not available in this model (%s); it uses eager attention.", attention,
                        getattr(config, "model_type", "?"))
            return model_cls.from_pretrained(path, **{**kwargs, "attn_implementation": "eager"})
        eager = [key for key in subs if "audio" in key] or subs
        logger.info("%s: %s attention is not available in %s; those use eager attention.", type(err).__name__,
                    attention, ", ".join(eager))
        mixed = {"": attention, **{key: ("eager" if key in eager else attention) for key in subs}}
        try:
            return model_cls.from_pretrained(path, **{**kwargs, "attn_implementation": mixed})
        except ValueError as again:
            if "does not support an attention implementation" not in str(again):
                raise
            logger.warning("The model needs eager attention in several parts; it is loaded with eager attention.")
            return model_cls.from_pretrained(path, **{**kwargs, "attn_implementation": "eager"})


def resolve_model_path(name_or_path: str, cache_dir: str | None = None, revision: str = "main") -> str:
    """Turn ``model_name_or_path`` into a local folder.

    ``demo`` (or ``LF-Demo``) is the built-in demo model, built on first use. An existing folder is used as
    is. A hub id (``org/name``) is taken from the local Hugging Face cache, or downloaded when the network
    is allowed.

    Raises:
        ModelError: The path does not exist, is a file, or the hub model is not available offline.
    """
    text = str(name_or_path or "").strip()
    if not text:
        raise ModelError("`model_name_or_path` is empty; set it to a model folder, a hub id, or `demo`.")
    if text.lower() == "demo-vlm":
        from engine.demo_vlm import ensure_demo_vlm

        return str(ensure_demo_vlm())
    if text.lower() in (DEMO_MODEL_PATH, DEMO_MODEL_NAME.lower()):
        from engine.demo import ensure_demo_model

        return str(ensure_demo_model())
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"Model folder `{text}` has no config.json; point `model_name_or_path` at the folder "
                             "that holds config.json and the weights.")
        return str(path)
    if path.exists():
        raise ModelError(f"`model_name_or_path: {text}` is a file; give the folder that contains it.")
    if not looks_like_hub_id(text):
        from engine.models.web_address import web_address_problem

        raise ModelError(web_address_problem(text) or f"Model path `{text}` does not exist; check the path, or give "
                         "a hub id such as `Qwen/Qwen3-0.6B`, or `demo` for the built-in demo model.")
    from engine.data.hub import use_modelscope, use_openmind

    if use_modelscope() or use_openmind():
        return _from_other_hub(text, cache_dir, revision, "modelscope" if use_modelscope() else "openmind")
    return _from_hub(text, cache_dir, revision)


def _from_other_hub(repo_id: str, cache_dir: str | None, revision: str, hub: str) -> str:
    """A model from ModelScope or Modelers/OpenMind (``use_modelscope_hub`` / ``use_openmind_hub``)."""
    package, key = ("modelscope", "use_modelscope_hub") if hub == "modelscope" else ("openmind_hub", "use_openmind_hub")
    if importlib.util.find_spec(package) is None:
        raise ModelError(f"`{key}: true` needs the `{package.replace('_', '-')}` package to fetch `{repo_id}`: "
                         f"`pip install {package.replace('_', '-')}`, or turn `{key}` off to use Hugging Face.")
    module = importlib.import_module(package)
    try:
        return module.snapshot_download(repo_id, revision=None if revision == "main" else revision,
                                        cache_dir=cache_dir)
    except Exception as err:
        raise ModelError(f"Model `{repo_id}` could not be fetched from {hub} ({type(err).__name__}: "
                         f"{_first_line(err)}); check the name and the network, or give a local folder.") from None


def _from_hub(repo_id: str, cache_dir: str | None, revision: str) -> str:
    from huggingface_hub import snapshot_download

    fix = (f"not found locally and no network: download it with `hf download {repo_id} --local-dir "
           f"<folder>` on a machine with access and set model_name_or_path to the folder.")
    try:
        return snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True,
                                 ignore_patterns=_SKIP_DOWNLOAD)
    except Exception as err:  # not cached (LocalEntryNotFoundError) or a partial snapshot
        logger.debug("%s is not in the local cache: %s", repo_id, err)
    from engine.hub_reach import downloads_off, endpoint, unreachable

    if downloads_off():
        raise ModelError(f"Model `{repo_id}` {fix} (HF_HUB_OFFLINE is set)")

    if reason := unreachable():  # in seconds, not after the download's retries (engine.hub_reach)
        raise ModelError(f"Model `{repo_id}` {fix} (the hub {endpoint()} cannot be reached: {reason})")
    try:
        return snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, ignore_patterns=_SKIP_DOWNLOAD)
    except Exception as err:
        kind = type(err).__name__
        if kind in ("GatedRepoError", "RepositoryNotFoundError", "RevisionNotFoundError"):
            raise ModelError(f"Model `{repo_id}` (revision {revision}) cannot be downloaded ({kind}): check the "
                             "name, or log in with `hf auth login` for gated models.") from None
        raise ModelError(f"Model `{repo_id}` {fix} ({kind})") from None


def _adapter_holds(adapter: str | None, names: list[str]) -> bool:
    """Whether the (first) adapter's weights hold the modules of ``names`` (an rm run's LoRA saves its value head
    with it, as ``modules_to_save``)."""
    if not adapter:
        return False
    path = Path(str(adapter).split(",")[0]).expanduser() / "adapter_model.safetensors"
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            keys = list(handle.keys())
    except Exception:  # noqa: BLE001 - no readable adapter file: the adapter load names the problem
        return False
    stems = {name.rsplit(".", 1)[0] for name in names}  # score.weight -> score
    return all(any(f".{stem}." in f".{key}" for key in keys) for stem in stems)


def _first_line(err: BaseException) -> str:
    """The first line of a library error's message, ending with a full stop."""
    text = str(err).strip().splitlines()[0].strip() if str(err).strip() else type(err).__name__
    return text if text.endswith((".", "!", "?")) else text + "."


def load_tokenizer(model_args: Any, *, padding_side: str = "right"):
    """The model's tokenizer, padded on the right (training) unless asked otherwise; pad set from eos/unk."""
    from transformers import AutoTokenizer

    path = resolve_model_path(model_args.model_name_or_path, model_args.cache_dir, model_args.model_revision)
    kwargs: dict[str, Any] = {"trust_remote_code": model_args.trust_remote_code, "padding_side": padding_side}
    if model_args.split_special_tokens:
        kwargs["split_special_tokens"] = True
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, use_fast=model_args.use_fast_tokenizer, **kwargs)
    except (OSError, ValueError) as err:
        if "trust_remote_code" in str(err) and not model_args.trust_remote_code:
            raise ModelError(f"The tokenizer of `{model_args.model_name_or_path}` ships its own code; set "
                             "`trust_remote_code: true` if you trust it.") from None
        raise ModelError(f"The tokenizer of `{model_args.model_name_or_path}` cannot be loaded from {path}: "
                         f"{_first_line(err)} The folder needs the tokenizer files saved with the model "
                         "(tokenizer.json, or tokenizer.model / vocab.json with tokenizer_config.json).") from None
    tokenizer.padding_side = padding_side
    if tokenizer.pad_token is None:
        fallback = tokenizer.eos_token or tokenizer.unk_token
        if fallback is None:
            raise ModelError(f"The tokenizer of `{model_args.model_name_or_path}` has no pad, eos or unk token; "
                             "set one in its tokenizer_config.json.")
        tokenizer.pad_token = fallback
        logger.info("Pad token set to %s.", fallback)
    _add_tokens(tokenizer, model_args)
    return tokenizer


def _add_tokens(tokenizer: Any, model_args: Any) -> None:
    """``add_tokens`` then ``add_special_tokens`` (comma-separated) into the vocabulary, as LLaMA-Factory adds them
    (so they get its ids); ``tokenizer.lf_added_tokens`` counts the new ones (the embeddings then grow)."""
    added = 0
    for key, special in (("add_tokens", False), ("add_special_tokens", True)):
        value = getattr(model_args, key, None)
        tokens = [token.strip() for token in str(value).split(",")] if value else []
        if tokens:
            added += tokenizer.add_tokens(new_tokens=tokens, special_tokens=special)
            logger.info("Added %s %s to the tokenizer's vocabulary.", "special tokens" if special else "tokens",
                        ", ".join(tokens))
    tokenizer.lf_added_tokens = added


def load_processor(model_args: Any):
    """The multimodal processor of a composite model, or None for a text-only model."""
    from transformers import AutoProcessor

    path = resolve_model_path(model_args.model_name_or_path, model_args.cache_dir, model_args.model_revision)
    try:
        processor = AutoProcessor.from_pretrained(path, trust_remote_code=model_args.trust_remote_code)
    except (OSError, ValueError, TypeError, KeyError) as err:
        logger.debug("No processor for %s: %s", path, err)
        return None
    return processor if hasattr(processor, "tokenizer") else None


def _requested_dtype(model_args: Any, train_args: Any, is_trainable: bool) -> str:
    """The load dtype: a training job's precision, also for the frozen models it loads beside the trained one (a
    reference model, an evaluation-only run), so they compute in the policy's precision (bf16 / fp16 win; without
    them a frozen model takes ``infer_dtype``); without training arguments (chat, export) ``infer_dtype``."""
    infer = getattr(model_args, "infer_dtype", "auto") or "auto"
    mixed = train_args is not None and any(getattr(train_args, key, False) for key in ("pure_bf16", "bf16", "fp16"))
    if train_args is not None and (is_trainable or mixed or infer == "auto"):
        if getattr(train_args, "pure_bf16", False):
            return "pure_bf16"
        if getattr(train_args, "bf16", False):
            return "bfloat16"
        if getattr(train_args, "fp16", False):
            return "float16"
        return "auto"
    return infer


def check_quantization(bits: int) -> None:
    """Refuse ``quantization_bit`` where bitsandbytes cannot run (no GPU, or the package is missing).

    Raises:
        ModelError: naming the reason and the fix.
    """
    acc = devices.get_accelerator()
    if acc.type not in ("cuda", "xpu", "npu"):
        raise ModelError(f"`quantization_bit: {bits}` (bitsandbytes) needs a GPU; {acc.label} cannot run it. "
                         "Remove `quantization_bit` to train in full precision.")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelError(f"`quantization_bit: {bits}` needs the `bitsandbytes` package; install the extra "
                         "`pip install lf-board[bitsandbytes]` or remove `quantization_bit`.")


def _quantization_config(bits: int, dtype: torch.dtype, quant_type: str = "nf4", double_quant: bool = True):
    check_quantization(bits)
    from transformers import BitsAndBytesConfig

    if bits == 8:
        return BitsAndBytesConfig(load_in_8bit=True)
    if bits == 4:
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype,
                                  bnb_4bit_use_double_quant=double_quant, bnb_4bit_quant_type=quant_type,
                                  bnb_4bit_quant_storage=dtype)
    raise ModelError(f"`quantization_bit: {bits}` is not supported; use 4 or 8.")


def _model_class(config: Any, reward: bool):
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForSequenceClassification
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES,
        MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", "")
    if reward:
        return AutoModelForSequenceClassification
    if model_type in _THINKER_MODEL_TYPES and model_type in MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES:
        return getattr(transformers, MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES[model_type])
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and getattr(config, "vision_config", None):
        return AutoModelForImageTextToText
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or "AutoModelForCausalLM" in (
            getattr(config, "auto_map", None) or {}):
        return AutoModelForCausalLM
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return AutoModelForImageTextToText
    if model_type in MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES and getattr(config, "audio_config", None):
        return getattr(transformers, MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES[model_type])  # audio-text (Qwen2-Audio)
    raise ModelError(f"Model type `{model_type}` is not a text-generation model that transformers can load; "
                     "choose a causal language model or a vision-language model.")


def _apply_kernels(model: Any, model_args: Any) -> None:
    if model_args.use_unsloth:
        devices.check_kernel_booster("unsloth")  # always raises with the reason
    if model_args.enable_liger_kernel and devices.check_kernel_booster("liger"):
        try:
            from liger_kernel.transformers import _apply_liger_kernel_to_instance
        except ImportError as err:
            raise ModelError(f"Liger kernels could not be imported ({err}); update `liger-kernel` or set "
                             "`enable_liger_kernel: false`.") from None
        _apply_liger_kernel_to_instance(model=model)
        logger.info("Liger kernels applied.")
    from engine.models.kernels import apply_fused_rms_norm, use_rms_norm_node

    if devices.get_accelerator().type == "supa":
        apply_fused_rms_norm(model, device_type="supa")
    use_rms_norm_node(model)  # training steps: each RMSNorm as one autograd node (eager forward otherwise)


def load_model(model_args: Any, finetuning_args: Any, tokenizer: Any = None, *, is_trainable: bool,
               train_args: Any = None, merge_adapters: bool = True, task: str | None = None,
               methods: Any = None, max_length: int | None = None):
    """Load the model and prepare it for training or inference.

    Args:
        model_args: :class:`engine.config.ModelArgs`.
        finetuning_args: :class:`engine.config.FinetuningArgs` (method, LoRA and freeze settings).
        tokenizer: The tokenizer, to resize embeddings (``resize_vocab``) and set the pad id.
        is_trainable: Set up trainable parameters (LoRA, freeze or full) for training; otherwise the model is
            frozen, in eval mode and moved to the current device.
        train_args: :class:`engine.config.TrainArgs` (precision and gradient checkpointing), for training.
        merge_adapters: For inference, merge every adapter (False keeps the last one as a PEFT adapter).
        task: ``"causal_lm"`` or ``"reward"`` (a sequence-classification model with one output); by default
            ``reward`` when training with ``stage: rm``.
        methods: :class:`engine.config.methods.MethodArgs` (RoPE scaling, PiSSA iterations, OFT settings).
        max_length: The training length (``cutoff_len``) for RoPE scaling; None for inference.

    Returns:
        The model (a ``PeftModel`` when a LoRA adapter is trained or kept); for the reward task a sequence
        classification model with one output.
    """
    from transformers import AutoConfig

    path = resolve_model_path(model_args.model_name_or_path, model_args.cache_dir, model_args.model_revision)
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=model_args.trust_remote_code)
    except (OSError, ValueError) as err:
        if "trust_remote_code" in str(err) and not model_args.trust_remote_code:
            raise ModelError(f"`{model_args.model_name_or_path}` ships its own model code; set "
                             "`trust_remote_code: true` if you trust it.") from None
        raise ModelError(f"The config.json of `{model_args.model_name_or_path}` cannot be read: {_first_line(err)} "
                         "Check that the folder holds a complete Hugging Face model (or update transformers for "
                         "a newer architecture).") from None
    if methods is not None and methods.rope_scaling:
        from engine.models.rope import configure_rope

        configure_rope(getattr(config, "text_config", None) or config, methods.rope_scaling, max_length)
    requested = _requested_dtype(model_args, train_args, is_trainable)
    dtype = devices.choose_dtype(requested, for_training=is_trainable)
    attention = devices.pick_attention(model_args.attn_implementation or model_args.flash_attn)
    if task not in (None, "causal_lm", "reward"):
        raise ValueError(f"Unknown task `{task}`; use `causal_lm` or `reward`.")
    reward = task == "reward" or (task is None and is_trainable and finetuning_args.stage == "rm")
    # use_kernels=False: transformers 5.25 otherwise "kernelizes" the model from the Hugging Face hub by default
    # (downloads and runs compiled layers where the hub is reachable) and re-kernelizes on every train()/eval()
    # switch, which puts each decorated layer's class forward back and so silently undid this loader's own kernels
    # (the RMSNorm node, Biren SUPA's fused RMSNorm) as soon as the model was set to train
    kwargs: dict[str, Any] = {"config": config, "dtype": dtype, "attn_implementation": attention,
                              "trust_remote_code": model_args.trust_remote_code, "use_kernels": False}
    quantized = bool(model_args.quantization_bit)
    if quantized:
        kwargs["quantization_config"] = _quantization_config(
            model_args.quantization_bit, dtype, getattr(model_args, "quantization_type", "nf4"),
            getattr(model_args, "double_quantization", True))
        kwargs["device_map"] = {"": devices.current_device()}
    if reward:
        config.num_labels = 1
    try:
        with new_reward_head(reward) as new_head, quiet_head_draw(reward and is_trainable):
            model = _from_pretrained(_model_class(config, reward), path, config, kwargs,
                                     auto_attention=devices.attention_is_auto(model_args.attn_implementation
                                                                              or model_args.flash_attn))
    except pickle.UnpicklingError:  # torch's own text advises weights_only=False, which would run that code
        raise ModelError(f"The weights of `{model_args.model_name_or_path}` are a pickle that holds more than "
                         "tensors: loading them would run code they carry, so they were not loaded (a file from "
                         "elsewhere, or damaged). Use the model's model.safetensors from its original source.") from None
    except OSError as err:  # no weight files, or damaged ones
        raise ModelError(f"The weights of `{model_args.model_name_or_path}` cannot be loaded: {_first_line(err)} "
                         "The folder needs model.safetensors (or its shards with model.safetensors.index.json) "
                         "beside config.json.") from None
    fresh_head = bool(new_head) and not _adapter_holds(model_args.adapter_name_or_path, new_head)
    if fresh_head:
        logger.info("Reward model: the value head (%s) is not in the checkpoint and starts from new weights; "
                    "reward training learns it.", ", ".join(new_head))
    if getattr(config, "model_type", "") in _THINKER_MODEL_TYPES and hasattr(model, "thinker"):
        model = model.thinker
    if tokenizer is not None:
        _align_with_tokenizer(model, tokenizer)
    _apply_kernels(model, model_args)
    composite = composite_info(model)
    if composite is not None and quantized:
        adapters.add_projector_cast_hooks(model, composite, dtype)
    model = _setup_training(model, model_args, finetuning_args, composite, is_trainable=is_trainable,
                            train_args=train_args, quantized=quantized, merge_adapters=merge_adapters,
                            methods=methods)
    if reward and is_trainable:  # LLaMA-Factory's value head, drawn once the adapters are made
        draw_lf_head(model, new=fresh_head)
    if is_trainable:
        if requested == "pure_bf16":  # PEFT creates adapters in float32; pure bf16 keeps everything in bf16
            for param in model.parameters():
                if param.requires_grad and param.dtype == torch.float32:
                    param.data = param.data.to(torch.bfloat16)
        else:
            adapters.upcast_trainable_params(model)
        model.train()
    else:
        model.requires_grad_(False)
        model.eval()
        if not quantized:
            model.to(devices.current_device())
    trainable, total = count_parameters(model)
    logger.info("Loaded %s (%s, %s attention): %s trainable of %s parameters (%.4f%%).", path,
                str(dtype).removeprefix("torch."), attention, f"{trainable:,}", f"{total:,}",
                100 * trainable / max(total, 1))
    return model


def _align_with_tokenizer(model: Any, tokenizer: Any) -> None:
    """Give every token of the tokenizer an embedding row, and the model the tokenizer's pad id.

    Tokens a template added (stop words, turn markers) need rows whether or not ``resize_vocab`` is set: an
    adapter trained with them holds those rows, and at inference the chat template writes them.
    """
    current = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > current:
        # transformers' mean resizing, as LLaMA-Factory calls it: the new rows are overwritten below, but the draws
        # made for them move the random stream that the value head and the LoRA matrices are drawn from next
        model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)
        absent = _absent_lm_head(model, current)
        if absent is not None:
            absent.resize()
        _noisy_mean_rows(model, current)
        if absent is not None:
            absent.noise()
        model._lf_new_token_ids = list(range(current, len(tokenizer)))
        logger.info("Resized embeddings from %d to %d tokens.", current, len(tokenizer))
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    generation = getattr(model, "generation_config", None)
    if generation is not None and generation.pad_token_id is None and tokenizer.pad_token_id is not None:
        generation.pad_token_id = tokenizer.pad_token_id


class _AbsentLMHead:
    """The draws LLaMA-Factory makes for the new rows of the untied lm_head its rm model has (a causal LM under a
    value head) where ours has none (a sequence classifier): made and thrown away, the values unused by rm either
    way, so that the draws after them (value head, LoRA) come from the same point of the random stream."""

    def __init__(self, weight: torch.Tensor, old_rows: int) -> None:
        self.weight, self.old_rows = weight, old_rows
        self.added = weight.shape[0] - old_rows

    def resize(self) -> None:
        """transformers' lm_head resize: a new ``nn.Linear`` (its default init), then, where the old rows'
        covariance is positive definite, one multivariate normal draw per new row. The old lm_head is not loaded
        here; the input embeddings' covariance stands in for its own in that check."""
        from torch.distributions import constraints

        weight = self.weight
        torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
        old = weight.detach()[: self.old_rows].float()
        centered = old - old.mean(dim=0)
        if constraints.positive_definite.check(1e-9 * (centered.T @ centered / self.old_rows)).all():
            torch.empty(self.added, weight.shape[1], device=weight.device).normal_()

    def noise(self) -> None:
        """LLaMA-Factory's noise_init of the head's new rows (:func:`_noisy_mean_rows`)."""
        torch.empty(self.added, self.weight.shape[1], device=self.weight.device, dtype=self.weight.dtype).normal_()


def _absent_lm_head(model: Any, old_rows: int) -> _AbsentLMHead | None:
    """:class:`_AbsentLMHead` for a sequence classifier (ours for rm) whose config unties the embeddings."""
    if (not type(model).__name__.endswith("ForSequenceClassification") or model.get_output_embeddings() is not None
            or getattr(model.config, "tie_word_embeddings", False)):
        return None
    return _AbsentLMHead(model.get_input_embeddings().weight, old_rows)


def _noisy_mean_rows(model: Any, old_rows: int) -> None:
    """LLaMA-Factory's ``noise_init`` of the rows a resize added (input embeddings, and output ones when untied):
    the mean of the old rows plus Gaussian noise of standard deviation 1/sqrt(hidden size)."""
    import math

    import torch

    matrices = [model.get_input_embeddings()]
    output = model.get_output_embeddings()
    if output is not None and not getattr(model.config, "tie_word_embeddings", False):
        matrices.append(output)
    with torch.no_grad():
        for module in matrices:
            weight = module.weight.data
            if weight.shape[0] <= old_rows:
                continue
            noise = torch.empty_like(weight[old_rows:]).normal_(mean=0, std=1.0 / math.sqrt(weight.shape[1]))
            weight[old_rows:] = weight[:old_rows].mean(dim=0, keepdim=True) + noise


def _enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant, so frozen inputs need no grad hooks)."""
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _setup_training(model: Any, model_args: Any, finetuning_args: Any, composite: ModelFamily | None, *,
                    is_trainable: bool, train_args: Any, quantized: bool, merge_adapters: bool,
                    methods: Any = None) -> Any:
    method = finetuning_args.finetuning_type
    if model_args.adapter_name_or_path and method not in ("lora", "oft"):
        raise ModelError(f"`adapter_name_or_path` needs `finetuning_type: lora` or `oft` (this config has `{method}`); "
                         "a freeze or full run saves a whole model: set model_name_or_path to it instead.")
    if quantized and method not in ("lora", "oft"):
        raise ModelError("`quantization_bit` works with `finetuning_type: lora` (QLoRA) or `oft` only.")
    if is_trainable:
        gradient_checkpointing = bool(getattr(train_args, "gradient_checkpointing", False))
        if quantized:
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)
        elif gradient_checkpointing:
            _enable_checkpointing(model)
        if getattr(model, "config", None) is not None:
            model.config.use_cache = False
        if method == "full":
            adapters.setup_full(model, finetuning_args, composite)
        elif method == "freeze":
            adapters.setup_freeze(model, finetuning_args, composite)
    if method == "lora":
        model = adapters.setup_lora(model, model_args, finetuning_args, composite, is_trainable=is_trainable,
                                    merge_adapters=merge_adapters, quantized=quantized,
                                    pissa_iter=methods.pissa_iter if methods is not None else 16)
    elif method == "oft":
        from engine.config.methods import MethodArgs
        from engine.models.peft_methods import setup_oft

        model = setup_oft(model, model_args, finetuning_args, methods or MethodArgs(), composite,
                          is_trainable=is_trainable, merge_adapters=merge_adapters, quantized=quantized)
    return model

