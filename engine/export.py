"""Export: merge LoRA adapters into the base model and save a standalone Hugging Face model folder.

The folder holds safetensors shards (at most ``export_size`` GB each), config.json, generation_config.json (the base
model's EOS ids followed by the template's stop words), the tokenizer (left padding) with the template written as its
Jinja chat template (so ``transformers`` + ``apply_chat_template`` reproduce the training format; the tokenizer's own
is kept when it already writes that format), an Ollama ``Modelfile`` (``engine.export_modelfile``),
``export_config.yaml`` (the resolved config) and ``export_info.json`` (versions, files, dtype and the verification
result). After saving, the folder is reloaded with ``AutoModelForCausalLM`` and its logits are compared with the merged model's.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from engine.config import ConfigError, RunConfig
from engine.export_checks import (
    CONFIG_NAME,
    INFO_FILE,
    STAGING_PREFIX,
    adapter_paths,
    check_export,
    previous_export_files,
    stale_staging,
)
from engine.export_modelfile import MODELFILE_NAME, ollama_modelfile
from engine.runs import EVENTS_FILE, EventWriter, package_versions, write_json_atomic, write_text_atomic
from engine.train.final_save import publish

logger = logging.getLogger(__name__)

BYTES_PER_GB = 10**9
"""Unit of ``export_size`` (Hugging Face's "GB" is 10**9 bytes)."""

VERIFY_PROMPT = [{"role": "user", "content": "Hello! Who are you?"}]
VERIFY_CONVERSATION = [
    {"role": "user", "content": "Hello! Who are you?"},
    {"role": "assistant", "content": "I am an assistant."},
    {"role": "user", "content": "What can you do?"},
]
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


def _stored_dtype(model_path: str) -> torch.dtype | None:
    from engine.models import resolve_model_path

    try:
        model_path = resolve_model_path(model_path)
    except ValueError:
        return None  # reported when the model is loaded
    from engine.models.registry import read_local_config

    config = read_local_config(model_path)  # a regular file of at most a config's size; None otherwise
    if config is None:
        return None
    text_config = config.get("text_config")
    name = config.get("dtype") or config.get("torch_dtype") or (
        text_config.get("dtype") if isinstance(text_config, dict) else None)
    return _DTYPES.get(str(name)) if name else None


def resolve_dtypes(cfg: RunConfig, device: torch.device) -> tuple[torch.dtype, torch.dtype]:
    """(dtype to merge in, dtype to save in) for the export.

    ``infer_dtype: auto`` keeps the base model's stored dtype (float32 when unknown). The merge runs in the
    saved dtype, except float16 on the CPU, which merges in float32 and is cast afterwards.
    """
    requested = cfg.model.infer_dtype
    target = _DTYPES[requested] if requested != "auto" else (_stored_dtype(cfg.model.model_name_or_path) or torch.float32)
    if target == torch.float16 and device.type == "cpu":
        return torch.float32, target
    return target, target


def _export_device(cfg: RunConfig) -> torch.device:
    if cfg.export.export_device == "cpu":
        return torch.device("cpu")
    from engine.devices import current_device

    return current_device()


def _reward_adapter(cfg: RunConfig) -> bool:
    """Whether the adapters are a reward model's (a `stage: rm` run saves a SEQ_CLS adapter with its score head):
    merged into a causal LM, the head would be dropped and the export would be no reward model."""
    from engine.checkpoints import read_adapter_config
    from engine.models.adapters import split_names

    adapters = split_names(cfg.model.adapter_name_or_path)
    return bool(adapters) and read_adapter_config(adapters[-1]).get("task_type") == "SEQ_CLS"


def _load_merged(cfg: RunConfig, tokenizer: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The base model with every adapter merged in, on ``device`` in ``dtype``, ready to save."""
    from engine.models import load_model

    model_args = dataclasses.replace(cfg.model, infer_dtype=str(dtype).split(".")[-1])
    task = "reward" if _reward_adapter(cfg) else "causal_lm"  # an rm run's adapter keeps its trained score head
    model = load_model(model_args, cfg.finetuning, tokenizer, is_trainable=False, methods=cfg.methods, task=task)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    if getattr(model, "peft_config", None):
        raise RuntimeError("Adapters are still attached after merging; the export would not be standalone.")
    return model.to(device=device, dtype=dtype).eval()


def _set_generation_eos(model: Any, stop_ids: list[int], pad_id: int | None) -> None:
    """Make plain ``generate`` on the exported model stop at the template's stop words too; the base model's own EOS
    ids stay first (LLaMA-Factory saves them unchanged), and its PAD id is kept (the tokenizer's when it has none)."""
    config = getattr(model, "generation_config", None)
    if config is None or not stop_ids:
        return
    found = config.eos_token_id
    eos_ids = [found] if isinstance(found, int) else [i for i in (found or []) if isinstance(i, int)]
    eos_ids += [i for i in stop_ids if i not in eos_ids]
    config.eos_token_id = eos_ids[0] if len(eos_ids) == 1 else eos_ids
    if config.pad_token_id is None and pad_id is not None:
        config.pad_token_id = pad_id
    try:
        config.validate(strict=True)
    except (ValueError, TypeError):
        # Sampling values stored without do_sample make saving fail; keep them and switch sampling on.
        config.do_sample = True


@torch.inference_mode()
def _logits(model: Any, ids: list[int], device: torch.device) -> torch.Tensor:
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    return model(input_ids=input_ids).logits.float().cpu()


def _clear_previous(export_dir: Path) -> None:
    for path in previous_export_files(export_dir) or []:
        if path.is_symlink() or path.is_file():  # a link is removed, never what it points to; a folder is kept
            path.unlink()
    for path in export_dir.iterdir():  # left by an export that was killed while it saved
        if stale_staging(path):
            shutil.rmtree(path, ignore_errors=True)


def _save_tokenizer_and_files(cfg: RunConfig, template: Any, tokenizer: Any, chat_template: str | None,
                              folder: Path) -> None:
    """The tokenizer (with the template as its chat template), the Modelfile, a vision-language model's processor
    files and the resolved config, written into ``folder`` (the export's staging folder)."""
    if chat_template and _own_template_fits(tokenizer, template):
        logger.info("The tokenizer's own chat template writes the %r template's format; it is kept.", template.name)
    elif chat_template:
        tokenizer.chat_template = chat_template
    tokenizer.padding_side = tokenizer.init_kwargs["padding_side"] = "left"  # for batched generation (as LF saves it)
    tokenizer.save_pretrained(folder)
    modelfile = ollama_modelfile(template, tokenizer)
    if modelfile is not None:
        write_text_atomic(folder / MODELFILE_NAME, modelfile)
    from engine.models.loader import resolve_model_path
    from engine.multimodal.processor import copy_processor_files

    copy_processor_files(resolve_model_path(cfg.model.model_name_or_path, cfg.model.cache_dir,
                                            cfg.model.model_revision), folder)  # vision-language models
    write_text_atomic(folder / CONFIG_NAME, cfg.to_yaml(minimal=False))


def _reload_class(model: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if type(model).__name__.endswith("ForSequenceClassification"):  # a reward model
        return AutoModelForSequenceClassification
    if getattr(model.config, "model_type", None) in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return type(model)  # composite (vision-language) models reload with their own class


def run_export(cfg: RunConfig, run_dir: str | None = None) -> dict[str, Any]:
    """Merge the adapters into the base model, save it to ``export_dir`` and verify the saved folder.

    Progress goes to ``run_dir/events.jsonl`` as ``{"event": "progress", "stage", "fraction"}`` lines; the last
    one (stage ``done``) carries the result. The ``end`` event is written by the job's lifecycle
    (``engine.lifecycle.JobContext``).

    Args:
        cfg: The run config: model + adapters, template, ``infer_dtype`` and the export section.
        run_dir: The run folder for events, or None.

    Returns:
        ``{"export_dir", "size_bytes", "files", "dtype", "verified", "max_logit_diff", "chat_template_matches",
        "seconds"}``.

    Raises:
        ConfigError: For problems the user must fix (listed together).
        RuntimeError: When the saved folder does not reproduce the merged model's logits.
        DiskFullError, FileTooLargeError, WriteDeniedError: A write into ``export_dir`` failed for lack of room, a
            file's size or its permissions (engine.write_denied.write_error), named with the fix.
    """
    started = time.perf_counter()
    writer = EventWriter(Path(run_dir) / EVENTS_FILE) if run_dir else None

    def progress(stage: str, fraction: float, **extra: Any) -> None:
        logger.info("Export: %s (%d%%)", stage, round(fraction * 100))
        if writer is not None:
            writer.write({"event": "progress", "stage": stage, "fraction": round(fraction, 3), **extra})

    problems = check_export(cfg)
    if problems:
        raise ConfigError(problems)
    from engine.run_lock import claim_export, release

    export_dir = Path(cfg.export.export_dir).expanduser()
    lock = claim_export(export_dir, f"run {Path(run_dir).name}" if run_dir else "lf-engine export")
    try:  # held from before the folder is cleared until the export ends, however it ends
        return _merge_save_verify(cfg, export_dir, progress, started)
    except Exception as err:  # torch's and safetensors' write failures are not all OSErrors
        from engine.write_denied import write_error

        named = write_error(err, export_dir, then="export again")  # a full disk, a folder not writable
        if named is None:
            raise
        raise named from err
    finally:
        release(lock)


def _merge_save_verify(cfg: RunConfig, export_dir: Path, progress: Any, started: float) -> dict[str, Any]:
    """:func:`run_export`'s work once ``export_dir`` is locked for it."""
    from engine.infer.generation import stop_token_ids, template_for

    device = _export_device(cfg)
    merge_dtype, save_dtype = resolve_dtypes(cfg, device)

    progress("load", 0.0)
    from engine.models import load_tokenizer

    tokenizer = load_tokenizer(cfg.model)
    template = template_for(cfg, tokenizer)
    stop_ids = stop_token_ids(template, tokenizer)
    model = _load_merged(cfg, tokenizer, device, merge_dtype)
    progress("merge", 0.4)
    if save_dtype != merge_dtype:
        model = model.to(dtype=save_dtype)
    verify_ids = template.encode_prompt(tokenizer, VERIFY_PROMPT)
    reference = _logits(model, verify_ids, device)

    export_dir.mkdir(parents=True, exist_ok=True)
    _clear_previous(export_dir)
    _set_generation_eos(model, stop_ids, tokenizer.pad_token_id)
    reload_class = _reload_class(model)
    staging = Path(tempfile.mkdtemp(dir=export_dir, prefix=STAGING_PREFIX))  # new and private: nothing planted in it
    try:
        model.save_pretrained(staging, max_shard_size=cfg.export.export_size * BYTES_PER_GB)
        del model
        from engine.devices import empty_cache

        empty_cache()
        progress("save", 0.6)
        chat_template = template.to_jinja()
        _save_tokenizer_and_files(cfg, template, tokenizer, chat_template, staging)
        # the export's files are what it wrote, not what the folder holds when it ends: a run folder's entries (the
        # board's run.json temp file in the making) listed there were removed by the next export as this one's
        written = sorted(path.name for path in staging.iterdir())
        publish(staging, export_dir)  # each file renamed over its name: a link planted there is replaced, not written
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    from engine.fileperms import match_umask

    match_umask(export_dir)
    progress("tokenizer", 0.7)

    # checked the way it was computed: without transformers' hub kernels (engine.models.loader loads with them off)
    exported = reload_class.from_pretrained(export_dir, dtype=save_dtype, use_kernels=False).to(device).eval()
    diff = (reference - _logits(exported, verify_ids, device)).abs().max().item()
    del exported
    empty_cache()
    tolerance = _TOLERANCE.get(save_dtype, 1e-4) * max(1.0, reference.abs().max().item())
    if not diff <= tolerance:
        raise RuntimeError(
            f"The exported model's logits differ from the merged model's by {diff:.3g} (tolerance {tolerance:.3g}); "
            f"the folder {export_dir} is not a faithful export."
        )
    template_ok = _chat_template_matches(export_dir, template, tokenizer) if chat_template else False
    progress("verify", 0.9)

    files = sorted({*written, INFO_FILE})
    info = {
        "base_model": cfg.model.model_name_or_path,
        "adapters": adapter_paths(cfg),
        "template": cfg.model.template,
        "dtype": str(save_dtype).split(".")[-1],
        "device": str(device),
        "max_logit_diff": diff,
        "chat_template_matches": template_ok,
        "created_at": time.time(),
        "versions": package_versions(),
        "files": files,
    }
    write_json_atomic(export_dir / INFO_FILE, info)
    result = {
        "export_dir": str(export_dir),
        "size_bytes": sum((export_dir / name).stat().st_size for name in files),
        "files": files,
        "dtype": info["dtype"],
        "verified": True,
        "max_logit_diff": diff,
        "chat_template_matches": template_ok,
        "seconds": round(time.perf_counter() - started, 2),
    }
    progress("done", 1.0, **result)
    return result


FIT_CONVERSATIONS = [
    (VERIFY_PROMPT, True),
    ([{"role": "system", "content": "You are terse."}, *VERIFY_CONVERSATION], True),
    ([*VERIFY_CONVERSATION[:2]], False),
    ([{"role": "system", "content": "You are terse."}, *VERIFY_CONVERSATION[:2]], False),
]
"""(conversation, add_generation_prompt) pairs on which the tokenizer's own chat template must write exactly what
the template writes to be kept."""


def _own_template_fits(tokenizer: Any, template: Any) -> bool:
    """Whether the tokenizer's own chat template writes the template's format: it is then kept, as LLaMA-Factory
    keeps a tokenizer's own (with what the generated one lacks, such as tool declarations). One that writes another
    format is replaced, so that the exported model is prompted as it was trained (LLaMA-Factory keeps it)."""
    own = getattr(tokenizer, "chat_template", None)
    if not isinstance(own, str) or not own:
        return False
    for conversation, add_prompt in FIT_CONVERSATIONS:
        try:
            rendered = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_prompt)
            expected = template.render(conversation, add_generation_prompt=add_prompt, tokenizer=tokenizer)
        except Exception:  # a template that refuses these turns (or a system message) is not the same format
            return False
        if rendered != expected:
            return False
    return True


def _chat_template_matches(export_dir: Path, template: Any, tokenizer: Any) -> bool:
    """Whether ``apply_chat_template`` on the exported tokenizer equals the template's own rendering."""
    from transformers import AutoTokenizer

    exported = AutoTokenizer.from_pretrained(export_dir)
    try:
        rendered = exported.apply_chat_template(VERIFY_CONVERSATION, tokenize=False, add_generation_prompt=True)
    except Exception as err:  # a broken Jinja template: report, do not fail the export
        logger.warning("The exported chat template does not render: %s", err)
        return False
    expected = template.render(VERIFY_CONVERSATION, add_generation_prompt=True, tokenizer=tokenizer)
    if rendered != expected:
        logger.warning("The exported chat template renders differently from the template %r:\n%r\n%r",
                       template.name, rendered, expected)
        return False
    return True


def human_size(n: float) -> str:
    """``n`` bytes as B, KB, MB, GB or TB."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What ``lf-engine export`` prints when it is done: where, how big, and the reload check (as the board shows)."""
    files = result.get("files") or []
    lines = [f"Exported to {result.get('export_dir')}: {human_size(float(result.get('size_bytes') or 0))} in "
             f"{len(files)} files, {result.get('dtype', '?')}."]
    check = "passed" if result.get("verified") else "FAILED"
    diff = result.get("max_logit_diff")
    detail = f" (max logit difference {diff:.2e})" if isinstance(diff, (int, float)) else ""
    lines.append(f"Reload check: {check}{detail}; chat template matches: "
                 f"{'yes' if result.get('chat_template_matches') else 'no'}; took {result.get('seconds', 0):.1f} s.")
    return lines
