"""Checks run before a job starts, so that mistakes surface as one clear message instead of a traceback later.

``check(cfg, command)`` returns a list of problems (empty when all is well); each names the fix. It loads no
model weights: only small files (config.json, dataset_info.json, file sizes) are read.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from engine.checkpoints import adapter_config_problem, read_adapter_config, weights_problem
from engine.config import RunConfig
from engine.errors import coded
from engine.hub_reach import HUB_ID, cached_hub_config, hub_model_problems
from engine.json_text import loads
from engine.models.web_address import web_address_problem
from engine.preflight_memory import check_memory
from engine.weights_layers import layer_count_problem

logger = logging.getLogger(__name__)



def check(cfg: RunConfig, command: str = "train", *, interactive: bool | None = None,
          device: dict | None = None) -> list[str]:
    """Every problem found in the config for ``command`` (train, eval, export, chat, api), each an
    :class:`engine.errors.Problem` whose code names the check that found it (``model``, ``data``, ``memory``...).
    ``interactive``: whether the job will have a terminal to ask on (a tracker's login); by default whether this
    process has one. The board says False: its jobs run in the background.

    ``device``: the accelerator the job will use, as ``{"type": "cuda", "label": "CUDA"}`` (None for the type: not
    known yet), for a process that must not import torch (the board, whose environment report comes from a
    subprocess). The device checks then judge the attention choice from those facts and leave what needs torch on
    the device itself (quantization, the inference dtype) to the job's own pre-flight check when it starts. (The board
    asks the pre-quantized model's question, :func:`_check_prequantized`, in a child interpreter.)"""
    problems: list[str] = []
    problems += coded("model", _check_model(cfg))
    if command in ("train", "eval", "data"):  # the commands that pack rows (chat, export and api never do)
        problems += coded("packing", _check_packing(cfg))
    problems += coded("template", _check_template(cfg))
    saved = _saved_tokenized(cfg)  # the rows load from there: the datasets and their files are not read
    if command == "data":  # `lf-engine data`: the tokenizer and the datasets only
        from engine.multimodal.checks import check_media

        return problems + ([] if saved else coded("data", _check_data(cfg, command)) + coded("media", check_media(cfg)))
    problems += coded("device", _check_device(cfg, command, device))
    if device is None:  # the board asks it in a child interpreter (app.prequantized)
        problems += coded("model", _check_prequantized(cfg))
    if command in ("train", "eval"):
        if not saved:
            from engine.multimodal.checks import check_media

            problems += coded("data", _check_data(cfg, command)) + coded("media", check_media(cfg))
        problems += coded("output", _check_output(cfg, command))
        problems += coded("precision", _check_precision(cfg, device))
    if command == "train":
        problems += coded("deepspeed", _check_deepspeed(cfg))
        from engine.train.parallel.ray_check import ray_problems

        problems += coded("ray", ray_problems(cfg))
        problems += coded("schedule", _check_schedule(cfg))
        problems += coded("tracker", _check_trackers(cfg, interactive))
        from engine.train.rl_checks import check_rl

        problems += coded("rl", check_rl(cfg))
    if command == "export":
        from engine.export_checks import check_export

        named = {_subject(p) for p in problems}
        problems += coded("export", [p for p in check_export(cfg) if _subject(p) not in named])
    problems += coded("memory", check_memory(cfg, command, model_dir(cfg), device))
    return problems


def _subject(problem: str) -> str:
    """The `key: value` a problem is about (its first back-quoted part), to merge two checkers' lists."""
    parts = problem.split("`")
    return parts[1] if len(parts) > 2 else problem


def model_dir(cfg: RunConfig) -> Path | None:
    """The local folder of the base model, if it is one (the demo counts once built)."""
    name = cfg.model.model_name_or_path
    if _is_demo(name):
        return None
    p = Path(name).expanduser()
    return p if p.is_dir() else None


def _is_demo(name: str) -> bool:
    from engine.demo_names import is_demo_name

    return is_demo_name(name)


WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.bin.index.json", "*.pt", "*.pth")
TOKENIZER_PATTERNS = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "vocab.txt",
                      "*.tiktoken", "spiece.model")


