"""The reference training workload (see README "Speed" and ../shared/BENCHMARK.md): run it by hand.

    python examples/benchmark/run_benchmark.py --data ../shared/data/alpaca_en_demo.json
    python examples/benchmark/run_benchmark.py --template chatml --incumbent /work/lf-venv/bin/python --repeat 2

It builds the reference model offline (Llama architecture, hidden 512, intermediate 1376, 8 layers, 8 heads,
vocab 8192 byte-level BPE trained on the data's text, fp32, seed 0), writes one LLaMA-Factory-style job config
(no ``template`` by default: both tools then read the tokenizer's own chat template, identical work), and runs
``python -m engine train`` on it as a subprocess. With ``--incumbent PYTHON`` (a python that has LLaMA-Factory
0.9.5 installed) the same YAML runs through ``llamafactory.cli train``, alternating with ours, ``--repeat`` times
each, so ratios come from one sitting (the machine is shared and noisy: compare ratios, not seconds).

Per run it prints: wall seconds of the whole command, seconds to the first logged step (the moment the first
step's log line lands, polled), real (non-pad) tokens/s after the first step, peak resident memory of the
command (its own rusage, children included), and for ours the model-FLOPs utilisation against the fp32
matmul rate measured in this script. Each figure is printed beside its goal. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA_HINT = ("pass --data PATH/alpaca_en_demo.json: LLaMA-Factory's data/alpaca_en_demo.json (999 alpaca rows), "
             "from a clone of https://github.com/hiyouga/LLaMA-Factory")
"""Where the reference data come from (the default --data is ../shared/data/alpaca_en_demo.json beside this clone)."""
SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|system|>"]
HIDDEN, INTER, LAYERS, VOCAB = 512, 1376, 8, 8192
# The tokenizer's own chat template, written with its own special tokens: with no `template` in the job both tools
# read it, and nothing is added to the vocabulary (the identical-work variant).
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}<|system|>{{ m['content'] }}<|eos|>\n"
    "{% elif m['role'] == 'user' %}<|user|>{{ m['content'] }}<|eos|>\n"
    "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|eos|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_reference_model(data_file: Path, target: Path) -> Path:
    """The fixed ~34 M parameter model of the reference workload, deterministic and offline."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if (target / "model.safetensors").is_file() and (
            (target / "chat_template.jinja").is_file() or "chat_template" in (target / "tokenizer_config.json").read_text()):
        return target
    rows = json.loads(data_file.read_text(encoding="utf-8"))
    texts = [" ".join(str(r.get(k, "")) for k in ("instruction", "input", "output")) for r in rows]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", bos_token="<|bos|>",
                                   eos_token="<|eos|>", additional_special_tokens=SPECIALS[3:])
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=2048, tie_word_embeddings=False,
        pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    fast.save_pretrained(target)
    return target


def build_reference_model_apart(data_file: Path, target: Path) -> Path:
    """:func:`build_reference_model` in a child process, so that this process stays free of torch and small: Linux
    carries a parent's memory high-water mark into the peak RSS reported for every child it starts later (through
    fork, before exec), which made small children look as large as this process."""
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from run_benchmark import build_reference_model; "
            "print(build_reference_model(Path(sys.argv[2]), Path(sys.argv[3])))")
    subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), str(data_file), str(target)],
                   check=True, stdout=subprocess.DEVNULL)
    return target


def matmul_gflops(seconds: float = 2.0) -> float:
    """This machine's fp32 matmul rate now (GFLOP/s, 1024-square matrices, median of the runs), in a child
    process so that the benchmark process itself stays free of torch."""
    code = (
        "import time,statistics,torch\n"
        "a=torch.randn(1024,1024);b=torch.randn(1024,1024);a@b\n"
        f"r=[];end=time.time()+{seconds}\n"
        "while time.time()<end:\n"
        " t=time.perf_counter();a@b;r.append(2*1024**3/(time.perf_counter()-t)/1e9)\n"
        "print(statistics.median(r))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def run_command(cmd: list[str], env: dict, log_file: Path, first_marker) -> dict:
    """Run ``cmd``; return wall seconds, seconds to ``first_marker()`` turning true (polled), peak RSS (GiB)."""
    t0 = time.time()
    with log_file.open("w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        first = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if first is None and first_marker():
                first = time.time() - t0
            time.sleep(0.05)
    wall = time.time() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "wall": wall, "first": first, "rss_gib": usage.ru_maxrss / 2**20, "t0": t0}


def _has_lines(path: Path, needle: str = "") -> bool:
    try:
        return needle in path.read_text() if needle else path.stat().st_size > 0
    except OSError:
        return False


def run_ours(job: dict, work: Path, tag: str, overrides: list[str]) -> dict:
    here = Path(__file__).resolve()
    out = work / f"ours-{tag}-{int(time.time() * 1000)}"
    config = work / f"ours-{tag}.yaml"
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in {**job, "output_dir": str(out)}.items()) + "\n")
    env = {**os.environ, "PYTHONPATH": str(here.parents[2])}
    res = run_command([sys.executable, "-m", "engine", "train", str(config), *overrides], env, work / f"{out.name}.log",
                      lambda: _has_lines(out / "events.jsonl", '"event": "log"'))
    if res["rc"] != 0:
        raise SystemExit(f"error: our job failed (exit {res['rc']}); see {work / (out.name + '.log')}")
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines() if x.strip()]
    logs = [e for e in events if e.get("event") == "log"]
    start = next((e for e in events if e.get("event") == "start"), {})
    first, last = logs[0], logs[-1]
    res.update(steps=last["step"], tokens=last["tokens_seen"],
               tps=(last["tokens_seen"] - first["tokens_seen"]) / max(last["time"] - first["time"], 1e-9),
               train_seconds=last["time"] - first["time"], loss=last.get("loss"),
               trainable=start.get("trainable_params"), total=start.get("total_params"))
    res["first"] = min(res["first"] or 1e9, first["time"] - res["t0"])
    res["phases"] = _phases(work / f"{out.name}.log")
    shutil.rmtree(out, ignore_errors=True)
    return res


