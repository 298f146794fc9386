"""Training end to end on the built-in demo model: every stage and method, the run folder, abort, resume."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FAST = ["max_steps=2", "logging_steps=1", "save_strategy=no", "plot_loss=true", "max_samples=16",
        f"dataset_dir={EXAMPLES / 'data'}"]


def events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines() if x.strip()]


def train(example: str, out: Path, *extra: str) -> int:
    return main(["train", str(EXAMPLES / example), f"output_dir={out}", *FAST, *extra])


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_sft_lora_writes_a_standard_adapter_and_the_run_folder(tmp_path):
    out = tmp_path / "sft"
    assert train("sft_lora_demo.yaml", out, "max_steps=4") == 0
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert (out / "loss.png").stat().st_size > 1000
    assert (out / "lf_config.yaml").is_file() and (out / "lf_versions.json").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["exit_code"] == 0 and run["kind"] == "train"
    evs = events(out)
    assert evs[0]["event"] == "start" and evs[0]["total_steps"] == 4 and evs[0]["trainable_params"] > 0
    logs = [e for e in evs if e["event"] == "log"]
    assert [e["step"] for e in logs] == [1, 2, 3, 4]
    assert all(e["loss"] > 0 and e["total_steps"] == 4 for e in logs)
    assert logs[-1]["tokens_per_s"] > 0 and logs[-1]["eta"] == 0
    assert evs[-1]["event"] == "end" and evs[-1]["status"] == "completed"
    # The resolved config reproduces the run.
    from engine.config import load_config

    assert load_config(out / "config.yaml").finetuning.lora_rank == 16
    # Plain PEFT loads the adapter.
    from peft import PeftConfig

    assert PeftConfig.from_pretrained(out).r == 16


@pytest.mark.parametrize("example", ["sft_full_demo.yaml", "sft_freeze_demo.yaml", "pt_lora_demo.yaml",
                                     "sft_tools_demo.yaml"])
def test_other_methods_and_stages_train(tmp_path, example):
    out = tmp_path / "run"
    assert train(example, out) == 0
    assert json.loads((out / "run.json").read_text())["status"] == "completed"
    assert any(e["event"] == "log" and e["loss"] > 0 for e in events(out))
    assert (out / "config.json").is_file() or (out / "adapter_config.json").is_file()


@pytest.mark.parametrize("stage", ["sft", "pt"])
def test_packed_batches_train(tmp_path, stage):
    out = tmp_path / "run"
    extra = ["dataset=demo_pt", "stage=pt"] if stage == "pt" else []
    assert train("sft_lora_demo.yaml", out, "packing=true", *extra) == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert [e["step"] for e in logs] == [1, 2] and all(e["loss"] > 0 for e in logs)


@pytest.mark.parametrize("example", ["rm_lora_demo.yaml", "dpo_lora_demo.yaml", "kto_lora_demo.yaml",
                                     "orpo_lora_demo.yaml", "simpo_lora_demo.yaml"])
def test_preference_stages_train(tmp_path, example):
    out = tmp_path / "run"
    assert train(example, out) == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert logs and all(e["loss"] is not None for e in logs)
    assert logs[-1]["tokens_seen"] > 0  # tokens/s on the board for every stage (ORPO and SimPO counted 0)
    assert (out / "adapter_config.json").is_file()


@pytest.mark.parametrize("example", ["dpo_lora_demo.yaml", "kto_lora_demo.yaml"])
def test_preference_stages_train_when_the_template_adds_tokens(tmp_path, example):
    """llama3's turn tokens are new to the demo tokenizer, so the output head trains their rows through PEFT's
    trainable-token wrapper; TRL's fused head reads the head's bias, which the wrapper did not forward (the run
    stopped at its first step with "'TrainableTokensWrapper' object has no attribute 'bias'")."""
    out = tmp_path / "run"
    assert train(example, out, "template=llama3") == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert logs and all(e["loss"] is not None for e in logs)
    assert json.loads((out / "adapter_config.json").read_text())["trainable_token_indices"]


@pytest.mark.parametrize("example", ["dpo_lora_demo.yaml", "kto_lora_demo.yaml"])
def test_lora_on_the_output_head_is_refused_where_trl_scores_through_a_fused_head(tmp_path, example, capsys):
    """TRL's fused head reads the frozen weight of a LoRA head, so its adapter would train but never score."""
    assert train(example, tmp_path / "run", "lora_target=q_proj,lm_head") == 2
    assert "a LoRA adapter on `lm_head` would be trained and saved but never used" in capsys.readouterr().err
    assert train(example, tmp_path / "whole", "additional_target=lm_head") == 0  # a full copy scores right


