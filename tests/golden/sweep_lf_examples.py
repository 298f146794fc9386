"""By hand: every example YAML LLaMA-Factory 0.9.5 ships, through ``lf-engine check`` (and a sample through a real run).

Not part of the test suite (it builds a dozen tiny models and runs ~90 engine processes: 10-20 minutes on 2 CPU
cores). It does what a user moving from LLaMA-Factory does: copy LLaMA-Factory's ``examples/`` folder, swap only
``model_name_or_path`` for a tiny local model of the same family (built offline here; the multimodal ones from
``tests/engine/tinyvlms.py``), give LLaMA-Factory's ``data`` folder as ``data/`` next to ``examples/`` (extracted
at the same tag, or a link to ``--data``, so ``dataset_dir`` keeps its default, ``data``, as the examples assume) and
run the engine from that folder, so ``examples/deepspeed/...`` and ``saves/...`` resolve as they do for LLaMA-Factory.

    python -m tests.golden.sweep_lf_examples --lf-repo /path/to/LLaMA-Factory [--data DIR] [--work DIR] [--run]

``--lf-repo`` is a git clone of LLaMA-Factory (``git clone https://github.com/hiyouga/LLaMA-Factory``); without
``--data`` the examples read its own ``data/`` at ``--tag``.

``--run`` also trains the sample in ``RUN_SAMPLE`` for two steps on CPU (``max_steps=2``), then runs the chat, export
and predict examples that use their outputs (``saves/...``) with the matching command. Each example gets one class:

- ``accepted``: check (or the command) ended without a problem;
- ``refused``: a message named the problem (the first line is printed; read it to judge whether it names the fix);
- ``crash``: a Python traceback;
- ``not-a-config``: a file that is not a training/inference config (accelerate, token descriptions, LLaMA-Factory v1's
  own format), given to check to see that it says so.

Whether a message is clear, and whether an accepted config's keys all act, is judged by reading the table.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# model_name_or_path (lower case) fragment -> tiny family; first match wins
FAMILIES = (
    ("qwen3-vl-30b-a3b", "qwen3_vl"), ("qwen3-vl", "qwen3_vl"), ("qwen2.5-vl", "qwen2_5_vl"), ("qwen2-vl", "qwen2_vl"),
    ("qwen3.5", "qwen3_5"), ("a22b", "qwen3_moe"), ("a3b", "qwen3_moe"), ("qwen3", "qwen3"),
    ("saves/qwen3-4b/full/sft", "qwen3"), ("qwen2", "qwen2"), ("-awq", "llama_awq"), ("-gptq", "llama_gptq"),
    ("-aqlm", "llama_aqlm"), ("llama3-8b-pro", "llama_pro"), ("llama-2", "llama2"), ("llama", "llama3"),
    ("deepseek-v2", "deepseek_v2"), ("deepseek-v3", "deepseek_v3"),
)
# training examples trained for two steps with --run (the chat/export/predict examples then use their outputs)
RUN_SAMPLE = (
    "train_lora/qwen3_lora_sft.yaml", "train_lora/qwen3vl_lora_sft.yaml", "train_qlora/llama3_lora_sft_awq.yaml",
    "train_qlora/llama3_lora_sft_gptq.yaml", "train_qlora/llama3_lora_sft_aqlm.yaml", "train_lora/qwen3_lora_dpo.yaml",
    "train_lora/qwen3_lora_kto.yaml", "train_lora/qwen3_lora_pretrain.yaml", "train_lora/qwen3_lora_reward.yaml",
    "train_lora/qwen3_preprocess.yaml", "extras/loraplus/llama3_lora_sft.yaml", "extras/pissa/llama3_lora_sft.yaml",
    "extras/oft/llama3_oft_sft.yaml", "extras/llama_pro/llama3_freeze_sft.yaml", "extras/dft/qwen2_full_sft.yaml",
    "extras/muon/qwen2_full_sft.yaml", "extras/eaft/qwen25_05b_eaft_full.yaml", "extras/galore/llama3_full_sft.yaml",
    "extras/badam/llama3_full_sft.yaml", "extras/apollo/llama3_full_sft.yaml", "extras/adam_mini/qwen2_full_sft.yaml",
)
# examples that use a run's output: (example, engine command); run after RUN_SAMPLE
FOLLOW_UPS = (
    ("inference/qwen3.yaml", "chat"), ("inference/qwen3_lora_sft.yaml", "chat"),
    ("inference/qwen3_full_sft.yaml", "chat"), ("inference/qwen3vl.yaml", "chat"),
    ("merge_lora/qwen3_lora_sft.yaml", "export"), ("merge_lora/qwen3_full_sft.yaml", "export"),
    ("merge_lora/qwen3vl_lora_sft.yaml", "export"), ("extras/nlg_eval/llama3_lora_predict.yaml", "eval"),
)
# two steps; the rest only makes them fit a small shared CPU (the examples' 4 loader workers and 16 tokenizing
# processes cost more than the steps there)
TRAIN_OVERRIDES = ("max_steps=2", "max_samples=16", "save_steps=2", "logging_steps=1", "dataloader_num_workers=0",
                   "preprocessing_num_workers=1")
CORPUS = ("Hello, how are you? The cat sat on the mat.", "你好，世界。", "Who are you? I am an assistant.")


def _tokenizer(specials: list[str], eos: str, pad: str, bos: str | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(CORPUS) * 4, trainer)
    named = {"eos_token": eos, "pad_token": pad, **({"bos_token": bos} if bos else {})}
    extra = [t for t in specials if t not in named.values()]
    return PreTrainedTokenizerFast(tokenizer_object=core, additional_special_tokens=extra, **named)


QWEN = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
DEEPSEEK = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]


def _text_model(family: str, folder: Path) -> None:
    import torch
    import transformers as tf

    if family in ("qwen3", "qwen2", "qwen3_moe"):
        tok = _tokenizer(QWEN, eos="<|im_end|>", pad="<|endoftext|>")
    elif family == "llama2":
        tok = _tokenizer(["<s>", "</s>", "<unk>"], eos="</s>", pad="<unk>", bos="<s>")
    elif family.startswith("deepseek"):
        tok = _tokenizer(DEEPSEEK, eos="<｜end▁of▁sentence｜>", pad="<｜end▁of▁sentence｜>", bos="<｜begin▁of▁sentence｜>")
    else:
        tok = _tokenizer(LLAMA3, eos="<|eot_id|>", pad="<|end_of_text|>", bos="<|begin_of_text|>")
    common = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 4096, "eos_token_id": tok.eos_token_id,
              "pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id, "num_hidden_layers": 8 if family == "llama_pro" else 2}
    torch.manual_seed(0)
    if family == "qwen3":
        model = tf.Qwen3ForCausalLM(tf.Qwen3Config(head_dim=8, **common))
    elif family == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**common))
    elif family == "qwen3_moe":
        model = tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(head_dim=8, num_experts=4, num_experts_per_tok=2,
                                                         moe_intermediate_size=16, **common))
    elif family == "deepseek_v2":
        model = tf.DeepseekV2ForCausalLM(tf.DeepseekV2Config(
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, first_k_dense_replace=1,
            kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, **common))
    elif family == "deepseek_v3":
        model = tf.DeepseekV3ForCausalLM(tf.DeepseekV3Config(
            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, first_k_dense_replace=1,
            kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, n_group=1,
            topk_group=1, **common))
    else:
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


QUANTIZED = {"llama_awq": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True},
             "llama_gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
             "llama_aqlm": {"quant_method": "aqlm", "in_group_size": 8, "out_group_size": 1, "num_codebooks": 1,
                            "nbits_per_codebook": 16}}


def build_model(family: str, models: Path) -> Path:
    """A tiny model of ``family`` under ``models`` (kept between sweeps); its folder."""
    folder = models / family
    if (folder / "config.json").exists():
        return folder
    tmp = models / f".{family}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if family in ("qwen3_vl", "qwen2_5_vl", "qwen2_vl", "qwen3_5"):
        from tests.engine.tinyvlms import save_tiny_vlm

        save_tiny_vlm(family, tmp)
    elif family in QUANTIZED:  # a pre-quantized checkpoint is told by its config's quantization_config
        shutil.copytree(build_model("llama3", models), tmp)
        config = json.loads((tmp / "config.json").read_text())
        config["quantization_config"] = QUANTIZED[family]
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
    elif family == "llama_pro":  # LLaMA-Factory's llama_pro example trains a model expanded by 8 blocks
        _text_model(family, models / ".llama_pro_base")
        subprocess.run([sys.executable, "-m", "engine", "expand", str(models / ".llama_pro_base"), str(tmp),
                        "--num-expand", "8"], check=True, cwd=ROOT, capture_output=True)
    else:
        _text_model(family, tmp)
    tmp.rename(folder)
    return folder


def family_of(model: str) -> str | None:
    lowered = model.lower()
    return next((family for fragment, family in FAMILIES if fragment in lowered), None)


def kind_of(config) -> str:
    """'config' for a LLaMA-Factory engine config, else what the file is."""
    if not isinstance(config, dict):
        return "not-a-config"
    if "compute_environment" in config or "distributed_type" in config:
        return "accelerate"
    if "model_name_or_path" in config or "stage" in config:
        return "config"
    if "model" in config and ("train_dataset" in config or "dist_config" in config or "peft_config" in config):
        return "lf-v1"
    return "not-a-config"


def engine(args: list[str], cwd: Path, timeout: int = 900) -> tuple[int, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "LF_HUB_PROBE_TIMEOUT": "0"}
    try:
        done = subprocess.run([sys.executable, "-m", "engine", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return done.returncode, done.stdout + done.stderr


def classify(rc: int, output: str, kind: str) -> str:
    if "Traceback (most recent call last)" in output:
        return "crash"
    if kind != "config":
        return "not-a-config" if rc else "accepted?!"
    return "accepted" if rc == 0 else "refused"


def said(rc: int, output: str) -> str:
    """A refusal's problems, or what an accepted command warned or noted about the config (a key it ignores...)."""
    if rc:
        return first_problem(output)
    told = [line.split(": ", 1)[-1] for line in output.splitlines()
            if " WARNING " in line or ("ignored" in line and " INFO " in line)]
    return " // ".join(line[:150] for line in dict.fromkeys(told))