def _has_any(folder: Path, patterns: tuple[str, ...]) -> bool:
    return any(next(folder.glob(pattern), None) is not None for pattern in patterns)


def _adapter_as_model(name: str, folder: Path) -> str:
    base = read_adapter_config(folder).get("base_model_name_or_path")
    for stamp, short in (("lf_demo.json", "demo"), ("lf_demo_vlm.json", "demo-vlm")):  # a built-in demo's own cache
        if isinstance(base, str) and base and (Path(base) / stamp).is_file():
            base = short
    model = f"`model_name_or_path: {base}` (its base model)" if isinstance(base, str) and base else \
        "`model_name_or_path` to its base model"
    return (f"`model_name_or_path: {name}` is a LoRA adapter (adapter_config.json), not a model: set "
            f"`adapter_name_or_path: {name}` and {model}, or export it first (`lf-engine export`) to get a model.")


def _check_model_folder(name: str, folder: Path, key: str = "model_name_or_path") -> list[str]:
    """A local model folder must hold a readable config.json, weights and a tokenizer."""
    from engine.models.registry import ConfigTooLarge, read_config_text

    config = folder / "config.json"
    if not config.is_file():
        if (folder / "adapter_config.json").is_file() and key == "model_name_or_path":  # a LoRA run's output
            return [_adapter_as_model(name, folder)]
        if (folder / "adapter_config.json").is_file():
            return [f"`{key}: {name}` is a LoRA adapter, not a model; merge it into its base model first "
                    "(`lf-engine export`) and give the exported folder."]
        return [f"`{key}: {name}` has no config.json; is it a Hugging Face model folder?"]
    try:
        data = loads(read_config_text(config))
    except ConfigTooLarge as err:
        return [str(err)]
    except json.JSONDecodeError as err:
        return [f"{config} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); copy it again "
                "from the original model."]
    except UnicodeDecodeError as err:
        return [f"{config} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at position {err.start:,}); "
                "re-save it as UTF-8, or copy it again from the original model."]
    except RecursionError:
        return [f"{config} nests lists or objects too deeply to be read; copy it again from the original model."]
    except OSError as err:
        return [f"{config} cannot be read ({err.strerror or err}); check the file."]
    if not isinstance(data, dict):
        return [f"{config} is not a JSON object (it holds a {type(data).__name__}); copy it again from the "
                "original model."]
    problems = []
    odd = sorted({p.name for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if not p.is_file()})
    if odd:  # a named pipe here held this check (it runs in the board's own process) for good
        problems.append(f"`{key}: {name}` holds {', '.join(odd[:3])}, which is no regular file (a pipe, a device, "
                        "a socket or a folder); copy the weight files again from the original model.")
    elif not _has_any(folder, WEIGHT_PATTERNS):
        problems.append(f"`{key}: {name}` holds config.json but no weights (model.safetensors, its "
                        "shards, or pytorch_model.bin); copy the weight files into the folder.")
    elif (cut := weights_problem(folder)) and cut != "no model or adapter weights":
        problems.append(f"`{key}: {name}` cannot be loaded: {cut}; copy the weight files again from the "
                        "original model.")
    elif layers := layer_count_problem(folder, data, key, name):
        problems.append(layers)
    if key == "model_name_or_path" and not _has_any(folder, TOKENIZER_PATTERNS):  # a ref_model's is not read
        problems.append(f"`{key}: {name}` has no tokenizer files (tokenizer.json, or tokenizer.model "
                        "/ vocab.json with tokenizer_config.json); copy them from the original model.")
    return problems


def _check_hub_model(cfg: RunConfig) -> list[str]:
    name = cfg.model.model_name_or_path
    return hub_model_problems(cfg, name, f"`model_name_or_path: {name}` is a hub id", "set `model_name_or_path` to it")