def _phases(log_file: Path) -> dict[str, float]:
    """Our engine's closing ``Time: imports 5.2 s, model 0.9 s, ...`` line as {phase: seconds}."""
    for line in reversed(log_file.read_text(errors="replace").splitlines()):
        if " Time: " in line:
            body = line.split(" Time: ", 1)[1].rsplit(" (", 1)[0]
            return {name.strip(): float(value) for name, value in
                    (part.rsplit(" ", 2)[:2] for part in body.split(", "))}
    return {}


INCUMBENT_MAIN = r"""
import sys
sys.path.insert(0, HERE)
from incumbent_imports import hide_broken_vision_audio
hide_broken_vision_audio()
from llamafactory.cli import main
sys.argv = ["llamafactory-cli", *sys.argv[1:]]
main()
""".replace("HERE", repr(str(Path(__file__).resolve().parent)))
"""LLaMA-Factory's command, ``llamafactory-cli train CONFIG``, run in-process (one CPU process, as its CLI runs it
there); torchvision and torchaudio are hidden where their build does not import beside the installed torch."""


def run_incumbent(python: str, job: dict, work: Path, tag: str, tokens: int | None) -> dict:
    out = work / f"lf-{tag}-{int(time.time() * 1000)}"
    lf_job = {**job, "output_dir": str(out), "overwrite_output_dir": True}
    lf_job.pop("plot_loss", None)
    if job.get("template"):
        lf_job["resize_vocab"] = True  # ChatML adds tokens this tokenizer lacks; LLaMA-Factory needs it said
    config = work / f"lf-{tag}.yaml"
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in lf_job.items()) + "\n")
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "WANDB_DISABLED": "true", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    log_path = out / "trainer_log.jsonl"
    res = run_command([python, "-c", INCUMBENT_MAIN, "train", str(config)], env, work / f"{out.name}.log",
                      lambda: _has_lines(log_path))
    if res["rc"] != 0:
        raise SystemExit(f"error: LLaMA-Factory failed (exit {res['rc']}); see {work / (out.name + '.log')}")
    lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.strip()]
    res.update(steps=lines[-1].get("current_steps"), loss=lines[-1].get("loss"))
    # LLaMA-Factory logs no per-step clock: its tokens/s is the same real tokens over the time from its first
    # logged step to its end (an estimate; the first batch's tokens are counted in).
    res["tps"] = tokens / max(res["wall"] - res["first"], 1e-9) if tokens and res["first"] else None
    shutil.rmtree(out, ignore_errors=True)
    return res


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve()
    parser.add_argument("--data", default=str(here.parents[3] / "shared" / "data" / "alpaca_en_demo.json"),
                        help="alpaca_en_demo.json (999 alpaca rows)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-bench"),
                        help="folder for the model, configs, logs")
    parser.add_argument("--max-samples", type=int, default=400)
    parser.add_argument("--template", default="", help="'' (default: the tokenizer's own template) or e.g. chatml")
    parser.add_argument("--incumbent", default="", help="python of a LLaMA-Factory 0.9.5 install (skipped if absent)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool, alternating")
    parser.add_argument("overrides", nargs="*", help="extra key=value for our job only, e.g. packing=true")
    args = parser.parse_args()
    data = Path(args.data)
    if not data.is_file():
        print(f"error: {data} not found; {DATA_HINT}", file=sys.stderr)
        return 2
    work = Path(args.work)
    model_dir = build_reference_model_apart(data, work / "model")
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "alpaca_en_demo.json").write_bytes(data.read_bytes())
    (data_dir / "dataset_info.json").write_text(json.dumps({"alpaca_en_demo": {"file_name": "alpaca_en_demo.json"}}))
    job = {
        "model_name_or_path": str(model_dir), "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_target": "all", "lora_rank": 8, "lora_alpha": 16,
        "dataset": "alpaca_en_demo", "dataset_dir": str(data_dir), "max_samples": args.max_samples,
        "cutoff_len": 256, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
        "learning_rate": 1.0e-4, "num_train_epochs": 1, "save_strategy": "no", "report_to": "none",
        "logging_steps": 1, "plot_loss": False,
    }
    if args.template:
        job["template"] = args.template
    incumbent = args.incumbent
    if incumbent and not Path(incumbent).exists():
        print(f"note: incumbent python {incumbent} not found: LLaMA-Factory is skipped")
        incumbent = ""
    elif not incumbent:
        print("note: no --incumbent python given: LLaMA-Factory is skipped (ours only)")
    tag = args.template or "notemplate"
    ours, theirs = [], []
    rates = [matmul_gflops()]
    for i in range(args.repeat):
        ours.append(run_ours(job, work, tag, args.overrides))
        print(f"  ours #{i + 1}: wall {ours[-1]['wall']:.1f} s, first step {ours[-1]['first']:.1f} s, "
              f"{ours[-1]['tps']:.0f} tok/s, {ours[-1]['rss_gib']:.2f} GiB", flush=True)
        if incumbent:
            theirs.append(run_incumbent(incumbent, job, work, tag, ours[-1]["tokens"]))
            print(f"  LLaMA-Factory #{i + 1}: wall {theirs[-1]['wall']:.1f} s, first step {theirs[-1]['first']:.1f} s,"
                  f" {theirs[-1]['rss_gib']:.2f} GiB", flush=True)
        rates.append(matmul_gflops())
    rate = statistics.median(rates)

    def med(runs: list[dict], key: str) -> float:
        values = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    # Model FLOPs of a LoRA step (BENCHMARK.md): 4 x block parameters per real token (forward, input gradient
    # and the small LoRA weight gradient), the frozen head 4 x its size at trained positions (here: counted on
    # all real tokens, an upper bound) -- attention scores are left out (short sequences).
    block = LAYERS * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * INTER)
    flops_per_token = 4 * block + 4 * HIDDEN * VOCAB
    o = {k: med(ours, k) for k in ("wall", "first", "tps", "rss_gib")}
    mfu = o["tps"] * flops_per_token / (rate * 1e9)
    print(f"\nReference workload, template={args.template or '(none)'}, {ours[0]['steps']} steps, "
          f"{ours[0]['tokens']:,} real tokens, {len(ours)} run(s) each, alternating; medians.")
    print(f"fp32 matmul rate measured in this sitting: {rate:.0f} GFLOP/s (runs: {', '.join(f'{r:.0f}' for r in rates)})")
    rows = [("figure", "ours", "LLaMA-Factory", "ratio", "goal")]
    if theirs:
        t = {k: med(theirs, k) for k in ("wall", "first", "tps", "rss_gib")}
        rows += [
            ("wall seconds, whole command", f"{o['wall']:.1f}", f"{t['wall']:.1f}", f"{t['wall'] / o['wall']:.2f}x",
             ">= 2.5x faster"),
            ("seconds to the first step", f"{o['first']:.1f}", f"{t['first']:.1f}", "", "<= 5 s"),
            ("real tokens/s after step 1", f"{o['tps']:.0f}", f"~{t['tps']:.0f}", f"{o['tps'] / t['tps']:.2f}x", ""),
            ("peak RSS (GiB)", f"{o['rss_gib']:.2f}", f"{t['rss_gib']:.2f}", f"{o['rss_gib'] / t['rss_gib']:.2f}x",
             "<= 0.7x"),
        ]
    else:
        rows += [
            ("wall seconds, whole command", f"{o['wall']:.1f}", "-", "", ">= 2.5x LLaMA-Factory's"),
            ("seconds to the first step", f"{o['first']:.1f}", "-", "", "<= 5 s"),
            ("real tokens/s after step 1", f"{o['tps']:.0f}", "-", "", ""),
            ("peak RSS (GiB)", f"{o['rss_gib']:.2f}", "-", "", "<= 0.7x LLaMA-Factory's"),
        ]
    rows += [("model-FLOPs utilisation", f"{100 * mfu:.0f} %", "", "", f"of {rate:.0f} GFLOP/s"),
             ("final loss", f"{ours[-1]['loss']}", f"{theirs[-1]['loss'] if theirs else '-'}", "", ""),
             ("trainable / total parameters", f"{ours[0]['trainable']:,} / {ours[0]['total']:,}", "", "", "")]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    names = list(ours[0].get("phases") or {})
    if names:  # where our command's time goes (the engine's own closing line), medians
        spent = {name: statistics.median(r["phases"].get(name, 0.0) for r in ours) for name in names}
        print("ours by phase (s): " + ", ".join(f"{name} {value:.1f}" for name, value in spent.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
