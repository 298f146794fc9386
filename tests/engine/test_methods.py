"""Method keys from LLaMA-Factory that change training: each test shows the effect, not only that the key parses."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from engine.cli import main
from engine.config import ConfigError, build_config
from tests.engine.tinymodels import build_tiny_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "data"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def run(tiny: Path, out: Path, *extra: str, command: str = "train") -> int:
    args = [f"model_name_or_path={tiny}", "template=chatml", "dataset=alpaca_small", f"dataset_dir={FIXTURES}",
            f"output_dir={out}", "max_steps=3", "logging_steps=1", "save_strategy=no", "plot_loss=false",
            "per_device_train_batch_size=4", "gradient_accumulation_steps=1", "cutoff_len=64",
            "learning_rate=0.01", "report_to=none", "overwrite_output_dir=true", "group_by_length=false"]
    config = out.parent / f"{out.name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"model_name_or_path: {tiny}\n")
    return main([command, str(config), *args, *extra])


def losses(out: Path) -> list[float]:
    lines = (out / "events.jsonl").read_text().splitlines()
    return [e["loss"] for e in map(json.loads, lines) if e["event"] == "log"]


def needs(package: str):
    return pytest.mark.skipif(importlib.util.find_spec(package) is None, reason=f"{package} is not installed")


# -- config --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("disabled", "eager"), ("sdpa", "sdpa"),
                                                 ("fa2", "flash_attention_2"), ("fa3", "flash_attention_3")])
def test_llamafactory_flash_attn_values_are_accepted(value, expected):
    assert build_config({"flash_attn": value}).model.flash_attn == expected


def test_disabled_attention_loads_eager(tiny):
    from engine.models import load_model, load_tokenizer

    cfg = build_config({"model_name_or_path": str(tiny), "flash_attn": "disabled"})
    model = load_model(cfg.model, cfg.finetuning, load_tokenizer(cfg.model), is_trainable=False)
    assert model.config._attn_implementation == "eager"


def test_predict_config_without_dataset_does_not_train():
    predict = {"do_predict": True, "predict_with_generate": True}
    cfg = build_config({"stage": "sft", **predict, "eval_dataset": "identity", "finetuning_type": "lora"})
    assert cfg.train.do_train is False
    assert build_config({"dataset": "x", **predict, "val_size": 0.1}).train.do_train is True
    assert build_config({**predict, "eval_dataset": "x", "do_train": True}).train.do_train is True


@pytest.mark.parametrize(("mapping", "message"), [
    ({"use_galore": True}, "cannot be combined with `finetuning_type: lora`"),
    ({"use_galore": True, "use_badam": True, "finetuning_type": "full"}, "cannot be combined; choose one"),
    ({"loraplus_lr_ratio": 16, "finetuning_type": "full"}, "only valid for LoRA"),
    ({"use_galore": True, "galore_layerwise": True, "finetuning_type": "full", "gradient_accumulation_steps": 4},
     "gradient_accumulation_steps: 1"),
    ({"pissa_init": True, "pissa_convert": False}, "wrong weights"),
    ({"use_badam": True, "finetuning_type": "freeze"}, "needs `finetuning_type: full`"),
    ({"pissa_init": True, "stage": "kto"}, "cannot be used with `stage: kto`"),
    ({"finetuning_type": "oft", "use_dora": True}, "only valid for LoRA"),
    ({"use_apollo": True, "apollo_scale_front": True, "finetuning_type": "full"}, "apollo_scale_front"),
    # Adam-mini gives queries and keys one rate per head of the weight itself: a LoRA matrix cannot be cut so
    ({"use_adam_mini": True}, "cannot be combined with `finetuning_type: lora`"),
    ({"use_adam_mini": True, "use_badam": True, "finetuning_type": "full"}, "cannot be combined; choose one"),
])
def test_conflicting_method_keys_are_refused(mapping, message):
    with pytest.raises(ConfigError) as err:
        build_config(mapping)
    assert message in str(err.value)


@pytest.mark.parametrize("key", ["shift_attn", "mixture_of_depths",
                                 "upcast_layernorm", "upcast_lmhead_output", "push_to_hub"])
def test_unimplemented_llamafactory_switches_are_refused_when_on(key):
    with pytest.raises(ConfigError, match=rf"`{key}: .*not|`{key}: .*remove it"):
        build_config({key: "convert" if key == "mixture_of_depths" else True})
    assert not any(key in note for note in build_config({key: False}).notes)  # off is what happens anyway


def test_run_name_reaches_the_trackers():
    assert build_config({"run_name": "my-run"}).extra["run_name"] == "my-run"


def test_missing_optimizer_package_is_refused(monkeypatch):
    import engine.config.method_checks as checks

    real = importlib.util.find_spec
    monkeypatch.setattr(checks.importlib.util, "find_spec", lambda name: None if name == "badam" else real(name))
    with pytest.raises(ConfigError, match=r"needs the `badam` package.*lf-board\[methods\]"):
        build_config({"use_badam": True, "finetuning_type": "full"})


# -- optimizers ----------------------------------------------------------------------------------------------------
def _optimizer_after_training(tiny: Path, tmp_path: Path, monkeypatch, *extra: str):
    """Train and return (optimizer object, losses)."""
    from transformers import Trainer

    seen = {}
    original = Trainer.create_optimizer

    def spy(self, *args, **kwargs):  # the Trainer's own path (GaLore / APOLLO through transformers)
        seen["opt"] = original(self, *args, **kwargs)
        return seen["opt"]

    monkeypatch.setattr(Trainer, "create_optimizer", spy)
    import engine.train.methods as methods

    own = methods._own_optimizer

    def own_spy(trainer, builder, cfg):
        def build(model, args, cfg_):
            seen["opt"] = builder(model, args, cfg_)
            return seen["opt"]
        own(trainer, build, cfg)

    monkeypatch.setattr(methods, "_own_optimizer", own_spy)
    out = tmp_path / "run"
    assert run(tiny, out, *extra) == 0
    return seen["opt"], losses(out)


@needs("galore_torch")
def test_galore_trains_with_galore_adamw(tiny, tmp_path, monkeypatch):
    opt, loss = _optimizer_after_training(tiny, tmp_path, monkeypatch, "finetuning_type=full", "use_galore=true",
                                          "galore_rank=4", "galore_target=q_proj,v_proj")
    inner = getattr(opt, "optimizer", opt)
    from galore_torch import GaLoreAdamW

    assert isinstance(inner, GaLoreAdamW)
    projected = [g for g in inner.param_groups if "rank" in g]
    assert projected and projected[0]["rank"] == 4 and len(projected[0]["params"]) == 4  # q,v x 2 layers
    assert any("projector" in state for state in inner.state.values())
    assert loss[-1] < loss[0]


@needs("apollo_torch")
def test_apollo_trains_with_apollo_adamw(tiny, tmp_path, monkeypatch):
    opt, loss = _optimizer_after_training(tiny, tmp_path, monkeypatch, "finetuning_type=full", "use_apollo=true",
                                          "apollo_rank=4", "apollo_scale=1")
    inner = getattr(opt, "optimizer", opt)
    from apollo_torch import APOLLOAdamW

    assert isinstance(inner, APOLLOAdamW)
    assert any(g.get("rank") == 4 and g.get("proj") == "random" for g in inner.param_groups)
    assert loss[-1] < loss[0]


@needs("badam")
def test_badam_updates_one_block_at_a_time(tiny, tmp_path, monkeypatch):
    opt, loss = _optimizer_after_training(tiny, tmp_path, monkeypatch, "finetuning_type=full", "use_badam=true",
                                          "badam_switch_interval=1", "max_steps=4", "learning_rate=0.02")
    from badam import BlockOptimizer

    assert isinstance(opt, BlockOptimizer)
    assert len(opt.block_prefix_list) >= 2  # one block per decoder layer, plus the rest
    assert loss[-1] < loss[0]


@needs("adam_mini")
def test_adam_mini_keeps_one_second_moment_per_block(tiny, tmp_path, monkeypatch):
    """Adam-mini as LLaMA-Factory builds it (the model's width and heads): queries and keys keep one second moment
    per head, the other matrices one per row, so its state is about half of AdamW's; the loss falls."""
    opt, loss = _optimizer_after_training(tiny, tmp_path, monkeypatch, "finetuning_type=full", "use_adam_mini=true",
                                          "max_steps=4", "learning_rate=0.003")
    from adam_mini import Adam_mini
    from transformers import AutoConfig

    assert isinstance(opt, Adam_mini)
    config = AutoConfig.from_pretrained(tiny)
    assert (opt.dim, opt.n_heads) == (config.hidden_size, config.num_attention_heads)
    states = {group["name"]: opt.state[group["params"][0]] for group in opt.param_groups}
    query = next(state for name, state in states.items() if "q_proj" in name)
    assert query["vmean"].numel() == config.num_attention_heads
    down = next(state for name, state in states.items() if "down_proj" in name)
    assert down["vmean"].numel() == config.hidden_size  # one per output neuron
    assert loss[-1] < loss[0]


def test_loraplus_gives_b_matrices_the_higher_learning_rate(tiny, tmp_path, monkeypatch):
    opt, loss = _optimizer_after_training(tiny, tmp_path, monkeypatch, "loraplus_lr_ratio=16",
                                          "learning_rate=0.001", "lr_scheduler_type=constant")
    lrs = sorted({g["lr"] for g in opt.param_groups if g["params"]})
    assert lrs == [pytest.approx(0.001), pytest.approx(0.016)]
    b_group = next(g for g in opt.param_groups if g["lr"] == pytest.approx(0.016) and g["params"])
    assert all(p.ndim == 2 for p in b_group["params"])
    assert loss[-1] < loss[0]


# -- PiSSA ---------------------------------------------------------------------------------------------------------
def _logits(model_dir: Path, adapter: Path | None = None) -> torch.Tensor:
    from engine.models import load_model, load_tokenizer

    mapping = {"model_name_or_path": str(model_dir), "template": "chatml"}
    if adapter is not None:
        mapping["adapter_name_or_path"] = str(adapter)
    cfg = build_config(mapping)
    tokenizer = load_tokenizer(cfg.model)
    model = load_model(cfg.model, cfg.finetuning, tokenizer, is_trainable=False)
    ids = torch.tensor([tokenizer("Hello, how are you? The cat sat on the mat.")["input_ids"]])
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_pissa_adapter_at_learning_rate_zero_reproduces_the_base_model(tiny, tmp_path):
    out = tmp_path / "pissa"
    assert run(tiny, out, "pissa_init=true", "learning_rate=0", "max_steps=1", "lora_rank=4") == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["init_lora_weights"] is True and config["r"] == 8  # converted: plain LoRA of rank 2r
    diff = (_logits(tiny, out) - _logits(tiny)).abs().max().item()
    assert diff < 1e-4


def test_the_initial_pissa_adapter_is_not_written_through_a_planted_link(tiny, tmp_path):
    """output_dir/pissa_init planted as a link to a folder elsewhere (a shared workspace) had PEFT write the initial
    adapter there, over files of the same names."""
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "adapter_model.safetensors").write_text("mine")
    out = tmp_path / "pissa"
    out.mkdir()
    (out / "pissa_init").symlink_to(victim, target_is_directory=True)
    assert run(tiny, out, "pissa_init=true", "max_steps=1", "lora_rank=4") == 0
    assert [p.name for p in victim.iterdir()] == ["adapter_model.safetensors"]
    assert (victim / "adapter_model.safetensors").read_text() == "mine"
    assert not (out / "pissa_init").is_symlink() and (out / "pissa_init" / "adapter_config.json").is_file()