def _check_model(cfg: RunConfig) -> list[str]:
    problems = []
    name = cfg.model.model_name_or_path
    if not name:
        return ["`model_name_or_path` is empty: give a local model folder, a hub id, or `demo`."]
    if not _is_demo(name):
        p = Path(name).expanduser()
        if web_address_problem(name):
            problems.append(web_address_problem(name))
        elif p.exists() and not p.is_dir():
            problems.append(f"`model_name_or_path: {name}` is a file; give the model's folder.")
        elif p.is_dir():
            problems += _check_model_folder(name, p)
        elif not HUB_ID.match(name) or name.startswith((".", "/", "~")):
            problems.append(f"`model_name_or_path: {name}` does not exist; check the path (or use `demo`).")
        else:
            problems += _check_hub_model(cfg)
    ref = cfg.finetuning.ref_model
    if ref and cfg.finetuning.stage in ("dpo", "kto") and not _is_demo(ref):  # loaded only after the policy model
        p = Path(ref).expanduser()
        if p.is_dir():
            problems += _check_model_folder(ref, p, "ref_model")
        elif p.exists() or not HUB_ID.match(ref) or ref.startswith((".", "/", "~")):
            problems.append(f"`ref_model: {ref}` is not a model folder; give a local model folder, a hub id, or "
                            "remove it to use the base model as the reference.")
        else:
            problems += hub_model_problems(cfg, ref, f"`ref_model: {ref}` is a hub id", "set `ref_model` to it")
    scored = cfg.finetuning.stage == "kto" or cfg.finetuning.pref_loss not in ("orpo", "simpo")  # ORPO, SimPO: none
    if ref and cfg.finetuning.stage in ("dpo", "kto") and scored and not problems:
        from engine.models.vocab_match import ref_vocab_problems

        problems += ref_vocab_problems(name, ref, cfg.model.cache_dir)
    for adapter in filter(None, (cfg.model.adapter_name_or_path or "").split(",")):
        a = Path(adapter.strip()).expanduser()
        if not a.is_dir():
            problems.append(f"`adapter_name_or_path: {adapter}` does not exist{_read_from(a)}; give an adapter folder: "
                            "the output_dir of a LoRA training run (run that training first) or one of its "
                            "checkpoint-N folders.")
        elif not (a / "adapter_config.json").is_file():
            problems.append(f"`adapter_name_or_path: {adapter}` has no adapter_config.json; is it a LoRA adapter?")
        elif unreadable := adapter_config_problem(a):
            problems.append(f"`adapter_name_or_path: {adapter}` cannot be loaded: {unreadable}; pick another "
                            "checkpoint or save the adapter again.")
        elif weights_problem(a):
            problems.append(f"`adapter_name_or_path: {adapter}` cannot be loaded: {weights_problem(a)} (a save that was "
                            "cut off); pick an earlier checkpoint.")
        else:
            _warn_template_change(cfg, adapter.strip())
    return problems


def _read_from(path: Path) -> str:
    """For a relative path that is not there: the folder it was looked for from (a config run from another folder
    than the one its paths are relative to, such as the repository root for examples/)."""
    return "" if path.is_absolute() else f" (looked for in {Path.cwd()})"


def _check_packing(cfg: RunConfig) -> list[str]:
    """Packed rows must stay apart in the model (engine.models.packing_support), judged from its config.json where
    it is here (a local folder or the hub cache); the loaded model is checked again."""
    from engine.config.schema import packs_rows
    from engine.models.packing_support import packed_rows_problems
    from engine.models.registry import read_local_config

    if cfg.train.predict_with_generate and not cfg.train.do_train:
        return []  # prediction alone generates from each prompt, unpacked
    configured = packs_rows(cfg.finetuning.stage, cfg.data)
    saved = _saved_packed_rows(cfg)
    if not (configured or saved):
        return []
    name = str(cfg.model.model_name_or_path or "").strip()
    path = Path(name).expanduser() if name else None
    if path is not None and path.is_dir():
        config = read_local_config(path)
    else:
        try:
            cached = cached_hub_config(cfg, name) if name and HUB_ID.match(name) else None
        except (ImportError, ValueError):
            cached = None
        config = read_local_config(Path(cached).parent) if cached else None
    return packed_rows_problems(cfg, config, from_saved=saved and not configured)


