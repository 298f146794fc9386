"""Which parameters train: LoRA (PEFT), freeze (the last or first N layers) and full fine-tuning.

Module keys (projectors, encoder towers, LoRA conflicts) come from :mod:`engine.models.registry`; a key
matches a module when it equals a run of whole dotted components of the module's name, so
``visual.merger`` matches ``model.visual.merger`` but not ``model.prevvisual.merger``.
"""

from __future__ import annotations

import ast
import logging
import pickle
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from engine.checkpoints import trained_template
from engine.errors import ModelError
from engine.models.registry import ModelFamily

logger = logging.getLogger(__name__)

HEAD_KEYS = ("lm_head", "score", "classifier", "v_head", "output_layer")
"""Output heads never given LoRA by ``lora_target: all``."""


def key_matches(name: str, key: str) -> bool:
    """Whether ``key`` is a run of whole dotted components inside the module or parameter ``name``."""
    return f".{key}." in f".{name}."


def _matches_any(name: str, keys: Iterable[str]) -> bool:
    return any(key_matches(name, key) for key in keys)


def split_names(value: str | None) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]`` (empty entries dropped)."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _is_linear(module: nn.Module) -> bool:
    if isinstance(module, nn.Linear):  # bitsandbytes' Linear4bit / Linear8bitLt subclass it
        return True
    return type(module).__name__ == "Conv1D"  # GPT-2 style transformers.pytorch_utils.Conv1D


def _embedding_names(model: nn.Module) -> set[str]:
    targets = []
    for getter in ("get_input_embeddings", "get_output_embeddings"):
        fn = getattr(model, getter, None)
        try:
            module = fn() if fn else None
        except (NotImplementedError, AttributeError):
            module = None
        if module is not None:
            targets.append(module)
    return {name for name, module in model.named_modules() if any(module is t for t in targets)}


def present_projectors(model: nn.Module, composite: ModelFamily | None) -> list[str]:
    """Full names of the composite model's projector modules; a missing one is skipped with a warning."""
    if composite is None:
        return []
    names = [name for name, _ in model.named_modules()]
    found: list[str] = []
    for key in composite.projector_keys:
        hits = [n for n in names if n == key or n.endswith("." + key)]
        if not hits:
            logger.warning("%s model has no `%s` module; that projector is skipped.", composite.name, key)
        found.extend(hits)
    return found


def _excluded_keys(composite: ModelFamily | None, finetuning_args: Any) -> list[str]:
    if composite is None:
        return []
    keys = list(composite.projector_keys) + list(composite.lora_conflict_keys)
    if getattr(finetuning_args, "freeze_vision_tower", True):
        keys += list(composite.vision_keys)
    if getattr(finetuning_args, "freeze_language_model", False):
        keys += list(composite.language_keys)  # lm_head too, as LLaMA-Factory does
    return keys


def find_all_linear_modules(model: nn.Module, composite: ModelFamily | None = None,
                            finetuning_args: Any = None) -> list[str]:
    """The LoRA targets of ``lora_target: all``: every linear layer of the transformer blocks.

    Excluded: the output head and embeddings, every projector of a composite model, its encoder towers
    when ``freeze_vision_tower``, and its LoRA conflict modules.

    Returns:
        Short module names (``q_proj``, ...) when they select exactly those layers, otherwise full names.
    """
    excluded = _excluded_keys(composite, finetuning_args) + list(HEAD_KEYS)
    embeddings = _embedding_names(model)
    allowed, others = set(), set()
    for name, module in model.named_modules():
        if not _is_linear(module):
            continue
        if name in embeddings or _matches_any(name, excluded):
            others.add(name)
        else:
            allowed.add(name)
    if not allowed:
        raise ModelError("`lora_target: all` found no linear layers in this model; name the modules in "
                         "`lora_target` (for example `q_proj,v_proj`).")
    short = {name.split(".")[-1] for name in allowed}
    # Excluded modules of any type count: a vision tower may wrap its linears (Gemma 4's clippable q_proj).
    others |= {name for name, _ in model.named_modules() if name and _matches_any(name, excluded)}
    if any(name.split(".")[-1] in short for name in others):
        return sorted(allowed)  # a short name would also catch an excluded layer: use full names
    return sorted(short)


