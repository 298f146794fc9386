"""Checks of the RL stages (GRPO, RLOO; PPO refused) made before any model loads.

Kept apart from :mod:`engine.train.rl` (which imports TRL's trainers, and with them torch and transformers) so that
the pre-flight checks can run in a process that must stay light: the board checks every config without loading the
ML stack.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.hub_reach import HUB_ID

logger = logging.getLogger(__name__)

SAVED_DEFAULTS = (1024, 512)
"""``max_new_tokens`` defaults, today's and the earlier one: a run folder's config.yaml holds every key, so a GRPO
run saved before the default changed writes 512 without anyone having set it."""

RL_STAGES = ("grpo", "rloo")

PPO_WAY = (
    "Run the same idea with `stage: grpo` (or `stage: rloo`) and `reward_model: <output_dir of your rm run>`: the "
    "policy samples completions, the reward model scores them and `beta` (the KL term) keeps the policy near its "
    "start. The ppo_* keys have no equivalent; num_generations, max_completion_length and temperature set the "
    "sampling."
)


def ppo_refusal() -> str:
    """Why `stage: ppo` is refused, and the way to run the same idea here."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        trl = f"TRL {version('trl')}"
    except PackageNotFoundError:
        trl = "TRL (not installed)"
    if ppo_trainer_available():
        return f"`stage: ppo` is not supported by this engine (it drives TRL's GRPO and RLOO trainers). {PPO_WAY}"
    return f"`stage: ppo` needs a PPO trainer, and {trl} has none, stable or experimental. {PPO_WAY}"


def ppo_trainer_available() -> bool:
    """Whether any importable TRL ships a PPO trainer (stable or experimental)."""
    for name in ("trl.trainer.ppo_trainer", "trl.experimental.ppo"):
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except ModuleNotFoundError:
            continue
    return False


# ------------------------------------------------------------------------------------------------ checks
def check_rl(cfg: RunConfig) -> list[str]:
    """Problems of an RL config, found without loading models or importing user reward files."""
    from engine.rewards import check_rewards, reward_names

    ft, tr = cfg.finetuning, cfg.train
    if ft.stage == "ppo":
        return [ppo_refusal()]
    problems: list[str] = []
    rl_only = {"reward_funcs": ft.reward_funcs, "reward_model": ft.reward_model, "reward_weights": ft.reward_weights}
    if ft.stage not in RL_STAGES:
        return [f"`{key}` applies to stages grpo and rloo (this config has `stage: {ft.stage}`); remove it."
                for key, value in rl_only.items() if value]
    if not reward_names(ft) and not ft.reward_model:
        problems.append(f"`stage: {ft.stage}` needs rewards: set `reward_funcs` (e.g. `format, length`, or "
                        "`path/to/file.py:function`) and/or `reward_model` (the output_dir of an rm run).")
    problems += check_rewards(ft)
    if ft.reward_model:
        problems += check_reward_model(ft.reward_model, cfg)
    if ft.loss_type is not None and ft.stage == "rloo":
        problems.append("`loss_type` selects a GRPO loss; `stage: rloo` has its own. Remove `loss_type`.")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    batch = tr.per_device_train_batch_size * tr.gradient_accumulation_steps * world
    if tr.do_train and ft.num_generations > 0 and batch % ft.num_generations:  # below 2 is refused on its own
        problems.append(
            f"`num_generations: {ft.num_generations}` completions are sampled per prompt, and one generation batch "
            f"(per_device_train_batch_size {tr.per_device_train_batch_size} x gradient_accumulation_steps "
            f"{tr.gradient_accumulation_steps}{f' x {world} processes' if world > 1 else ''} = {batch} completions) "
            f"must hold whole groups: make it a multiple of {ft.num_generations} (or lower num_generations).")
    gen = cfg.generation
    if not gen.do_sample or gen.temperature <= 0:
        key, fix = (("do_sample: false", "remove it (lower `temperature` for less varied samples)") if not gen.do_sample
                    else ("temperature: 0", "give it a value above 0 (lower ones give less varied samples)"))
        problems.append(f"`{key}` would make the {ft.num_generations} completions of a prompt identical, and "
                        f"`stage: {ft.stage}` learns from their differences; {fix}.")
    if gen.max_new_tokens not in SAVED_DEFAULTS:
        problems.append(f"`max_new_tokens` sets the length of chat and predict replies; `stage: {ft.stage}` caps its "
                        f"completions with `max_completion_length` (now {ft.max_completion_length}): set that instead.")
    if tr.do_train and ft.finetuning_type == "freeze":
        logger.info("GRPO/RLOO with freeze tuning trains the last %s layers.", ft.freeze_trainable_layers)
    return problems