def _saved_packed_rows(cfg: RunConfig) -> bool:
    """Whether ``tokenized_path`` (to be loaded as it is) holds packed rows: a ``position_ids`` column in the
    features its splits' dataset_info.json lists (nothing else of the saved data is read)."""
    from engine.small_json import read_small_json

    if not cfg.data.tokenized_path or cfg.data.overwrite_cache:
        return False
    for info in Path(cfg.data.tokenized_path).expanduser().glob("*/dataset_info.json"):
        try:  # bounded, a regular file only (this runs in the board's process too)
            features = read_small_json(info).get("features")  # datasets writes an object of columns
            if isinstance(features, dict) and "position_ids" in features:
                return True
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
    return False


def _warn_template_change(cfg: RunConfig, adapter: str) -> None:
    from engine.checkpoints import trained_template

    trained = trained_template(adapter)
    if trained and trained != (cfg.model.template or None):
        logger.warning("Adapter %s was trained with `template: %s` but this config uses `template: %s`; the model "
                       "expects the format it was trained on.", adapter, trained, cfg.model.template or "(empty)")


def _check_device(cfg: RunConfig, command: str, device: dict | None = None) -> list[str]:
    """Attention, quantization and (for inference) the dtype must be possible on this device; with ``device`` (the
    facts of the job's device, see :func:`check`) only the attention choice, judged without importing torch."""
    from engine.errors import UserError

    if device is not None:
        from engine.attention_choice import choose_attention

        try:
            choose_attention(cfg.model.attn_implementation or cfg.model.flash_attn, device.get("type"),
                             device.get("label") or "")
        except UserError as err:
            return [str(err)]
        return []
    from engine import devices

    problems = []
    attempts = [lambda: devices.pick_attention(cfg.model.attn_implementation or cfg.model.flash_attn)]
    if cfg.model.quantization_bit:
        from engine.models.loader import check_quantization

        attempts.append(lambda: check_quantization(cfg.model.quantization_bit))
    for attempt in attempts:
        try:
            attempt()
        except UserError as err:
            problems.append(str(err))
    if command in ("chat", "api", "export") and (cfg.model.infer_dtype or "auto") != "auto":
        try:
            devices.choose_dtype(cfg.model.infer_dtype)
        except UserError as err:
            problems.append(f"`infer_dtype: {cfg.model.infer_dtype}`: {err}")
    return problems


def _check_prequantized(cfg: RunConfig) -> list[str]:
    """A pre-quantized base model (GPTQ, AWQ, ...) whose quantization library (or device) is missing here."""
    from engine.models.prequantized import prequantized_problem

    problem = prequantized_problem(cfg.model.model_name_or_path, model_config_file(cfg))
    return [problem] if problem else []


def model_config_file(cfg: RunConfig) -> Path | str | None:
    """The base model's config.json where it can be read here (a local folder's, or the hub cache's); None for the
    demo, a name that is neither, or a hub id not in the cache."""
    name = cfg.model.model_name_or_path
    if not name or _is_demo(name):
        return None
    folder = model_dir(cfg)
    if folder is not None:
        return folder / "config.json"
    if HUB_ID.match(name):
        try:
            return cached_hub_config(cfg, name)
        except Exception:  # an id the cache cannot hold: the model check names it
            return None
    return None


