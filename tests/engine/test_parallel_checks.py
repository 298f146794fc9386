"""Scale-out checks as pure functions: FSDP words, DeepSpeed configs, N-D sizes, context-parallel data rules,
HyperParallel's refusals (with a fake package), the strategy check's estimate and refusals."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import types
from pathlib import Path

import pytest
import torch
import yaml

from engine.config import ConfigError, build_config, load_config
from engine.errors import UserError
from engine.train.parallel import context as cp
from engine.train.parallel import deepspeed as ds
from engine.train.parallel import hyper, nd, plan
from engine.train.parallel.fsdp import resolve_fsdp

REPO = Path(__file__).resolve().parents[2]
BASE = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "full", "dataset": "demo_alpaca",
        "template": "chatml", "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4}


def cfg_of(**extra):
    return build_config({**BASE, **extra})


# -- FSDP ------------------------------------------------------------------------------------------------------
def test_fsdp_words_fold_into_an_fsdp2_config():
    got = resolve_fsdp("full_shard auto_wrap offload", str(REPO / "examples/fsdp/fsdp2.json"))
    assert got["version"] == 2 and got["reshard_after_forward"] is True and got["cpu_offload"] is True
    assert "fsdp_version" not in got and got["auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert resolve_fsdp("shard_grad_op", None) == {"version": 2, "reshard_after_forward": False}
    assert resolve_fsdp(None, None) is None
    with pytest.raises(UserError, match="only in FSDP1"):
        resolve_fsdp("hybrid_shard", None)
    with pytest.raises(UserError, match="unknown option `full_shrad`"):
        resolve_fsdp("full_shrad", None)
    with pytest.raises(UserError, match="does not exist"):
        resolve_fsdp("full_shard", "nope.json")
    with pytest.raises(UserError, match="`fsdp` is not"):
        resolve_fsdp(None, "examples/fsdp/fsdp2.json")


@pytest.mark.parametrize(("extra", "words"), [
    ({"fsdp": "foo"}, "unknown option `foo`"),
    ({"fsdp": "hybrid_shard"}, "only in FSDP1"),
    ({"fsdp": "full_shard", "fsdp_config": "nope.json"}, "does not exist"),
    ({"fsdp_config": str(REPO / "examples/fsdp/fsdp2.json")}, "`fsdp` is not"),
    ({"fsdp": "full_shard", "fsdp_config": {"version": 3}}, "version 3 is unknown"),
])
def test_what_the_fsdp_settings_would_fail_on_is_refused_by_the_check(extra, words):
    """`fsdp: foo` passed `lf-engine check` and was refused when the training arguments were built, after the model
    had loaded (found by an outside attack on the command line)."""
    with pytest.raises(ConfigError) as info:
        cfg_of(**extra)
    assert words in str(info.value)
    assert cfg_of(fsdp="full_shard auto_wrap", fsdp_config=str(REPO / "examples/fsdp/fsdp2.json")).train.fsdp


def test_llamafactorys_top_level_layer_class_key_reaches_the_fsdp_config():
    """LLaMA-Factory 0.9.5's fp8_fsdp example gives `fsdp_transformer_layer_cls_to_wrap` at the top level (a
    transformers 4 field): it is accepted and becomes the FSDP config's `transformer_layer_cls_to_wrap`."""
    got = resolve_fsdp(["full_shard", "auto_wrap"], None, "LlamaDecoderLayer")
    assert got["transformer_layer_cls_to_wrap"] == ["LlamaDecoderLayer"]
    assert cfg_of(fsdp="full_shard auto_wrap",
                  fsdp_transformer_layer_cls_to_wrap="LlamaDecoderLayer").train.fsdp_transformer_layer_cls_to_wrap
    own = resolve_fsdp("full_shard", '{"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]}', "LlamaDecoderLayer")
    assert own["transformer_layer_cls_to_wrap"] == ["Qwen2DecoderLayer"]  # the FSDP config's own setting wins
    with pytest.raises(UserError, match="`fsdp_transformer_layer_cls_to_wrap` is set but `fsdp` is not"):
        resolve_fsdp(None, None, "LlamaDecoderLayer")