def _json_table(file: Path) -> tuple[dict[str, Any], str | None]:
    """A JSON object file's contents, or why it is not one."""
    from engine.models.registry import ConfigTooLarge, read_config_text

    try:
        data = json.loads(read_config_text(file))  # a regular file of at most a config's size
    except ConfigTooLarge as err:
        return {}, str(err)
    except (OSError, ValueError, RecursionError) as err:
        return {}, f"{file.name} cannot be read ({type(err).__name__})"
    return (data, None) if isinstance(data, dict) else ({}, f"{file.name} is not a JSON object")


def check_reward_model(path: str, cfg: RunConfig | None = None) -> list[str]:
    """Problems of ``reward_model``: an rm run's output_dir, this project's (a ``SEQ_CLS`` adapter or a
    ``...ForSequenceClassification``) or LLaMA-Factory's (a causal LM, adapter or whole, with its value head). An
    adapter's base model that is a hub id must be in the local cache, or the hub reachable (``cfg``: the run's
    config, whose cache_dir and revision the reward model loads with; not asked without it)."""
    from engine.models.value_head import VALUE_HEAD_FILES, value_head_file

    folder = Path(path).expanduser()
    if not folder.is_dir():
        return [f"`reward_model: {path}` does not exist; give the output_dir of a finished `stage: rm` run."]
    damaged = f"`reward_model: {path}`: {{}}; the folder is damaged or not an rm run's: give the output_dir of a " \
        "finished `stage: rm` run (train it again if its files were lost)."
    head_file = value_head_file(folder)  # LLaMA-Factory's rm output: its head beside the causal LM
    value_head = head_file is not None
    if (folder / "adapter_config.json").is_file():
        config, problem = _json_table(folder / "adapter_config.json")
        if problem:
            return [damaged.format(problem)]
        task = config.get("task_type")
        if not (task in (None, "SEQ_CLS") or (task == "CAUSAL_LM" and value_head)):
            return [f"`reward_model: {path}` holds a {task} adapter without a value head "
                    f"({' or '.join(VALUE_HEAD_FILES)}), not a reward model; give the output_dir of a `stage: rm` "
                    "run (this project's or LLaMA-Factory's)."]
        base = adapter_base(folder, config)
        if not isinstance(base, str) or not base.strip():
            return [damaged.format("its adapter_config.json names no base model (`base_model_name_or_path`)")]
        local = Path(base).expanduser()
        if local.is_dir():
            return _head_problems(path, head_file, local / "config.json")
        if base.startswith(("/", ".", "~")) or local.is_absolute():
            return [f"`reward_model: {path}` is a LoRA adapter of `{base}`, which does not exist here: put that "
                    f"model back at that path (or set {_base_keys(folder)} to where it is now)."]
        if HUB_ID.match(base) and cfg is not None:
            return _hub_base_problems(path, folder, base, head_file, cfg)
        return _head_problems(path, head_file, local / "config.json")  # the demo, or a name the loader explains
    config_file = folder / "config.json"
    if not config_file.is_file():
        return [f"`reward_model: {path}` holds no model (no adapter_config.json or config.json); give the "
                "output_dir of a finished `stage: rm` run."]
    config, problem = _json_table(config_file)
    if problem:
        return [damaged.format(problem)]
    architectures = config.get("architectures") or []
    architectures = [architectures] if isinstance(architectures, str) else architectures
    architectures = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    if architectures and not value_head and not any(a.endswith("ForSequenceClassification") for a in architectures):
        return [f"`reward_model: {path}` is a {architectures[0]} without a value head ({' or '.join(VALUE_HEAD_FILES)}"
                "), not a reward model (a scalar-head ...ForSequenceClassification, or LLaMA-Factory's causal LM "
                "with its value head); train one with `stage: rm` and give its output_dir."]
    return _head_problems(path, head_file, config_file)