def _check_module_names(model: nn.Module, names: list[str], what: str) -> None:
    all_names = [n for n, _ in model.named_modules() if n]
    missing = [key for key in names if not any(n == key or key_matches(n, key) for n in all_names)]
    if missing:
        leaf = sorted({n.split(".")[-1] for n, m in model.named_modules() if n and _is_linear(m)})
        raise ModelError(f"`{what}` names modules this model does not have: {', '.join(missing)}. Linear layers "
                         f"here: {', '.join(leaf) or 'none'}; or use `all`.")


def lora_config(model: nn.Module, finetuning_args: Any, composite: ModelFamily | None = None,
                resize_vocab: bool = False, pissa_iter: int = 16):
    """A PEFT ``LoraConfig`` built from the finetuning arguments (PiSSA with ``pissa_iter`` fast-SVD steps; -1 exact)."""
    from peft import LoraConfig, TaskType

    target = finetuning_args.lora_target.strip()
    if target.lower() in ("all", "all-linear", ""):
        targets = find_all_linear_modules(model, composite, finetuning_args)
    else:
        targets = split_names(target)
        _check_module_names(model, targets, "lora_target")
    if getattr(finetuning_args, "use_llama_pro", False):  # LoRA on the expanded blocks only, as LLaMA-Factory
        prefix, num_layers = _decoder_layers(model, composite)
        blocks = tuple(f"{prefix}.{i}." for i in llama_pro_layers(num_layers, finetuning_args.freeze_trainable_layers))
        wanted = list(targets)
        targets = [name for name, module in model.named_modules() if name.startswith(blocks) and _is_linear(module)
                   and any(target in name for target in wanted)]
    to_save = split_names(finetuning_args.additional_target)
    if to_save:
        _check_module_names(model, to_save, "additional_target")
    token_indices = None
    new_ids = list(getattr(model, "_lf_new_token_ids", []) or [])
    if resize_vocab and new_ids and not to_save:
        # Only the rows of the tokens the template added are trained (PEFT trainable tokens), not the whole
        # embedding and output matrices: far fewer trainable parameters and a much cheaper optimizer step.
        token_indices = {name.split(".")[-1]: new_ids for name in sorted(_embedding_names(model))}
    elif resize_vocab:
        to_save += sorted({name.split(".")[-1] for name in _embedding_names(model)} - set(to_save))
    if composite is not None and not finetuning_args.freeze_multi_modal_projector:
        to_save += [p for p in _saveable(model, present_projectors(model, composite)) if p not in to_save]
    is_reward = type(model).__name__.endswith("ForSequenceClassification")
    if is_reward:
        to_save += [key for key in HEAD_KEYS if hasattr(model, key) and key not in to_save]
    alpha = finetuning_args.lora_alpha or finetuning_args.lora_rank * 2
    return LoraConfig(
        task_type=TaskType.SEQ_CLS if is_reward else TaskType.CAUSAL_LM,
        r=finetuning_args.lora_rank,
        lora_alpha=alpha,
        lora_dropout=finetuning_args.lora_dropout,
        target_modules=targets,
        use_rslora=finetuning_args.use_rslora,
        use_dora=finetuning_args.use_dora,
        init_lora_weights=(("pissa" if pissa_iter == -1 else f"pissa_niter_{pissa_iter}")
                           if getattr(finetuning_args, "pissa_init", False) else True),
        modules_to_save=to_save or None,
        trainable_token_indices=token_indices,
    )


def _saveable(model: nn.Module, names: list[str]) -> list[str]:
    """Module names PEFT can wrap as modules_to_save: a ModuleList (Qwen3-VL's deepstack mergers) by its items."""
    modules = dict(model.named_modules())
    out: list[str] = []
    for name in names:
        module = modules.get(name)
        if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
            out += [f"{name}.{child}" for child, _ in module.named_children()]
        else:
            out.append(name)
    return out


def _check_adapter(path: str) -> None:
    folder = Path(path).expanduser()
    if not (folder / "adapter_config.json").is_file():
        where = "does not exist" if not folder.exists() else "has no adapter_config.json"
        raise ModelError(f"Adapter `{path}` {where}; set `adapter_name_or_path` to a folder saved by a LoRA run "
                         "(its output_dir or a checkpoint inside it).")