def first_problem(output: str, width: int = 150) -> str:
    """Each problem a refusal lists (its first ``width`` characters), or the last line of other output."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and "it/s]" not in line]
    bullets = [line[2:] for line in lines if line.startswith("- ")]
    if not bullets:
        bullets = [line for line in lines if "Error:" in line or line.startswith("error:")][-1:] or lines[-1:]
    return " // ".join(b[:width] for b in bullets)


def prepare(lf_repo: Path, tag: str, work: Path, data: Path | None, models: Path) -> list[str]:
    """Extract ``examples/`` of ``tag`` into ``work``, link ``data`` (None: extract ``data/`` of ``tag`` too), swap
    the models; the YAML paths."""
    shutil.rmtree(work / "examples", ignore_errors=True)
    parts = ["examples"] if data is not None or (work / "data").exists() else ["examples", "data"]
    archive = subprocess.run(["git", "-C", str(lf_repo), "archive", tag, *parts], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"git archive {tag} of {lf_repo} failed: {archive.stderr.decode().strip()} "
                         "(--lf-repo takes a git clone of LLaMA-Factory, --tag one of its tags or commits)")
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive.stdout, check=True)
    if data is not None and not (work / "data").exists():
        (work / "data").symlink_to(data)
    found = sorted(str(p.relative_to(work / "examples")) for p in (work / "examples").rglob("*.yaml"))
    for name in found:
        path = work / "examples" / name
        text = path.read_text()
        config = yaml.safe_load(text)
        if kind_of(config) != "config" or not isinstance(config.get("model_name_or_path"), str):
            continue
        family = family_of(config["model_name_or_path"])
        if family is None:
            continue
        old = config["model_name_or_path"]
        local = build_model(family, models)
        # swap the value in place, so the file keeps its comments and key order
        path.write_text(text.replace(f"model_name_or_path: {old}", f"model_name_or_path: {local}", 1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lf-repo", type=Path, default=Path("/work/.mirror/hiyouga+LLaMA-Factory/repo"),
                        help="a git clone of LLaMA-Factory (its examples/ at --tag are swept; default: %(default)s)")
    parser.add_argument("--tag", default="v0.9.5", help="the LLaMA-Factory tag or commit to sweep (default: %(default)s)")
    parser.add_argument("--data", type=Path, default=None,
                        help="the data folder the examples read (dataset_info.json and its files; default: "
                             "LLaMA-Factory's data/ at --tag)")
    parser.add_argument("--work", type=Path, default=None, help="folder to sweep in (default: a new temp folder)")
    parser.add_argument("--models", type=Path, default=Path(tempfile.gettempdir()) / "lf-sweep-models",
                        help="where the tiny local models are built and kept between sweeps (default: %(default)s)")
    parser.add_argument("--run", action="store_true", help="also train a sample of the examples for two steps (RUN_SAMPLE), then run the chat, "
                        "export and predict examples on their outputs (FOLLOW_UPS)")
    parser.add_argument("--no-check", action="store_true", help="with --run: skip the checks, only run")
    parser.add_argument("--skip-done", default="", help="with --run: comma-separated examples not to run again")
    parser.add_argument("--only", default="", help="comma-separated example paths (under examples/) to sweep")
    options = parser.parse_args()
    work = options.work or Path(tempfile.mkdtemp(prefix="lf-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    options.models.mkdir(parents=True, exist_ok=True)
    names = prepare(options.lf_repo, options.tag, work, options.data.resolve() if options.data else None,
                    options.models)
    if options.only:
        wanted = options.only.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:  # a misspelt name used to sweep nothing for it, silently
            near = {n: difflib.get_close_matches(n, names, n=2) for n in unknown}
            parser.error(f"--only names no example of {options.tag}: " + "; ".join(
                f"{n}" + (f" (did you mean {' or '.join(m)}?)" if m else "") for n, m in near.items())
                + " (the paths under examples/, ending in .yaml)")
        names = [n for n in names if n in wanted]
    rows = []
    (work / "logs").mkdir(exist_ok=True)
    for name in [] if options.no_check else names:
        config = yaml.safe_load((work / "examples" / name).read_text())
        kind = kind_of(config)
        rc, output = engine(["check", f"examples/{name}"], work)
        rows.append((name, "check", classify(rc, output, kind), said(rc, output)))
        print(f"{rows[-1][2]:13} check  {name}  {rows[-1][3]}", flush=True)
        (work / "logs" / (name.replace("/", "__") + ".check.txt")).write_text(output)
    if options.run:
        jobs = [(n, "train") for n in RUN_SAMPLE if n in names] + [job for job in FOLLOW_UPS if job[0] in names]
        done = set(options.skip_done.split(",")) if options.skip_done else set()
        jobs = [job for job in jobs if job[0] not in done]
        for name, command in jobs:
            extra = list(TRAIN_OVERRIDES) if command == "train" else []
            if command == "chat":
                extra = ["--query", "Who are you?"]
            if command == "eval":
                extra = ["max_samples=4", "max_new_tokens=8"]
            rc, output = engine([command, f"examples/{name}", *extra], work)
            rows.append((name, command, classify(rc, output, "config"), said(rc, output)))
            print(f"{rows[-1][2]:13} {command:6} {name}  {rows[-1][3]}", flush=True)
            (work / "logs" / (name.replace("/", "__") + f".{command}.txt")).write_text(output)
    print("\n| example | command | class | what it said (problems; warnings and notes when accepted) |\n| --- | --- | --- | --- |")
    for name, command, cls, message in rows:
        print(f"| {name} | {command} | {cls} | {message.replace('|', '/')} |")
    counts: dict[str, int] = {}
    for _, command, cls, _ in rows:
        counts[f"{command}:{cls}"] = counts.get(f"{command}:{cls}", 0) + 1
    print("\n" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f"\nlogs: {work / 'logs'}")


if __name__ == "__main__":
    main()