def test_training_arguments_get_fsdp_true_without_the_deprecation(monkeypatch, caplog):
    from engine.train.arguments import training_kwargs

    monkeypatch.setenv("WORLD_SIZE", "2")
    kwargs = training_kwargs(cfg_of(fsdp="full_shard auto_wrap", fsdp_config=str(REPO / "examples/fsdp/fsdp2.json")),
                             has_eval=False)
    assert kwargs["fsdp"] is True and kwargs["fsdp_config"]["reshard_after_forward"] is True
    monkeypatch.setenv("WORLD_SIZE", "1")
    with caplog.at_level(logging.WARNING, logger="engine.train.arguments"):
        assert "fsdp" not in training_kwargs(cfg_of(fsdp="full_shard"), has_eval=False)  # one process: unsharded
    assert "single process, so nothing is sharded" in caplog.text and "torchrun" in caplog.text


# -- DeepSpeed -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ds_z2.json", "ds_z3.json", "ds_z3_offload.json"])
def test_shipped_deepspeed_configs_are_consistent(name):
    assert ds.problems(ds.load(str(REPO / "examples/deepspeed" / name)), cfg_of(), world_size=2) == []


def test_deepspeed_mismatches_are_named_with_their_fix():
    bad = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "train_batch_size": 64,
           "gradient_clipping": 0.5, "bf16": {"enabled": True},
           "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"},
                                 "offload_optimizer": {"device": "nvme"}}}
    found = "\n".join(ds.problems(bad, cfg_of(), world_size=2))
    assert "`train_micro_batch_size_per_gpu: 4` differs from `per_device_train_batch_size: 2`" in found
    assert "`gradient_accumulation_steps: 2` differs from the run's 4" in found
    assert "2 × 4 × 2 = 16" in found
    assert "`gradient_clipping: 0.5` differs from `max_grad_norm: 1.0`" in found
    assert "`bf16.enabled: true` but the run has `bf16: false`" in found
    assert "`offload_param` needs ZeRO stage 3" in found and "has no `nvme_path`" in found
    z3 = {"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": False}}
    assert "saves no loadable model" in "\n".join(ds.problems(z3, cfg_of(), world_size=2))
    quant = cfg_of(finetuning_type="lora", quantization_bit=4)
    assert "cannot partition a quantized model" in "\n".join(ds.problems(z3, quant, 2))


def test_deepspeed_is_refused_before_the_model_loads(tmp_path, capsys):
    from engine.cli import main

    bad = tmp_path / "ds.json"
    bad.write_text(json.dumps({"train_micro_batch_size_per_gpu": 7, "zero_optimization": {"stage": 2}}))
    code = main(["train", str(REPO / "examples/sft_full_demo.yaml"), f"deepspeed={bad}", f"output_dir={tmp_path / 'o'}",
                 f"dataset_dir={REPO / 'examples/data'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "train_micro_batch_size_per_gpu: 7" in err  # every problem in one message, nothing loaded yet
    assert "on CPU processes accelerate ignores the DeepSpeed config" in err  # never a silent DDP run
    assert not (tmp_path / "o" / "model.safetensors").exists()


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed not installed (extra `deepspeed`)")
def test_deepspeed_trainer_handoff_fills_auto_and_refuses_mismatches(tmp_path):
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, gradient_accumulation_steps=4,
                             use_cpu=True, report_to=[])
    config = ds.load(str(REPO / "examples/deepspeed/ds_z3.json"))
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    hf = HfTrainerDeepSpeedConfig(dict(config))
    hf.trainer_config_process(args)
    assert hf.config["train_micro_batch_size_per_gpu"] == 2 and hf.config["gradient_accumulation_steps"] == 4
    assert hf.config["zero_optimization"]["stage"] == 3
    with pytest.raises(ds.DeepSpeedConfigError, match="does not match"):
        ds.trainer_handoff({**config, "train_micro_batch_size_per_gpu": 5}, args)


# -- N-D parallelism ----------------------------------------------------------------------------------------
def test_nd_sizes_must_multiply_to_the_world_size_and_cpu_refuses_device_only_axes():
    c = cfg_of(dp_shard_size=2, cp_size=2, fsdp="full_shard")
    found = "\n".join(nd.check(c, 2, "cpu"))
    assert "multiply to 4" in found and "`cp_size: 2` needs accelerators" in found
    assert nd.check(cfg_of(dp_shard_size=2), 2, "cpu") == []
    assert nd.training_kwargs(cfg_of(dp_shard_size=2), 2, "cpu") == {}
    with pytest.raises(UserError, match="tp_size: 2"):
        nd.training_kwargs(cfg_of(tp_size=2), 2, "cpu")
    got = nd.training_kwargs(cfg_of(dp_shard_size=2, cp_size=2, fsdp="full_shard"), 4, "cuda")["parallelism_config"]
    assert (got.dp_shard_size, got.cp_size, got.tp_size) == (2, 2, 1) and got.cp_backend == "torch"
    with pytest.raises(ConfigError, match="cp_size > 1` needs FSDP2"):
        cfg_of(cp_size=2)


def test_context_parallel_is_refused_for_media_models(tmp_path):
    """Splitting a sequence across ranks would part a row's soft tokens from its media features (and Llama 3.2
    Vision's cross-attention mask, Qwen-VL's 3D positions): refused for vision-language and audio models."""
    folder = tmp_path / "vlm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mllama", "vision_config": {"hidden_size": 32}}))
    for model in (str(folder), "demo-vlm"):
        found = "\n".join(nd.check(cfg_of(model_name_or_path=model, dp_shard_size=2, cp_size=2, fsdp="full_shard"),
                                   4, "cuda"))
        assert "a vision-language or audio model needs a row's media features" in found
    assert not nd.check(cfg_of(dp_shard_size=2, cp_size=2, fsdp="full_shard"), 4, "cuda")