def _base_keys(folder: Path) -> str:
    """Where an rm run's folder names its adapter's base model (see :func:`adapter_base`)."""
    keys = "`base_model_name_or_path` in the adapter's adapter_config.json"
    return keys + (" and `model_name_or_path` in its lf_config.yaml" if (folder / "lf_config.yaml").is_file() else "")


def _hub_base_problems(path: str, folder: Path, base: str, head_file: Path | None, cfg: RunConfig) -> list[str]:
    """An rm adapter whose base model is a hub id: it must be in the local cache (whose config.json then says the
    hidden size its value head must take), or the hub reachable."""
    from engine.hub_reach import cached_hub_config, hub_model_problems

    problems = hub_model_problems(cfg, base, f"`reward_model: {path}` is a LoRA adapter of `{base}`, a hub id",
                                  f"set {_base_keys(folder)} to DIR")
    if problems:
        return problems
    try:
        cached = cached_hub_config(cfg, base)
    except (ImportError, ValueError):
        cached = None
    return _head_problems(path, head_file, Path(cached) if cached else None)


def adapter_base(folder: Path, config: dict[str, Any]) -> Any:
    """The base model of an rm run's adapter (``config``: its adapter_config.json), the one checked here and loaded
    by :func:`engine.train.reward_model.load_reward_model`: the run's lf_config.yaml's first."""
    from engine.checkpoints import read_saved_config

    saved = read_saved_config(folder).get("model_name_or_path")  # a broken file is named there
    if isinstance(saved, str) and saved.strip():
        return saved
    return config.get("base_model_name_or_path")


def _head_problems(path: str, head_file: Path | None, config_file: Path | None) -> list[str]:
    """LLaMA-Factory's value head read from its header: its shapes, and its inputs against the model's hidden size
    (where the model's config.json is here to say it)."""
    from engine.models.value_head import value_head_inputs

    if head_file is None:
        return []
    inputs, problem = value_head_inputs(head_file)
    if problem:
        return [problem]
    config = _json_table(config_file)[0] if config_file is not None and config_file.is_file() else {}
    text = config.get("text_config")
    hidden = config.get("hidden_size") or (text.get("hidden_size") if isinstance(text, dict) else None)
    if inputs is not None and isinstance(hidden, int) and not isinstance(hidden, bool) and hidden != inputs:
        return [f"`reward_model: {path}`: its value head {head_file.name} takes {inputs} inputs and the model's "
                f"hidden size is {hidden}: the head was trained on another model. Give the rm run's output_dir as "
                "it saved it (with the model it was trained on)."]
    return []


def check_stage(cfg: RunConfig) -> None:
    """Refuse an RL config (or ppo) before any model loads; does nothing for other stages."""
    if cfg.finetuning.stage in RL_STAGES + ("ppo",) or cfg.finetuning.reward_funcs or cfg.finetuning.reward_model:
        problems = check_rl(cfg)
        if problems:
            raise UserError("\n".join(problems) if len(problems) == 1 else
                            f"{len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems))


def refuse_ppo(*args: Any, **kwargs: Any) -> Any:
    raise UserError(ppo_refusal())