def _adapter_config(path: str) -> dict[str, Any]:
    """The adapter's adapter_config.json ({} when unreadable)."""
    from engine.checkpoints import read_adapter_config

    return read_adapter_config(path)


def _adapter_base(path: str) -> str:
    """The base model an adapter was trained on, as its adapter_config.json records it ("" if unknown)."""
    return str(_adapter_config(path).get("base_model_name_or_path") or "")


def _check_token_rows(model: nn.Module, path: str) -> None:
    """Refuse an adapter that trained embedding rows for tokens this tokenizer does not have (another template)."""
    indices = _adapter_config(path).get("trainable_token_indices")
    if isinstance(indices, dict):
        indices = [i for values in indices.values() for i in values]
    rows = model.get_input_embeddings().weight.shape[0] if hasattr(model, "get_input_embeddings") else None
    if not indices or rows is None or max(indices) < rows:
        return
    template = trained_template(path)
    use = f"`template: {template}`, the one it was trained with" if template else "the template it was trained with"
    raise ModelError(f"Adapter `{path}` trained embedding rows for tokens its template added (ids up to "
                     f"{max(indices)}), but with the chosen template the model has only {rows} token rows: the "
                     f"template differs from training. Use {use}.")


def _load_adapter(model: nn.Module, path: str, *, is_trainable: bool) -> nn.Module:
    """``PeftModel.from_pretrained``, with an adapter made for another model reported as a user error."""
    from peft import PeftModel

    _check_token_rows(model, path)
    if _adapter_config(path).get("task_type") == "SEQ_CLS" and not type(model).__name__.endswith(
            "ForSequenceClassification"):
        logger.warning("Adapter `%s` is a reward model's (stage rm): on this language model only its LoRA weights "
                       "apply and its score head is left out, so replies are not what it was trained for. Use it as "
                       "`reward_model`, or export it (a reward model) to score with it.", path)
    init = str(_adapter_config(path).get("init_lora_weights", ""))
    if not is_trainable and init.startswith("pissa"):
        raise ModelError(f"Adapter `{path}` is an unconverted PiSSA adapter (a checkpoint): its weights only fit the "
                         "base model as PiSSA changed it during training, so loading it here would give wrong "
                         "outputs. Use the run's output_dir (the final adapter is saved converted to LoRA), or "
                         "resume training from this checkpoint.")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = PeftModel.from_pretrained(model, path, is_trainable=is_trainable)
    except pickle.UnpicklingError:  # torch's own text advises weights_only=False, which would run that code
        raise ModelError(f"Adapter `{path}` holds an adapter_model.bin that is more than tensors: loading it would "
                         "run code it carries, so it was not loaded (a file from elsewhere, or damaged). Use an "
                         "adapter your own run saved (adapter_model.safetensors), or remove `adapter_name_or_path`."
                         ) from None
    except RuntimeError as err:
        if "size mismatch" not in str(err):
            raise
        first = next((line.strip() for line in str(err).splitlines() if "size mismatch" in line), "")
        base = _adapter_base(path)
        made_for = f" It was trained on `{base}`." if base else ""
        raise ModelError(
            f"Adapter `{path}` does not fit this model: its weight shapes differ ({first.rstrip('.')}).{made_for} "
            "Set `model_name_or_path` to the base model the adapter was trained on, or remove "
            "`adapter_name_or_path`."
        ) from None
    _check_loaded(loaded, path, caught)
    return loaded


MISSING_KEYS = "Found missing adapter keys while loading the checkpoint: "  # PEFT's wording (its tests pin it)


