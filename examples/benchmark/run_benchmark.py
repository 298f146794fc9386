"""The reference training workload (see README "Speed"): run it by hand and read the figures it prints.

    python examples/benchmark/run_benchmark.py --data ../shared/data/alpaca_en_demo.json

It builds the reference model offline (Llama architecture, hidden 512, intermediate 1376, 8 layers, 8 heads,
vocab 8192 byte-level BPE trained on the data's text, fp32, seed 0), writes a LLaMA-Factory-style job config,
runs `python -m engine train` on it as a subprocess and prints: wall seconds of the whole command, seconds to
the first logged step, real (non-pad) tokens/s after the first step, and the child's peak resident memory.
This is a benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|user|>", "<|assistant|>", "<|system|>"]


def build_reference_model(data_file: Path, target: Path) -> Path:
    """The fixed ~34 M parameter model of the reference workload, deterministic and offline."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if (target / "model.safetensors").is_file():
        return target
    rows = json.loads(data_file.read_text(encoding="utf-8"))
    texts = [" ".join(str(r.get(k, "")) for k in ("instruction", "input", "output")) for r in rows]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", bos_token="<|bos|>",
                                   eos_token="<|eos|>", additional_special_tokens=SPECIALS[3:])
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=8192, hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
        num_key_value_heads=8, max_position_embeddings=2048, tie_word_embeddings=False,
        pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    fast.save_pretrained(target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve()
    parser.add_argument("--data", default=str(here.parents[3] / "shared" / "data" / "alpaca_en_demo.json"),
                        help="alpaca_en_demo.json (999 alpaca rows)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-bench"),
                        help="folder for the model, config and outputs")
    parser.add_argument("--max-samples", type=int, default=400)
    parser.add_argument("overrides", nargs="*", help="extra key=value for the job, e.g. packing=true")
    args = parser.parse_args()
    data = Path(args.data)
    if not data.is_file():
        print(f"error: {data} not found; pass --data PATH/alpaca_en_demo.json", file=sys.stderr)
        return 2
    work = Path(args.work)
    model_dir = build_reference_model(data, work / "model")
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "alpaca_en_demo.json").write_bytes(data.read_bytes())
    (data_dir / "dataset_info.json").write_text(json.dumps({"alpaca_en_demo": {"file_name": "alpaca_en_demo.json"}}))
    out = work / f"run-{int(time.time())}"
    job = {
        "model_name_or_path": str(model_dir), "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_target": "all", "lora_rank": 8, "lora_alpha": 16, "template": "chatml",
        "dataset": "alpaca_en_demo", "dataset_dir": str(data_dir), "max_samples": args.max_samples,
        "cutoff_len": 256, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
        "learning_rate": 1.0e-4, "num_train_epochs": 1, "save_strategy": "no", "report_to": "none",
        "logging_steps": 1, "output_dir": str(out), "plot_loss": False,
    }
    config = work / "job.yaml"
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in job.items()) + "\n")
    cmd = [sys.executable, "-m", "engine", "train", str(config), *args.overrides]
    env = {**os.environ, "PYTHONPATH": str(here.parents[2])}
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        print(f"error: the job failed with exit code {proc.returncode}", file=sys.stderr)
        return 1
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines() if x.strip()]
    logs = [e for e in events if e.get("event") == "log"]
    start = next((e for e in events if e.get("event") == "start"), {})
    first = logs[0]
    last = logs[-1]
    steps = last["step"]
    tokens_after_first = last["tokens_seen"] - first["tokens_seen"]
    seconds_after_first = last["time"] - first["time"]
    rows = [
        ("optimizer steps", f"{steps}"),
        ("real (non-pad) tokens/s after step 1", f"{tokens_after_first / max(seconds_after_first, 1e-9):.0f}"),
        ("wall seconds, whole command", f"{wall:.1f}"),
        ("seconds to the first logged step", f"{first['time'] - t0:.1f}"),
        ("seconds to step 30", f"{next((e['time'] - t0 for e in logs if e['step'] >= 30), float('nan')):.1f}"),
        ("peak RSS of the job", f"{peak_kib / 2**20:.2f} GiB"),
        ("trainable / total parameters", f"{start.get('trainable_params', 0):,} / {start.get('total_params', 0):,}"),
        ("final loss", f"{last.get('loss')}"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