# -- context parallelism ---------------------------------------------------------------------------------------
def test_cp_shifts_on_the_full_sequence_then_pads_then_balances():
    labels = torch.tensor([[10, 11, 12, 13, 14]])
    assert cp.shift_labels(labels).tolist() == [[11, 12, 13, 14, -100]]
    batch = {"input_ids": torch.tensor([[1, 2, 3, 4, 5]]), "labels": labels,
             "attention_mask": torch.ones(1, 5, dtype=torch.long), "position_ids": torch.arange(5)[None]}
    padded = cp.pad_to_multiple({**batch, "labels": cp.shift_labels(labels)}, cp_size=2, pad_token_id=0)
    assert padded["input_ids"].shape[-1] == 8  # a multiple of 2 x cp
    assert padded["labels"].tolist() == [[11, 12, 13, 14, -100, -100, -100, -100]]
    assert padded["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0, 0]]
    assert padded["position_ids"].tolist() == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert cp.shard_indices(8, 2, 0).tolist() == [0, 1, 6, 7] and cp.shard_indices(8, 2, 1).tolist() == [2, 3, 4, 5]
    r0, r1 = (cp.prepare_batch(batch, 2, r) for r in (0, 1))
    # rank 0's token at position 1 still predicts position 2's token, which lives on rank 1: the boundary is kept
    assert r0["input_ids"].tolist() == [[1, 2, 0, 0]] and r0["shift_labels"].tolist() == [[11, 12, -100, -100]]
    assert r1["input_ids"].tolist() == [[3, 4, 5, 0]] and r1["shift_labels"].tolist() == [[13, 14, -100, -100]]
    with pytest.raises(ValueError, match="multiple of 2 × cp_size"):
        cp.shard_indices(6, 2, 0)


def _cp_worker(rank: int, port: int, logits: torch.Tensor, labels: torch.Tensor, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    batch = cp.prepare_batch({"input_ids": torch.zeros_like(labels), "labels": labels}, 2, rank)
    keep = cp.shard_indices(8, 2, rank)
    mine = torch.nn.functional.pad(logits, (0, 0, 0, 8 - logits.shape[1])).index_select(1, keep).requires_grad_(True)
    loss_sum, count = cp.local_loss_sum(mine, batch["shift_labels"])
    loss, reported = cp.group_normalized_loss(loss_sum, count)
    loss.backward()
    Path(out, f"{rank}.json").write_text(json.dumps({"loss": reported.item(), "count": int(count),
                                                     "grad": mine.grad.tolist(), "keep": keep.tolist()}))
    dist.destroy_process_group()


def test_cp_loss_over_two_ranks_equals_the_full_sequence_loss(tmp_path):
    """2 gloo processes: the group-normalised loss (and its gradient) equals one process over the whole sequence."""
    import socket

    import torch.multiprocessing as mp

    torch.manual_seed(0)
    logits = torch.randn(1, 7, 11)
    labels = torch.tensor([[-100, -100, 3, 5, 7, 1, 2]])  # a masked prompt, then the answer
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_cp_worker, args=(port, logits, labels, str(tmp_path)), nprocs=2, start_method="spawn")
    ranks = [json.loads((tmp_path / f"{r}.json").read_text()) for r in (0, 1)]
    full_logits = logits.clone().requires_grad_(True)
    want = torch.nn.functional.cross_entropy(full_logits[0, :-1], labels[0, 1:], ignore_index=-100)
    want.backward()
    assert ranks[0]["loss"] == pytest.approx(want.item(), rel=1e-5) == ranks[1]["loss"]
    assert ranks[0]["count"] + ranks[1]["count"] == int((labels[0, 1:] != -100).sum())
    grad = torch.zeros(8, 11)
    for r in ranks:
        grad[r["keep"]] += torch.tensor(r["grad"][0])
    assert torch.allclose(grad[:7], full_logits.grad[0], atol=1e-6)


# -- HyperParallel --------------------------------------------------------------------------------------------
def test_hyper_parallel_refusals_follow_the_seed():
    with pytest.raises(ConfigError) as err:
        build_config({**BASE, "finetuning_type": "lora", "quantization_bit": 4, "use_hyper_parallel": True,
                      "mixture_of_depths": "convert", "stage": "dpo"})
    text = str(err.value)
    assert "supports full fine-tuning only" in text and "cannot train a quantized model" in text
    assert "Mixture-of-depths" in text and "stages pt and sft only" in text  # refused for every run
    with pytest.raises(ConfigError, match="Unsloth"):
        build_config({**BASE, "use_hyper_parallel": True, "use_unsloth": True})
    build_config({**BASE, "use_hyper_parallel": True})  # full fine-tuning of sft: accepted


def test_hyper_parallel_missing_package_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(hyper, "is_available", lambda: False)
    with pytest.raises(UserError, match="`hyper_parallel` package is not installed"):
        hyper.load_args(cfg_of(use_hyper_parallel=True))


@pytest.fixture()
def fake_hyper_parallel(monkeypatch):
    calls: list = []
    root = types.ModuleType("hyper_parallel")
    integ = types.ModuleType("hyper_parallel.integration")
    lf = types.ModuleType("hyper_parallel.integration.llamafactory")
    ctxmod = types.ModuleType("hyper_parallel.integration.llamafactory.context_parallel")

    class HyperParallelArguments:
        def __init__(self, cp_size=1):
            self.cp_size = cp_size

        @classmethod
        def from_finetuning_args(cls, args):
            calls.append(("args", args.hyper_parallel_args, args.finetuning_type))
            return cls(cp_size=1)

    lf.HyperParallelArguments = HyperParallelArguments
    lf.fsdp2_prepare_model = lambda accelerator, model, hp: calls.append(("fsdp2", model, hp.cp_size)) or "sharded"
    ctxmod.cp_prepare_model = lambda model, accelerator, hp: calls.append(("cp", model)) or f"cp({model})"
    for name, mod in {"hyper_parallel": root, "hyper_parallel.integration": integ,
                      "hyper_parallel.integration.llamafactory": lf,
                      "hyper_parallel.integration.llamafactory.context_parallel": ctxmod}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(hyper, "is_available", lambda: True)
    yield calls
    hyper.uninstall()


def test_hyper_parallel_takes_over_fsdp2_preparation(fake_hyper_parallel):
    import accelerate.accelerator as acc_module

    cfg = cfg_of(use_hyper_parallel=True, hyper_parallel_cp_size=2, hyper_parallel_args="hp.json")
    trainer = types.SimpleNamespace(accelerator=types.SimpleNamespace(is_fsdp2=False))
    with pytest.raises(UserError, match="runs on FSDP2"):
        hyper.install(trainer, cfg)
    trainer.accelerator.is_fsdp2 = True
    original = acc_module.fsdp2_prepare_model
    hp = hyper.install(trainer, cfg)
    assert hp.cp_size == 2 and trainer.hyper_parallel_args is hp  # the CP size follows our key
    assert acc_module.fsdp2_prepare_model(trainer.accelerator, "model") == "sharded"
    assert fake_hyper_parallel == [("args", "hp.json", "full"), ("args", "hp.json", "full"), ("cp", "model"),
                                   ("fsdp2", "cp(model)", 2)]
    hyper.uninstall()
    assert acc_module.fsdp2_prepare_model is original


# -- the strategy check ---------------------------------------------------------------------------------------
def _shape():
    return plan.ModelShape(params=1_000_000_000, hidden=2048, layers=24, vocab=32000, heads=16,
                           linear_in_out=24 * 7 * 4096)


def test_estimate_shards_with_fsdp2_and_zero3():
    c = cfg_of(cutoff_len=512)
    single = plan.estimate(c, _shape(), "ddp", 4)
    fsdp = plan.estimate(c, _shape(), "fsdp2", 4)
    z2 = plan.estimate(c, _shape(), "deepspeed_zero2", 4)
    assert single["weights"] == 4e9 and single["optimizer"] == 8e9 and single["gradients"] == 4e9
    assert fsdp["weights"] == 1e9 and fsdp["optimizer"] == 2e9 and fsdp["activations"] == single["activations"]
    assert z2["weights"] == 4e9 and z2["optimizer"] == 2e9
    lora = plan.estimate(cfg_of(finetuning_type="lora", lora_rank=8), _shape(), "ddp", 4)
    assert lora["optimizer"] < single["optimizer"] / 100


def test_strategy_refusals_name_the_fix():
    shape = _shape()
    p = plan.check(cfg_of(), "fsdp2", 2, shape=shape, device="cpu")
    assert p.per_device_gb and p.available_gb
    p = plan.check(cfg_of(), "ddp", 4, shape=shape, device="cuda", device_count=2)
    assert any("only 2 cuda devices are" in x for x in p.problems)
    huge = plan.ModelShape(params=10**12, hidden=8192, layers=80, vocab=128000, heads=64, linear_in_out=10**6)
    p = plan.check(cfg_of(), "ddp", 2, shape=huge, device="cpu")
    assert any("GiB per device" in x and "LoRA" in x and "FSDP2" in x for x in p.problems)
    p = plan.check(cfg_of(stage="dpo", finetuning_type="lora"), "fsdp2", 2, shape=shape, device="cpu")
    assert any("wired for stages pt and sft" in x for x in p.problems)
    p = plan.check(cfg_of(), "bogus", 2, shape=shape)
    assert "Unknown strategy" in p.problems[0]


def test_cp_collator_shifts_pads_and_continues_positions(chat_tokenizer):
    from engine.data.collator import build_collator

    c = cfg_of(cp_size=4, fsdp="full_shard")
    collate = cp.wrap_collator(build_collator(chat_tokenizer, c), c, chat_tokenizer)
    assert isinstance(collate, cp.ContextParallelCollator)
    rows = [{"input_ids": [5, 6, 7, 8, 9], "labels": [-100, -100, 7, 8, 9], "attention_mask": [1] * 5},
            {"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "attention_mask": [1] * 3}]
    batch = collate(rows)
    length = batch["input_ids"].shape[-1]
    assert length % 8 == 0 and "attention_mask" not in batch
    assert batch["shift_labels"][0, :5].tolist() == [-100, 7, 8, 9, -100]
    assert batch["shift_labels"][1, :3].tolist() == [6, 7, -100]
    assert (batch["shift_labels"][:, 5:] == -100).all()
    assert batch["position_ids"][0].tolist() == list(range(length))
    assert cp.wrap_collator("inner", cfg_of(), chat_tokenizer) == "inner"  # no CP: unchanged


def test_the_record_reads_the_prepared_model_not_the_config():
    from engine.train.parallel.info import describe, summary

    class DeepSpeedEngine(torch.nn.Module):  # stands for deepspeed's engine class, matched by name
        def zero_optimization_stage(self):
            return 3

    model = torch.nn.Linear(2, 2)
    assert describe(model) == {"strategy": "single", "world_size": 1, "sharded": False, "backend": None}
    got = describe(model, DeepSpeedEngine())
    assert got["strategy"] == "deepspeed_zero3" and got["sharded"] is True and got["zero_stage"] == 3
    assert summary(got) == "DeepSpeed ZeRO-3 · 1 process(es) · sharded"
    assert summary({**got, "strategy": "fsdp2", "world_size": 2, "backend": "gloo", "launcher": "ray"}) == (
        "FSDP2 · 2 process(es) · sharded · gloo · via ray")
    assert summary(None) == ""


def test_fsdp_settings_written_inline_in_a_yaml_config(tmp_path):
    # transformers' own form (and LLaMA-Factory's, through its argument parser): fsdp_config as a mapping
    path = tmp_path / "run.yaml"
    path.write_text("model_name_or_path: demo\nfsdp: full_shard auto_wrap\nfsdp_config:\n  fsdp_version: 2\n"
                    "  fsdp_offload_params: false\n  transformer_layer_cls_to_wrap: LlamaDecoderLayer\n")
    cfg = load_config(str(path))
    assert json.loads(cfg.train.fsdp_config) == {"fsdp_version": 2, "fsdp_offload_params": False,
                                                 "transformer_layer_cls_to_wrap": "LlamaDecoderLayer"}
    got = resolve_fsdp(cfg.train.fsdp, cfg.train.fsdp_config)
    assert got["version"] == 2 and got["offload_params"] is False and got["reshard_after_forward"] is True
    assert got["transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"
    assert resolve_fsdp("full_shard", ' {"version": 1}')["version"] == 1  # the board's text box takes JSON too
    with pytest.raises(UserError, match="not valid JSON"):
        resolve_fsdp("full_shard", "{version: 2}")
    with pytest.raises(ConfigError, match="NaN"):
        build_config({**BASE, "fsdp": "full_shard", "fsdp_config": {"limit": float("nan")}})
    with pytest.raises(ConfigError, match="ds_z2.json"):
        build_config({**BASE, "deepspeed": {"zero_optimization": {"stage": 2}}})
    # a run's saved config writes them back as the mapping they were, and reads back the same
    assert yaml.safe_load(cfg.to_yaml(minimal=False))["fsdp_config"] == {"fsdp_version": 2, "fsdp_offload_params": False,
                                                                         "transformer_layer_cls_to_wrap": "LlamaDecoderLayer"}
    saved = tmp_path / "saved.yaml"
    saved.write_text(cfg.to_yaml(), encoding="utf-8")
    assert load_config(str(saved)).train.fsdp_config == cfg.train.fsdp_config


def test_fsdp1_on_cpu_processes_is_refused_with_the_fix(monkeypatch):
    """accelerate raised a RuntimeError about `sync_module_states` while the Trainer was built (found by an outside
    test); FSDP1 on several CPU processes is now a user error pointing at FSDP2. One process or FSDP2: no change."""
    from types import SimpleNamespace

    import torch

    from engine.errors import UserError
    from engine.train.parallel.fsdp import refuse_fsdp1_on_cpu

    def args(version, device="cpu"):
        return SimpleNamespace(fsdp=True, fsdp_config={"version": version}, device=torch.device(device))

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match=r"FSDP1 .* does not run on CPU processes.*`fsdp_version: 2`"):
        refuse_fsdp1_on_cpu(args(1))
    refuse_fsdp1_on_cpu(args(2))
    refuse_fsdp1_on_cpu(args(1, "meta"))  # an accelerator's processes
    refuse_fsdp1_on_cpu(SimpleNamespace(fsdp=False, fsdp_config={"version": 1}, device=torch.device("cpu")))
    # one process: the arguments drop `fsdp` (with a warning), so FSDP1 there reaches no refusal and trains unsharded
    from engine.train.arguments import training_kwargs

    monkeypatch.setenv("WORLD_SIZE", "1")
    assert "fsdp" not in training_kwargs(cfg_of(fsdp="full_shard", fsdp_config='{"fsdp_version": 1}'), has_eval=False)