def test_unconverted_pissa_checkpoint_is_refused_for_inference(tmp_path):
    from torch import nn

    from engine.errors import ModelError
    from engine.models.adapters import _load_adapter

    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA",
                                                              "init_lora_weights": "pissa_niter_16"}))
    with pytest.raises(ModelError, match="unconverted PiSSA adapter"):
        _load_adapter(nn.Linear(2, 2), str(tmp_path), is_trainable=False)


# -- OFT -----------------------------------------------------------------------------------------------------------
def test_oft_trains_saves_and_loads(tiny, tmp_path):
    out = tmp_path / "oft"
    assert run(tiny, out, "finetuning_type=oft", "oft_block_size=8", "learning_rate=0.05", "max_steps=4") == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "OFT" and config["oft_block_size"] == 8
    loss = losses(out)
    assert loss[-1] < loss[0]
    assert (_logits(tiny, out) - _logits(tiny)).abs().max().item() > 1e-4  # the adapter changes the model


def test_oft_block_size_must_divide_the_layers(tiny, tmp_path, capsys):
    assert run(tiny, tmp_path / "bad", "finetuning_type=oft", "oft_block_size=7") == 2
    assert "oft_block_size: 7" in capsys.readouterr().err


# -- RoPE scaling --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "extra"), [
    ("linear", {}), ("dynamic", {"original_max_position_embeddings": 256}),
    ("yarn", {"original_max_position_embeddings": 256}),
    ("llama3", {"original_max_position_embeddings": 256, "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
])
def test_rope_factor_follows_cutoff_len(kind, extra):
    from transformers import LlamaConfig

    from engine.models.rope import configure_rope

    config = LlamaConfig(max_position_embeddings=256)
    configure_rope(config, kind, 600)  # ceil(600 / 256) = 3
    assert config.max_position_embeddings == 768
    assert config.rope_parameters == {"rope_theta": 10000.0, "rope_type": kind, "factor": 3.0, **extra}
    fits = LlamaConfig(max_position_embeddings=256)
    assert configure_rope(fits, kind, 200) is None and fits.max_position_embeddings == 256
    inference = LlamaConfig(max_position_embeddings=256)
    assert configure_rope(inference, kind, None)["factor"] == 2.0