# LLaMA-Factory 0.9.5's get_batch_logps, odds_ratio_loss and simpo_loss on the inputs of _seeded_pairs(), read
# from its own code (CustomDPOTrainer's methods and trainer_utils.get_batch_logps in its environment)
LF_PAIR_VALUES = {
    "logps": [-19.014638900756836, -9.417325973510742, -16.29729461669922, -14.739496231079102],
    "lengths": [4, 2, 4, 4],
    "orpo_0.1": [4.863166809082031, 4.842940330505371], "simpo_0.1_0.5": [1.0169020891189575, 1.0390245914459229],
    "orpo_0.25": [5.0274271965026855, 5.044356346130371], "simpo_0.25_1.0": [1.4401805400848389, 1.5065549612045288],
}


def _seeded_pairs():
    import torch

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 7, 11, generator=generator) * 2
    labels = torch.randint(0, 11, (4, 7), generator=generator)
    labels[:, :3] = -100
    labels[1, 5:] = -100
    return logits, labels


def test_orpo_and_simpo_losses_equal_llamafactorys():
    import torch

    from engine.train.odds_ratio import answer_logps, pair_losses

    logits, labels = _seeded_pairs()
    sums, lengths = answer_logps(logits, labels)
    assert torch.allclose(sums, torch.tensor(LF_PAIR_VALUES["logps"]), atol=1e-5)
    assert lengths.tolist() == LF_PAIR_VALUES["lengths"]
    means = sums / lengths
    for beta, gamma in ((0.1, 0.5), (0.25, 1.0)):
        orpo, _ = pair_losses(means[:2], means[2:], "orpo", beta, gamma, 0.0)
        simpo, _ = pair_losses(means[:2], means[2:], "simpo", beta, gamma, 0.0)
        assert torch.allclose(orpo, torch.tensor(LF_PAIR_VALUES[f"orpo_{beta}"]), atol=1e-5)
        assert torch.allclose(simpo, torch.tensor(LF_PAIR_VALUES[f"simpo_{beta}_{gamma}"]), atol=1e-5)
    with_ftx, sft = pair_losses(means[:2], means[2:], "simpo", 0.1, 0.5, 0.3)
    assert torch.allclose(with_ftx, torch.tensor(LF_PAIR_VALUES["simpo_0.1_0.5"]) + 0.3 * -means[:2], atol=1e-5)