def _check_loaded(model: nn.Module, path: str, caught: list[warnings.WarningMessage]) -> None:
    """Refuse an adapter none of whose weights landed in the model (its layers have other names: another model
    family), which PEFT only warns about: the adapter would silently be the untrained one. A partial fit is a
    warning naming how much is missing. Other warnings are passed on."""
    missing: list[str] = []
    for caught_warning in caught:
        text = str(caught_warning.message)
        if MISSING_KEYS in text:
            try:
                missing = list(ast.literal_eval(text[text.index("["):text.rindex("]") + 1]))
                continue
            except (ValueError, SyntaxError):
                pass
        warnings.warn_explicit(caught_warning.message, caught_warning.category, caught_warning.filename,
                               caught_warning.lineno)
    if not missing:
        return
    adapter_name = "default"
    expected = [name for name, _ in model.named_parameters()
                if f".{adapter_name}." in name or name.endswith(f".{adapter_name}")]  # trainable token rows end so
    base = _adapter_base(path)
    made_for = f" It was trained on `{base}`." if base else ""
    if len(missing) >= len(expected):
        raise ModelError(
            f"Adapter `{path}` does not fit this model: none of its weights match a layer of this model (the "
            f"{len(missing)} weights this model takes are named like `{_short(missing[0])}`; the adapter has none "
            f"of them).{made_for} "
            "Set `model_name_or_path` to the base model the adapter was trained on, or remove "
            "`adapter_name_or_path`.")
    logger.warning("Adapter `%s` fits this model only in part: %d of its %d weights have no layer here and stay as "
                   "initialised (e.g. `%s`).%s", path, len(missing), len(expected), _short(missing[0]), made_for)


def _short(key: str) -> str:
    return key.removeprefix("base_model.model.")


def setup_lora(model: nn.Module, model_args: Any, finetuning_args: Any, composite: ModelFamily | None = None, *,
               is_trainable: bool, merge_adapters: bool = True, quantized: bool = False,
               new_adapter_config: Any = None, pissa_iter: int = 16) -> nn.Module:
    """Load the adapters of ``adapter_name_or_path`` and, for training, add or resume a LoRA adapter.

    Training: every adapter but the last is merged and the last one resumes training (all are merged and a
    new adapter starts when ``create_new_adapter``). Inference: all are merged, or the last one is kept
    separate when ``merge_adapters`` is False (always on a quantized model, which cannot be merged into).
    ``new_adapter_config(model)`` builds the config of a new adapter of another PEFT method (OFT); LoRA by default.
    """
    from peft import get_peft_model

    adapters = split_names(model_args.adapter_name_or_path)
    for path in adapters:
        _check_adapter(path)
    if is_trainable and not finetuning_args.create_new_adapter:
        to_merge, resume = adapters[:-1], (adapters[-1] if adapters else None)
    elif not is_trainable and adapters and (not merge_adapters or quantized):
        to_merge, resume = adapters[:-1], adapters[-1]
    else:
        to_merge, resume = adapters, None
    if to_merge and quantized:
        raise ModelError("Adapters cannot be merged into a quantized model: give one adapter in "
                         "`adapter_name_or_path`, or merge them first with `lf-engine export`.")
    for path in to_merge:
        model = _load_adapter(model, path, is_trainable=False).merge_and_unload()
        logger.info("Merged adapter %s.", path)
    if resume is not None:
        model = _load_adapter(model, resume, is_trainable=is_trainable)
        logger.info("Loaded adapter %s%s.", resume, " (training continues)" if is_trainable else "")
    elif is_trainable:
        if new_adapter_config is not None:
            config = new_adapter_config(model)
        else:
            config = lora_config(model, finetuning_args, composite, resize_vocab=bool(model_args.resize_vocab),
                                 pissa_iter=pissa_iter)
        linear = sorted({n.split(".")[-1] for n, m in model.named_modules() if n and _is_linear(m)})  # before PEFT
        try:
            model = get_peft_model(model, config)
        except ValueError as err:
            refused = _unsupported_target(model, config.target_modules, err, linear)
            if refused is None:
                raise
            raise ModelError(refused) from None
        size = (f"rank {config.r}" if getattr(config, "r", 0) or not getattr(config, "oft_block_size", 0)
                else f"block size {config.oft_block_size}")  # OFT gives one of r and oft_block_size (the other 0)
        logger.info("%s %s on %s.", config.peft_type.value, size, ", ".join(sorted(config.target_modules)))
    from engine.models.lora_fused import use_fused_lora
    from engine.models.mlp_fused import use_fused_mlp
    from engine.models.token_rows import expose_head_bias, use_sparse_token_rows

    expose_head_bias(model)  # TRL's fused output head reads it (DPO, KTO, GRPO, RLOO)
    use_sparse_token_rows(model)  # trained token rows without rebuilding the full matrices on every forward
    use_fused_lora(model)  # one autograd node per LoRA linear, adds fused into the matmuls
    use_fused_mlp(model)  # one node per SwiGLU MLP that keeps half its activations
    return model