def _check_template(cfg: RunConfig) -> list[str]:
    problems = []
    tool_format = cfg.data.tool_format
    if tool_format:
        from engine.templates import TOOL_FORMATS

        if tool_format not in TOOL_FORMATS:
            problems.append(f"Unknown `tool_format: {tool_format}`; use one of {', '.join(TOOL_FORMATS)}, or leave it "
                            "empty for the template's own format.")
    problems += _check_template_name(cfg)
    return problems if problems else _check_template_tokens(cfg)


def _check_template_tokens(cfg: RunConfig) -> list[str]:
    """Named tokens the template writes that the local model folder's tokenizer lacks
    (:func:`engine.templates.token_check.missing_template_tokens`)."""
    folder = model_dir(cfg)
    if not cfg.model.template or folder is None:
        return []
    from engine.templates.token_check import missing_template_tokens

    return missing_template_tokens(cfg.model, folder)


def _check_template_name(cfg: RunConfig) -> list[str]:
    if not cfg.model.template:
        return []
    try:
        from engine.templates import list_templates
    except ImportError:
        return []
    names = list_templates()
    if cfg.model.template not in names:
        import difflib

        close = difflib.get_close_matches(cfg.model.template, names, n=1)
        hint = f" Did you mean `{close[0]}`?" if close else f" Valid: {', '.join(names)}."
        return [f"Unknown template `{cfg.model.template}`.{hint}"]
    if cfg.data.train_on_prompt:  # as LLaMA-Factory refuses it, before anything loads (tokenizing would stop)
        from engine.data.tokenize import train_on_prompt_problem
        from engine.templates import get_template

        problem = train_on_prompt_problem(get_template(cfg.model.template))
        return [problem] if problem else []
    return []


def _saved_tokenized(cfg: RunConfig) -> bool:
    """Whether the rows come from a saved ``tokenized_path`` (as in LLaMA-Factory, which then reads no dataset: the
    data can be tokenized on one machine and trained on another without the raw files or media)."""
    path = cfg.data.tokenized_path
    return bool(path) and Path(path).expanduser().exists() and not cfg.data.overwrite_cache


def _check_data(cfg: RunConfig, command: str) -> list[str]:
    from engine.data.registry import check_datasets

    problems = []
    stage = "sft" if cfg.finetuning.stage in ("grpo", "rloo", "ppo") else cfg.finetuning.stage  # prompts + answers
    if command == "train" and cfg.train.do_train and not cfg.data.dataset:
        problems.append("`dataset` is empty: name one or more datasets from dataset_info.json (comma separated).")
    if command == "eval" and not (cfg.data.eval_dataset or cfg.data.dataset):
        problems.append("Evaluation needs data: set `eval_dataset` (or `dataset` with `val_size`).")
    if command == "data" and not (cfg.data.dataset or cfg.data.eval_dataset):
        problems.append("There is no data to tokenize: set `dataset` (and/or `eval_dataset`) to names from "
                        "dataset_info.json.")
    for key in ("dataset", "eval_dataset"):
        names = getattr(cfg.data, key)
        if names:
            problems += check_datasets(cfg.data.dataset_dir, names, stage, key=key)
    return problems


def _check_output(cfg: RunConfig, command: str) -> list[str]:
    from engine.errors import UserError
    from engine.train.output_dir import check_output_dir, resolve_resume

    problems = []
    out = Path(cfg.train.output_dir).expanduser()
    if out.exists() and not out.is_dir():
        return [f"`output_dir: {cfg.train.output_dir}` is a file; give a folder for the run's outputs."]
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        return [f"`output_dir: {cfg.train.output_dir}` is inside the file {existing}; give a folder path."]
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        return [f"`output_dir: {cfg.train.output_dir}` cannot be created or written ({existing} is not writable); "
                "choose a folder you can write to."]
    if command == "train":
        try:
            check_output_dir(cfg)
            resolve_resume(cfg)
        except UserError as err:
            problems.append(str(err))
    return problems