def test_orpo_pairs_are_our_tokens_chosen_first_with_only_the_answers_labelled():
    """The exact rows DPO trains on (TRL's experimental ORPO/CPO re-tokenized decoded text: an EOS of its own after
    the template's end of turn, its own truncation)."""
    from engine.train.odds_ratio import PairCollator

    batch = PairCollator(0)([{"prompt_ids": [5, 6], "chosen_ids": [7, 8, 9], "rejected_ids": [3]},
                             {"prompt_ids": [4], "chosen_ids": [], "rejected_ids": [2, 2]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 0, 0, 0], [4, 0, 0, 0, 0, 0, 0, 0],
                                           [5, 6, 3, 0, 0, 0, 0, 0], [4, 2, 2, 0, 0, 0, 0, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 7, 8, 9, -100, -100, -100], [-100] * 8,
                                        [-100, -100, 3, -100, -100, -100, -100, -100],
                                        [-100, 2, 2, -100, -100, -100, -100, -100]]
    assert batch["attention_mask"].sum(-1).tolist() == [5, 1, 3, 3]


@pytest.mark.parametrize("loss", ["orpo", "simpo"])
def test_a_pair_left_without_an_answer_token_adds_nothing_instead_of_nan(loss):
    from collections import defaultdict

    import torch

    from engine.train.odds_ratio import OddsRatioTrainer

    trainer = OddsRatioTrainer.__new__(OddsRatioTrainer)  # only what compute_loss touches
    trainer.pref_loss, trainer.beta, trainer.gamma, trainer.ftx = loss, 0.1, 0.5, 0.0
    trainer._pair_metrics = {"train": defaultdict(list)}
    trainer.model = torch.nn.Linear(1, 1)
    logits, labels = _seeded_pairs()
    labels[1] = -100  # the second pair's chosen answer was cut to nothing

    class Model(torch.nn.Module):
        def forward(self, **_):
            return type("Out", (), {"logits": logits})()

    value = trainer.compute_loss(Model(), {"input_ids": labels.clamp(min=0), "attention_mask": labels * 0 + 1,
                                           "labels": labels})
    first = LF_PAIR_VALUES["orpo_0.1" if loss == "orpo" else "simpo_0.1_0.5"][0]
    assert torch.isfinite(value) and abs(float(value) - first / 2) < 1e-5  # the other pair adds 0 to the mean


def test_orpo_metrics_are_those_of_every_rank(tmp_path):
    """ORPO's logged pair metrics on two processes (one batch of two pairs each) equal those of one process over the
    same four pairs, as LLaMA-Factory reduces them across ranks (rank 0 logged only its own pairs before). The two
    processes shard the model with FSDP2, which ORPO / SimPO's trainer takes as SFT's does (it ran as DDP, with
    `fsdp` silently dropped)."""
    common = ["max_steps=1", "logging_steps=1", "save_strategy=no", "disable_shuffling=true", "max_samples=4",
              "learning_rate=1e-4", f"dataset_dir={EXAMPLES / 'data'}"]
    single = tmp_path / "single"
    assert main(["train", str(EXAMPLES / "orpo_lora_demo.yaml"), f"output_dir={single}", *common,
                 "per_device_train_batch_size=4"]) == 0
    ranks = tmp_path / "ranks"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(EXAMPLES / "orpo_lora_demo.yaml"), f"output_dir={ranks}", *common, "per_device_train_batch_size=2",
           "fsdp=full_shard auto_wrap", f"fsdp_config={EXAMPLES / 'fsdp' / 'fsdp2.json'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    parallel = json.loads((ranks / "run.json").read_text())["parallel"]
    assert parallel["strategy"] == "fsdp2" and parallel["sharded"] is True
    want, got = ([e for e in events(folder) if e["event"] == "log"][0] for folder in (single, ranks))
    keys = ["rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected", "sft_loss",
            "odds_ratio_loss", "loss"]
    for key in keys:
        assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-5), key