_PEFT_UNSUPPORTED = re.compile(r"^Target module (?P<kind>\w+)\b.*? is not supported\.", re.DOTALL)


def _unsupported_target(model: nn.Module, targets: Any, err: ValueError, linear: list[str]) -> str | None:
    """The message for PEFT's refusal of a module ``lora_target`` matched that it cannot train (a decoder layer for
    `lora_target: 1`, which matches `model.layers.1`; a norm; an MLP block), naming it by its place in the model; PEFT
    printed the whole module, never its name, in a traceback. ``linear``: the model's linear layers before PEFT
    wrapped some of them. None for any other ValueError."""
    match = _PEFT_UNSUPPORTED.match(str(err))
    if match is None:
        return None
    keys = [targets] if isinstance(targets, str) else sorted(targets or ())
    named = [name for name, module in model.named_modules() if type(module).__name__ == match["kind"]
             and any(name == key or name.endswith(f".{key}") for key in keys)]  # PEFT's own matching
    where = f"`{named[0]}`{f' and {len(named) - 1} more' if len(named) > 1 else ''}, " if named else ""
    return (f"`lora_target` matches {where}a {match['kind']}, which LoRA cannot train (PEFT trains linear, embedding "
            f"and convolution layers). Name linear layers ({', '.join(linear) or 'none here'}), or use `all`.")


def _decoder_layers(model: nn.Module, composite: ModelFamily | None) -> tuple[str, int]:
    """(name of the language model's layer list, number of layers)."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "text_config", None) or config
    expected = getattr(text_config, "num_hidden_layers", None) or getattr(config, "num_hidden_layers", None)
    skip = list(composite.vision_keys + composite.projector_keys) if composite else []
    lists = [(name, len(m)) for name, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) > 0 and not _matches_any(name, skip)]
    if not lists:
        raise ModelError("Freeze tuning could not find the model's layer list; use `finetuning_type: lora` or `full`.")
    exact = [item for item in lists if item[1] == expected]
    return exact[0] if exact else max(lists, key=lambda item: item[1])


def llama_pro_layers(num_layers: int, expanded: int) -> range:
    """The expanded blocks of a LLaMA Pro model (LLaMA-Factory's block expansion adds one after every
    ``num_layers / expanded`` original layers): with ``freeze_trainable_layers`` of them among ``num_layers``, every
    ``num_layers // expanded``-th layer, the last included."""
    if expanded <= 0 or num_layers % expanded:
        raise ModelError(f"`freeze_trainable_layers: {expanded}` does not fit this model's {num_layers} layers: with "
                         "`use_llama_pro` it is the number of blocks the expansion added (`lf-engine expand ... "
                         f"--num-expand N`), one after every few original layers, so it must divide {num_layers}. "
                         "Set it to the expansion's N, or expand the model first.")
    stride = num_layers // expanded
    return range(stride - 1, num_layers + stride - 1, stride)


