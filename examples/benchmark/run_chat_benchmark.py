"""Chat: first-token latency, tokens/s and Load time of the board's chat worker, beside LLaMA-Factory's chat.

    python examples/benchmark/run_chat_benchmark.py --incumbent /work/lf-venv/bin/python
    python examples/benchmark/run_chat_benchmark.py --model demo --adapter none --max-new-tokens 32 --repeat 2

Run it by hand; nothing here asserts a time. The model is the reference model of run_benchmark.py (built offline
from ``--data``), the demo model (``--model demo``) or a folder. By default a LoRA adapter is made for it (rank 8 on
q/v, random weights, so it changes the replies): Load then means "this model with this adapter", as on the board.

Each tool runs in its own process (examples/benchmark/chat_drivers.py), alternating, ``--repeat`` times:

- ours plays the board: the Chat tab's own Load handler starts an ``lf-engine api`` worker through the job manager,
  every prompt streams through ``app.chat_client.stream_chat`` with the worker's key (what Send does), then Load is
  pressed again with the same model and adapter, which should keep the worker (one worker, same run id);
- LLaMA-Factory 0.9.5 (``--incumbent PYTHON``): ``llamafactory.chat.ChatModel`` with ``infer_backend:
  huggingface``, replies from ``stream_chat``.

Both decode greedily (temperature 0 / ``do_sample: false``), with the same ``--max-new-tokens`` and prompts, and
no system prompt. Load is process start to ready (ours: the click to the worker's run.json saying ready, polled
every 20 ms; the page itself polls each second, shown too). First token: seconds from sending a message to the
first non-empty text, for the first message after Load (cold) and the median of the others; tokens/s: reply tokens
(re-tokenized text, the same rule for both) over the whole reply time, and after the first token. Medians over
the repeats; ratio = LLaMA-Factory / ours for times, ours / LLaMA-Factory for rates (above 1: ours is better).
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

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from chat_drivers import summarise  # noqa: E402

PROMPTS = [
    "Give three tips for staying healthy.",
    "What are the three primary colors?",
    "Describe the structure of an atom.",
    "Write a short poem about the sea.",
    "Explain why the sky is blue in two sentences.",
]

ADAPTER = """
import sys, torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                        init_lora_weights=False, task_type="CAUSAL_LM"))
peft.save_pretrained(sys.argv[2])
"""


def our_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}


def resolve_model(name: str, data: Path, work: Path) -> Path:
    """The model folder: the reference model (built once), the demo model, or a folder."""
    if name == "reference":
        from run_benchmark import DATA_HINT, build_reference_model_apart

        if not data.is_file():
            raise SystemExit(f"error: {data} not found; {DATA_HINT} (or --model demo)")

        return build_reference_model_apart(data, work / "model")
    if name == "demo":
        out = subprocess.run([sys.executable, "-c", "from engine.demo import ensure_demo_model as e; print(e())"],
                             env=our_env(), capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"error: the demo model could not be built:\n{out.stderr[-2000:]}")
        return Path(out.stdout.strip().splitlines()[-1])
    path = Path(name).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise SystemExit(f"error: {path} is not a model folder (no config.json); use reference, demo or a folder")
    return path


def resolve_adapter(choice: str, model: Path, work: Path) -> Path | None:
    if choice == "none":
        return None
    if choice != "auto":
        path = Path(choice).expanduser().resolve()
        if not (path / "adapter_config.json").is_file():
            raise SystemExit(f"error: {path} holds no adapter_config.json; pass a LoRA adapter folder, auto or none")
        return path
    target = work / f"adapter-{model.name}"
    if not (target / "adapter_config.json").is_file():
        out = subprocess.run([sys.executable, "-c", ADAPTER, str(model), str(target)], env=our_env(),
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"error: the LoRA adapter could not be made:\n{out.stderr[-2000:]}")
    return target


def run_driver(python: str, tool: str, common: list[str], work: Path, env: dict) -> dict:
    out = work / f"{tool}-{int(time.time() * 1000)}.json"
    extra = ["--work", str(work / f"ws-{out.stem}")] if tool == "ours" else []
    log = work / f"{out.stem}.log"
    begin = time.time()
    with log.open("w") as fh:
        rc = subprocess.run([python, str(HERE.parent / "chat_drivers.py"), tool, *common, *extra, "--out", str(out)],
                            env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"error: the {tool} side failed (exit {rc}); see {log}")
    result = json.loads(out.read_text())
    if tool == "lf":
        result["load"] = result["ready_at"] - begin
    result.update(summarise(result["replies"]))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="reference", help="reference (default), demo, or a model folder")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "alpaca_en_demo.json"),
                        help="alpaca_en_demo.json, for the reference model's tokenizer")
    parser.add_argument("--adapter", default="auto", help="auto (make one), none, or a LoRA adapter folder")
    parser.add_argument("--template", default="", help="'' (default: the tokenizer's own template) or e.g. chatml")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=4, help=f"how many prompts (at most {len(PROMPTS)})")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool, alternating")
    parser.add_argument("--incumbent", default="", help="python of a LLaMA-Factory 0.9.5 install (skipped if absent)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-chat-bench"))
    parser.add_argument("--keep", action="store_true", help="keep the workspaces and logs of the runs")
    args = parser.parse_args()
    if not 1 <= args.prompts <= len(PROMPTS):
        print(f"error: --prompts must be 1 to {len(PROMPTS)}", file=sys.stderr)
        return 2
    if args.max_new_tokens < 2 or args.repeat < 1:
        print("error: --max-new-tokens must be at least 2 and --repeat at least 1", file=sys.stderr)
        return 2
    incumbent = args.incumbent
    if incumbent and not Path(incumbent).exists():
        print(f"note: incumbent python {incumbent} not found: LLaMA-Factory is skipped")
        incumbent = ""
    elif not incumbent:
        print("note: no --incumbent python given: LLaMA-Factory is skipped (ours only)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = resolve_model(args.model, Path(args.data), work)
    adapter = resolve_adapter(args.adapter, model, work)
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir()
    common = ["--model", str(model), "--adapter", str(adapter or ""), "--template", args.template,
              "--max-new-tokens", str(args.max_new_tokens)]
    for prompt in PROMPTS[:args.prompts]:
        common += ["--prompt", prompt]
    lf_env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "WANDB_DISABLED": "true"}
    lf_env.pop("PYTHONPATH", None)
    load_before = os.getloadavg()
    ours, theirs = [], []
    for i in range(args.repeat):
        ours.append(run_driver(sys.executable, "ours", common, runs, our_env()))
        o = ours[-1]
        print(f"  ours #{i + 1}: Load {o['load']:.2f} s, first token {o['first'] * 1000:.0f} ms, "
              f"{o['tps']:.1f} tok/s, second Load {o['reload']:.3f} s ({'reused' if o['reused'] else 'NOT reused'})",
              flush=True)
        if incumbent:
            theirs.append(run_driver(incumbent, "lf", common, runs, lf_env))
            t = theirs[-1]
            print(f"  LLaMA-Factory #{i + 1}: Load {t['load']:.2f} s, first token {t['first'] * 1000:.0f} ms, "
                  f"{t['tps']:.1f} tok/s", flush=True)
    load_after = os.getloadavg()

    def med(results: list[dict], key: str) -> float | None:
        values = [r[key] for r in results if r.get(key) is not None]
        return statistics.median(values) if values else None

    def cell(value: float | None, scale: float = 1.0, fmt: str = ".2f") -> str:
        return "-" if value is None else f"{value * scale:{fmt}}"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}x" if a and b else ""

    rows = [("figure", "ours", "LLaMA-Factory", "ratio", "goal")]
    figures = [  # (name, key, scale, format, time (lower is better) or rate)
        ("Load: process start to ready (s)", "load", 1.0, ".2f", True),
        ("first token, first message after Load (ms)", "first_cold", 1000.0, ".0f", True),
        ("first token, median of the next messages (ms)", "first", 1000.0, ".0f", True),
        ("tokens/s, whole reply (median)", "tps", 1.0, ".1f", False),
        ("tokens/s after the first token (median)", "decode_tps", 1.0, ".1f", False),
        ("reply tokens (median)", "tokens", 1.0, ".0f", None),
    ]
    for name, key, scale, fmt, lower in figures:
        o, t = med(ours, key), med(theirs, key)
        r = "" if lower is None else ratio(t, o) if lower else ratio(o, t)
        rows.append((name, cell(o, scale, fmt), cell(t, scale, fmt), r, "report" if lower is not None else ""))
    reused = all(o["reused"] for o in ours)
    rows += [
        ("Load as the page shows it (polls each 1 s) (s)", cell(med(ours, "load_page")), "-", "", "report"),
        ("second Load, same model and adapter (s)", cell(med(ours, "reload"), fmt=".3f"), "-", "",
         "reuses the worker"),
        ("second Load reused the worker", f"{'yes' if reused else 'NO'} ({max(o['workers'] for o in ours)} worker)",
         "-", "", "yes"),
    ]
    if theirs:
        same = sum(a["text"] == b["text"] for o, t in zip(ours, theirs) for a, b in zip(o["replies"], t["replies"]))
        total = sum(len(o["replies"]) for o in ours[:len(theirs)])
        rows.append(("identical greedy replies", f"{same}/{total}", "", "", "same work"))
    print(f"\nChat on the {args.model if args.model in ('reference', 'demo') else ''} model {model}"
          f"{' + LoRA adapter ' + adapter.name if adapter else ''}, template="
          f"{args.template or '(tokenizer)'}, greedy, max_new_tokens {args.max_new_tokens}, {args.prompts} prompts, "
          f"{len(ours)} run(s) each, alternating; medians.")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)"
          + (f"; LLaMA-Factory's model dtype {theirs[0]['dtype']}" if theirs else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if not args.keep:
        shutil.rmtree(runs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