def test_user_errors_exit_2_without_traceback(tmp_path, capsys):
    code = main(["train", str(EXAMPLES / "sft_lora_demo.yaml"), "lerning_rate=1", "dataset=nope",
                 f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Did you mean `learning_rate`" in err and "Traceback" not in err


def test_dataset_problems_are_found_before_loading(tmp_path, capsys):
    code = main(["train", str(EXAMPLES / "sft_lora_demo.yaml"), "dataset=demo_idnetity", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and "demo_identity" in err and "Traceback" not in err
    code = main(["train", str(EXAMPLES / "dpo_lora_demo.yaml"), "dataset=demo_alpaca", f"output_dir={tmp_path}"])
    assert code == 2 and "demo_alpaca" in capsys.readouterr().err


def test_eval_and_predict_write_metrics(tmp_path):
    adapter = tmp_path / "sft"
    assert train("sft_lora_demo.yaml", adapter) == 0
    common = [f"adapter_name_or_path={adapter}", "max_samples=4", "max_new_tokens=8", f"dataset_dir={EXAMPLES / 'data'}"]
    # eval loss in a run of its own: do_predict needs predict_with_generate (as in LLaMA-Factory), under which
    # evaluation generates too
    scored = tmp_path / "eval"
    code = main(["eval", str(EXAMPLES / "predict_demo.yaml"), *common, f"output_dir={scored}", "do_eval=true",
                 "do_predict=false", "predict_with_generate=false"])
    assert code == 0
    results = json.loads((scored / "all_results.json").read_text())
    assert "eval_loss" in results and "perplexity" in results
    # an eval-only run reports no training counters (they would all be 0), and shows evaluation progress
    assert not {"epoch", "num_input_tokens_seen", "eval_model_preparation_time"} & set(results)
    evs = events(scored)
    assert all("step" not in e and "epoch" not in e for e in evs if e["event"] == "eval")
    assert any(e["event"] == "progress" and e["stage"] == "eval" for e in evs)
    out = tmp_path / "pred"
    assert main(["eval", str(EXAMPLES / "predict_demo.yaml"), *common, f"output_dir={out}", "do_eval=true"]) == 0
    results = json.loads((out / "all_results.json").read_text())
    # as transformers' save_metrics (LLaMA-Factory calls it for both): every split merged into all_results.json
    assert {"eval_bleu-4", "predict_bleu-4", "predict_rouge-1", "predict_rouge-2", "predict_rouge-l"} <= set(results)
    predicted = (out / "predict_results.json").read_text()
    assert predicted == json.dumps(json.loads(predicted), indent=4, sort_keys=True)
    rows = [json.loads(x) for x in (out / "generated_predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {"prompt", "predict", "label"} <= set(rows[0])
    assert json.loads((out / "run.json").read_text())["kind"] == "predict"
    assert not {"epoch", "num_input_tokens_seen"} & set(results)


def test_resume_from_checkpoint_continues(tmp_path):
    out = tmp_path / "run"
    assert train("sft_lora_demo.yaml", out, "save_strategy=steps", "save_steps=2") == 0
    assert (out / "checkpoint-2" / "lf_config.yaml").is_file()
    assert train("sft_lora_demo.yaml", out, "max_steps=3", "save_strategy=steps", "save_steps=2",
                 "resume_from_checkpoint=true") == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert logs[-1]["step"] == 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])  # SIGHUP: the terminal or the ssh session closed
def test_sigterm_saves_a_checkpoint_and_ends_aborted(tmp_path, sig, capsys):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "engine", "train", str(EXAMPLES / "sft_lora_demo.yaml"), f"output_dir={out}",
           "max_steps=500", "logging_steps=1", "save_strategy=no", f"dataset_dir={EXAMPLES / 'data'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            if (out / "events.jsonl").is_file() and any(e["event"] == "log" for e in events(out)):
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.5)
        if sig == signal.SIGTERM:  # a second run into the live run's folder is refused, even with overwrite
            # (run in this process: the live run is the subprocess above, whose lock and run.json refuse it the same
            # way; two more interpreters cost seconds of imports each)
            before = (out / "run.json").read_bytes(), (out / "config.yaml").read_bytes()
            capsys.readouterr()
            assert main([*cmd[3:6], cmd[-1], "max_steps=1", "overwrite_output_dir=true"]) == 2
            assert "is the output folder of a run that is still going" in capsys.readouterr().err
            assert ((out / "run.json").read_bytes(), (out / "config.yaml").read_bytes()) == before
            assert main(["check", *cmd[4:6], cmd[-1], "overwrite_output_dir=true"]) != 0
            checked = capsys.readouterr()
            assert "still going" in checked.out + checked.err
        os.killpg(proc.pid, sig)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "aborted"
    assert list(out.glob("checkpoint-*")), "no checkpoint saved on SIGTERM"
    assert events(out)[-1] == {**events(out)[-1], "event": "end", "status": "aborted"}


def test_torchrun_two_processes_share_the_work(tmp_path):
    """Scale-out goes through torchrun (DDP over gloo on CPUs); rank 0 writes the run folder. FSDP2's example:
    tests/engine/test_parallel_fsdp.py."""
    example = "sft_lora_demo.yaml"
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(EXAMPLES / example), f"output_dir={out}", "max_steps=2", "logging_steps=1",
           "save_strategy=no", f"dataset_dir={EXAMPLES / 'data'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evs = events(out)
    assert evs[0]["world_size"] == 2
    assert json.loads((out / "run.json").read_text())["parallel"]["strategy"] == "ddp"  # read from the model
    assert [e["step"] for e in evs if e["event"] == "log"] == [1, 2]
    assert evs[-1]["status"] == "completed"
    assert (out / "adapter_model.safetensors").is_file()


@pytest.mark.parametrize("example", ["rm_lora_demo.yaml", "grpo_demo.yaml"])
def test_preference_reward_and_rl_trainers_shard_with_fsdp2_on_cpu_ranks(tmp_path, example):
    """The reward model's and GRPO / RLOO's trainers take FSDP2 on CPU processes as SFT's do (they ran as DDP, with
    `fsdp` silently dropped; ORPO's is checked with its metrics above)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(EXAMPLES / example), f"output_dir={out}", "fsdp=full_shard auto_wrap",
           f"fsdp_config={EXAMPLES / 'fsdp' / 'fsdp2.json'}", "max_steps=2", "logging_steps=1", "save_strategy=no",
           f"dataset_dir={EXAMPLES / 'data'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    parallel = json.loads((out / "run.json").read_text())["parallel"]
    assert parallel["strategy"] == "fsdp2" and parallel["sharded"] is True
    assert (out / "adapter_model.safetensors").is_file()
    if example == "grpo_demo.yaml":  # rank 0 sampled completions from the sharded model
        assert (out / "completions.jsonl").stat().st_size > 0


def test_muon_trains_full_finetuning(tmp_path):
    out = tmp_path / "muon"
    assert train("sft_full_demo.yaml", out, "use_muon=true", "learning_rate=0.02", "max_steps=3",
                 "gradient_accumulation_steps=8") == 0  # each step over the whole 16 rows, as before the default
    logs = [e for e in events(out) if e["event"] == "log"]
    assert logs[-1]["loss"] < logs[0]["loss"]


def test_label_smoothing_is_applied_as_transformers_does(tmp_path):
    """`label_smoothing_factor` (a TrainingArguments key LLaMA-Factory configs pass through) changes the loss, the
    same on padding-free and padded batches of the same rows (it had been silently ignored by the head-only loss)."""
    def first_loss(name, *extra):
        assert train("sft_lora_demo.yaml", tmp_path / name, "max_steps=1", "logging_steps=1", *extra) == 0
        return next(e["loss"] for e in events(tmp_path / name) if e["event"] == "log" and "loss" in e)

    from engine.demo import demo_home

    vocab = json.loads((demo_home() / "config.json").read_text())["vocab_size"]
    for mode in ([], ["padding_free=false"]):
        plain = first_loss(f"plain{len(mode)}", *mode)
        smooth = first_loss(f"smooth{len(mode)}", "label_smoothing_factor=0.3", *mode)
        # transformers' smoother: 0.7 * the cross-entropy + 0.3 * the mean of -log p over the vocabulary, which is
        # at least log(vocab) (Jensen); the same first batch and weights, so the cross-entropy is `plain`
        spread = (smooth - 0.7 * plain) / 0.3
        assert spread >= math.log(vocab) - 1e-3, (plain, smooth)


def test_overwrite_output_dir_replaces_the_earlier_run(tmp_path):
    """`overwrite_output_dir: true` had kept the replaced run's checkpoints (a later resume continued *that* run)
    and appended to its events (loss.png joined both runs into one zig-zag). Found by an outside review."""
    from engine.config import build_config
    from engine.train.output_dir import resolve_resume

    out = tmp_path / "run"
    assert train("sft_lora_demo.yaml", out, "max_steps=3", "save_strategy=steps", "save_steps=1") == 0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    assert train("sft_lora_demo.yaml", out, "max_steps=1", "save_strategy=steps", "save_steps=1",
                 "overwrite_output_dir=true") == 0
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-1"]
    evs = events(out)
    assert [e["event"] for e in evs].count("start") == 1 and [e["step"] for e in evs if e["event"] == "log"] == [1]
    example = yaml.safe_load((EXAMPLES / "sft_lora_demo.yaml").read_text())  # the run's own settings (rank 16)
    cfg = build_config({**example, "output_dir": str(out), "resume_from_checkpoint": True})
    assert resolve_resume(cfg) == str(out / "checkpoint-1")
    # a resumed run keeps the run's events and checkpoints
    assert train("sft_lora_demo.yaml", out, "max_steps=2", "save_strategy=steps", "save_steps=1",
                 "resume_from_checkpoint=true") == 0
    assert [e["step"] for e in events(out) if e["event"] == "log"] == [1, 2]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