def setup_freeze(model: nn.Module, finetuning_args: Any, composite: ModelFamily | None = None) -> list[str]:
    """Train only some layers: the last ``freeze_trainable_layers`` (the first N when negative).

    Inside those layers ``freeze_trainable_modules`` (``all`` or names such as ``mlp,self_attn``) train;
    ``freeze_extra_modules`` adds modules outside the layers; composite models add every projector unless
    ``freeze_multi_modal_projector``, and the encoder towers unless ``freeze_vision_tower``.

    Returns:
        The names of the trainable parameters.
    """
    prefix, num_layers = _decoder_layers(model, composite)
    n = finetuning_args.freeze_trainable_layers
    if getattr(finetuning_args, "use_llama_pro", False):
        layer_ids = llama_pro_layers(num_layers, n)
    elif n == 0 or abs(n) > num_layers:
        raise ModelError(f"`freeze_trainable_layers: {n}` must be between -{num_layers} and {num_layers} "
                         f"(not 0) for this model with {num_layers} layers.")
    else:
        layer_ids = range(num_layers - n, num_layers) if n > 0 else range(-n)
    layer_prefixes = tuple(f"{prefix}.{i}." for i in layer_ids)
    in_layers = [name for name, _ in model.named_parameters() if name.startswith(f"{prefix}.")]
    modules = split_names(finetuning_args.freeze_trainable_modules)
    if not modules or [m.lower() for m in modules] == ["all"]:
        modules = []
    else:
        available = {part for name in in_layers for part in name[len(prefix) + 1:].split(".")[1:-1]}
        unknown = [m for m in modules if m not in available]
        if unknown:
            raise ModelError(f"`freeze_trainable_modules` names modules not in the layers: {', '.join(unknown)}. "
                             f"Available: {', '.join(sorted(available))}, or `all`.")
    extra = split_names(finetuning_args.freeze_extra_modules)
    if extra:
        _check_module_names(model, extra, "freeze_extra_modules")
    extra_keys = list(extra)
    frozen_keys: list[str] = []
    if composite is not None:
        if not finetuning_args.freeze_multi_modal_projector:
            extra_keys += present_projectors(model, composite)
        if finetuning_args.freeze_vision_tower:
            frozen_keys += list(composite.vision_keys)
        else:
            extra_keys += list(composite.vision_keys)
    skip_layers = composite is not None and finetuning_args.freeze_language_model
    trainable = []
    for name, param in model.named_parameters():
        in_chosen_layer = not skip_layers and name.startswith(layer_prefixes) and (
            not modules or _matches_any(name[len(prefix) + 1:], modules))
        train = (in_chosen_layer or _matches_any(name, extra_keys)) and not _matches_any(name, frozen_keys)
        param.requires_grad_(train)
        if train:
            trainable.append(name)
    if not trainable:
        raise ModelError("Freeze tuning left no parameter trainable; check `freeze_trainable_layers` and "
                         "`freeze_trainable_modules`.")
    logger.info("Freeze tuning: layers %s of %s trainable.", list(layer_ids), prefix)
    return trainable


def setup_full(model: nn.Module, finetuning_args: Any, composite: ModelFamily | None = None) -> None:
    """Train every parameter, except the encoder towers / projectors / language model when asked to freeze them."""
    frozen: list[str] = []
    if composite is not None:
        if finetuning_args.freeze_vision_tower:
            frozen += list(composite.vision_keys)
        if finetuning_args.freeze_multi_modal_projector:
            frozen += present_projectors(model, composite)
        if finetuning_args.freeze_language_model:
            frozen += list(composite.language_keys)  # lm_head too, as LLaMA-Factory does
    for name, param in model.named_parameters():
        param.requires_grad_(not _matches_any(name, frozen))


def upcast_trainable_params(model: nn.Module) -> int:
    """Cast trainable half-precision parameters to float32 (stable optimizer updates); returns how many."""
    count = 0
    for param in model.parameters():
        if param.requires_grad and param.dtype in (torch.float16, torch.bfloat16):
            param.data = param.data.float()
            count += 1
    return count


def add_projector_cast_hooks(model: nn.Module, composite: ModelFamily | None, dtype: torch.dtype) -> list[Any]:
    """Cast every projector's output to the compute dtype (quantized composite models); returns the hooks."""
    names = set(present_projectors(model, composite))

    def cast(module: nn.Module, args: Any, output: Any) -> Any:
        if isinstance(output, torch.Tensor):
            return output.to(dtype) if output.is_floating_point() else output
        if isinstance(output, (tuple, list)):
            return type(output)(o.to(dtype) if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                                for o in output)
        return output

    return [module.register_forward_hook(cast) for name, module in model.named_modules() if name in names]


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts; 4-bit packed weights count as their unpacked size."""
    trainable = total = 0
    for param in model.parameters():
        num = param.ds_numel if hasattr(param, "ds_numel") else param.numel()
        if type(param).__name__ == "Params4bit":
            storage = getattr(param, "quant_storage", torch.uint8)
            num *= 2 * (storage.itemsize if hasattr(storage, "itemsize") else 1)
        total += num
        if param.requires_grad:
            trainable += num
    return trainable, total