def test_rope_scaling_reaches_the_loaded_model(tiny):
    from engine.models import load_model, load_tokenizer

    def inv_freq(**extra):
        cfg = build_config({"model_name_or_path": str(tiny), "finetuning_type": "full", **extra})
        model = load_model(cfg.model, cfg.finetuning, load_tokenizer(cfg.model), is_trainable=True,
                           train_args=cfg.train, methods=cfg.methods, max_length=1000)
        return model.model.rotary_emb.inv_freq.clone(), model.config.max_position_embeddings

    plain, length = inv_freq()
    scaled, scaled_length = inv_freq(rope_scaling="linear")
    assert length == 256 and scaled_length == 1024  # ceil(1000 / 256) = 4
    assert torch.allclose(scaled, plain / 4)


# -- NEFTune -------------------------------------------------------------------------------------------------------
def test_neftune_noises_embeddings_in_training_only(tiny, tmp_path):
    from transformers import TrainerCallback

    import engine.train.workflow as workflow

    seen = {}

    class Probe(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            embed = model.get_input_embeddings()
            ids = torch.tensor([[5, 6, 7]])
            was = embed.training
            embed.train()
            seen["train_differs"] = not torch.equal(embed(ids), embed(ids))
            embed.eval()
            seen["eval_equal"] = torch.equal(embed(ids), embed(ids))
            embed.train(was)

    original = workflow.STAGES["sft"]

    def with_probe(cfg, model, tokenizer, bundle, callbacks):
        trainer = original(cfg, model, tokenizer, bundle, callbacks + [Probe()])
        seen["trainer"] = trainer
        return trainer

    workflow.STAGES["sft"] = with_probe
    try:
        assert run(tiny, tmp_path / "neft", "neftune_noise_alpha=5", "max_steps=1") == 0
    finally:
        workflow.STAGES["sft"] = original
    assert seen["train_differs"] and seen["eval_equal"]
    embed = seen["trainer"].model.get_input_embeddings()
    ids = torch.tensor([[5, 6, 7]])
    embed.train()
    assert torch.equal(embed(ids), embed(ids))  # the hook is gone after training


# -- predict without `dataset` (LLaMA-Factory's nlg_eval/llama3_lora_predict.yaml, scaled down) ----------------------
def test_llamafactory_predict_example_runs_without_dataset(tiny, tmp_path):
    adapter = tmp_path / "sft"
    assert run(tiny, adapter, "max_steps=1") == 0
    out = tmp_path / "predict"
    config = tmp_path / "predict.yaml"
    config.write_text(f"""\
model_name_or_path: {tiny}
adapter_name_or_path: {adapter}
trust_remote_code: true
stage: sft
do_predict: true
finetuning_type: lora
eval_dataset: alpaca_small,sharegpt_small
dataset_dir: {FIXTURES}
template: chatml
cutoff_len: 64
max_samples: 2
overwrite_cache: true
preprocessing_num_workers: 2
dataloader_num_workers: 0
output_dir: {out}
overwrite_output_dir: true
report_to: none
per_device_eval_batch_size: 1
predict_with_generate: true
max_new_tokens: 4
ddp_timeout: 180000000
""")
    assert main(["train", str(config)]) == 0
    rows = (out / "generated_predictions.jsonl").read_text().splitlines()
    assert len(rows) == 4
    assert not (out / "adapter_model.safetensors").exists()  # nothing was trained


# -- per-module profiler -------------------------------------------------------------------------------------------
def test_profiler_writes_the_table_and_event(tiny, tmp_path):
    out = tmp_path / "prof"
    assert run(tiny, out, "profile_modules=*.layers.*.self_attn,*.layers.0.mlp", "profiler_warmup_steps=1",
               "profiler_active_steps=2", "max_steps=4") == 0
    report = json.loads((out / "profile.json").read_text())
    assert report["steps"] == 2 and report["clock"] == "wall clock" and report["step_ms"] > 0
    names = {r["module"] for r in report["modules"]}
    assert names == {"model.layers.0.self_attn", "model.layers.1.self_attn", "model.layers.0.mlp"}
    for row in report["modules"]:
        assert row["calls"] == 1 and row["forward_ms"] > 0 and row["backward_ms"] > 0 and 0 < row["share"] < 1
    assert "| model.layers.0.mlp |" in (out / "profile.md").read_text()
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    profile = [e for e in events if e["event"] == "profile"]
    assert len(profile) == 1 and len(profile[0]["modules"]) == 3


def test_profiler_ranks_the_slow_module_first(monkeypatch):
    import time

    from torch import nn
    from transformers import TrainerControl, TrainerState

    from engine.train.profiler import ModuleProfilerCallback

    class Slow(nn.Module):
        def forward(self, x):
            time.sleep(0.03)
            return x * 2

    model = nn.Sequential(nn.Linear(4, 4), Slow(), nn.Linear(4, 1))
    cb = ModuleProfilerCallback("0,1,2", warmup_steps=1, active_steps=2)
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(None, state, control, model=model)
    for step in range(4):
        state.global_step = step
        cb.on_step_begin(None, state, control)
        model(torch.randn(2, 4, requires_grad=True)).sum().backward()
        cb.on_step_end(None, state, control)
    report = cb.report
    assert report["steps"] == 2 and report["modules"][0]["module"] == "1"
    assert report["modules"][0]["forward_ms"] >= 25 and report["modules"][0]["share"] > 0.5
    assert not cb._handles  # hooks removed after the active steps


def test_disable_shuffling_feeds_the_data_in_order(tiny, tmp_path, monkeypatch):
    from torch.utils.data import SequentialSampler
    from transformers import Trainer

    samplers = []
    real = Trainer._get_train_sampler

    def spy(self, *args, **kwargs):
        samplers.append(real(self, *args, **kwargs))
        return samplers[-1]

    monkeypatch.setattr(Trainer, "_get_train_sampler", spy)
    assert run(tiny, tmp_path / "ordered", "disable_shuffling=true", "max_steps=1") == 0
    assert isinstance(samplers[0], SequentialSampler)
    assert run(tiny, tmp_path / "shuffled", "max_steps=1") == 0
    assert not isinstance(samplers[1], SequentialSampler)


def test_early_stopping_ends_training_when_the_eval_loss_stops_improving(tiny, tmp_path):
    out = tmp_path / "early"
    # learning rate 0: the second evaluation equals the first, which is no improvement, so patience 1 stops there
    assert run(tiny, out, "max_steps=8", "learning_rate=0", "val_size=0.5", "eval_strategy=steps", "eval_steps=1",
               "save_strategy=steps", "save_steps=1", "early_stopping_steps=1") == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert max(e.get("step", 0) for e in events) == 2
    assert [e["step"] for e in events if e["event"] == "eval"] == [1, 2, 2]  # the last: the final evaluation


def test_converted_pissa_adapter_keeps_new_token_rows(tiny, tmp_path):
    """PEFT's PiSSA conversion wrote only the lora_A/lora_B matrices while the adapter's config kept
    `trainable_token_indices` (rows of tokens the run added): evaluating the adapter then ended in a KeyError
    traceback (LLaMA-Factory's extras/pissa example on a model whose template adds a stop token)."""
    from safetensors import safe_open

    out = tmp_path / "pissa_tokens"
    assert run(tiny, out, "pissa_init=true", "max_steps=1", "lora_rank=4", "add_special_tokens=<|new_tok|>") == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["init_lora_weights"] is True and config["trainable_token_indices"]
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as saved:
        keys = list(saved.keys())
    assert any("trainable_tokens_delta" in key for key in keys) and any("lora_A" in key for key in keys)
    from engine.models import load_model, load_tokenizer

    cfg = build_config({"model_name_or_path": str(tiny), "template": "chatml", "adapter_name_or_path": str(out),
                        "add_special_tokens": "<|new_tok|>"})
    tokenizer = load_tokenizer(cfg.model)
    model = load_model(cfg.model, cfg.finetuning, tokenizer, is_trainable=False)  # a KeyError before
    assert model.get_input_embeddings().weight.shape[0] >= len(tokenizer)