def _check_precision(cfg: RunConfig, device: dict | None = None) -> list[str]:
    """bf16/fp16 against the device: this process's, or (``device``, see :func:`check`) the facts of the one the job
    will use, where bfloat16 support is left to the job's own check."""
    problems = []
    if device is None:
        from engine import devices

        device_type = devices.get_accelerator().type
        if (cfg.train.bf16 or cfg.train.pure_bf16) and not devices.is_bf16_supported():
            problems.append(f"`bf16` is set but {device_type} has no bfloat16 support here; use `fp16` or neither.")
    else:
        device_type = device.get("type")
    if cfg.train.fp16 and device_type == "cpu":
        problems.append("`fp16: true` does not work on the CPU; remove it (use `bf16: true` or full precision).")
    return problems


# report_to name -> the module it needs (tensorboardX also serves tensorboard)
TRACKERS = {
    "tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "comet_ml": "comet_ml", "clearml": "clearml",
    "neptune": "neptune", "swanlab": "swanlab", "trackio": "trackio", "dvclive": "dvclive",
    "codecarbon": "codecarbon", "azure_ml": "azureml", "dagshub": "dagshub", "flyte": "flytekit",
}


def _check_trackers(cfg: RunConfig, interactive: bool | None = None) -> list[str]:
    """Every tracker in ``report_to`` must be known and installed, and W&B able to log in (the run fails at the
    trainer's start otherwise)."""
    import importlib.util

    names = [n.strip() for n in str(cfg.train.report_to or "none").split(",") if n.strip()]
    problems = []
    alone = [name for name in names if name in ("none", "all")]
    if alone and len(names) > 1:  # transformers takes them only alone; in a list it fails as the trainer starts
        problems.append(f"`report_to: {','.join(names)}` lists `{alone[0]}` with other trackers; `{alone[0]}` stands "
                        f"alone: give `report_to: {alone[0]}`, or the trackers without it.")
    for name in names:
        if name in ("none", "all"):
            continue
        module = TRACKERS.get(name)
        if module is None:
            problems.append(f"`report_to: {name}` is not a known tracker; use none or one of: {', '.join(TRACKERS)}.")
        elif importlib.util.find_spec(module) is None and not (
                name == "tensorboard" and importlib.util.find_spec("tensorboardX") is not None):
            problems.append(f"`report_to: {name}` needs the `{module}` package, which is not installed: "
                            f"`pip install {module}`, or set `report_to: none`.")
    if ("wandb" in names or "all" in names) and importlib.util.find_spec("wandb") is not None:
        from engine.tracker_credentials import wandb_login_problem  # `all` includes every installed tracker

        problem = wandb_login_problem("wandb" if "wandb" in names else "all", interactive=interactive)
        if problem:
            problems.append(problem)
    return problems


def _check_schedule(cfg: RunConfig) -> list[str]:
    tr = cfg.train
    if tr.do_train and tr.max_steps <= 0 and tr.num_train_epochs <= 0:
        return ["`num_train_epochs: 0` with no `max_steps` trains nothing; set `num_train_epochs` (e.g. 3) or "
                "`max_steps`."]
    return []


def _check_deepspeed(cfg: RunConfig) -> list[str]:
    value = cfg.train.deepspeed
    if not value:
        return []
    import importlib.util

    problems = []
    if importlib.util.find_spec("deepspeed") is None:
        problems.append("`deepspeed` is set but DeepSpeed is not installed: `pip install 'lf-board[deepspeed]'` "
                        "(it needs a GPU), or remove `deepspeed`.")
    if isinstance(value, str) and not value.lstrip().startswith("{") and not Path(value).expanduser().exists():
        problems.append(f"`deepspeed: {value}` does not exist; give a DeepSpeed JSON config such as "
                        "examples/deepspeed/ds_z3_offload.json.")
    from engine import devices
    from engine.train.parallel.deepspeed import preflight_problems

    # batch sizes, offload keys, precision against the run; refused on CPU processes (accelerate would run DDP)
    problems += preflight_problems(cfg, int(os.environ.get("WORLD_SIZE", "1")), devices.get_accelerator().type)
    return problems
