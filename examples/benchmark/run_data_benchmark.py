"""Data at scale: preprocessing N generated alpaca rows (default 100,000), ours vs LLaMA-Factory's. Run it by hand.

    python examples/benchmark/run_data_benchmark.py --incumbent /work/lf-venv/bin/python
    python examples/benchmark/run_data_benchmark.py --rows 25000 --rows 100000     # how RSS grows with rows

The rows are made from alpaca_en_demo.json (each demo row repeated with a numbered instruction, so no two are
equal). Both tools tokenize the same file with the same tokenizer (the reference model's, see run_benchmark.py)
and template, cutoff_len 256, through their own preprocessing (ours: ``engine.data.get_dataset``; LLaMA-Factory:
``llamafactory.data.get_dataset``), each in a fresh process, with ``preprocessing_num_workers`` 1 and 2. A first
run starts from an empty cache (ours: ``LF_ENGINE_CACHE``; LLaMA-Factory: the ``datasets`` cache); a second run of
the same config reuses it. Per run: wall seconds of the whole process (imports included), the seconds inside
``get_dataset`` (the data phase: loading, tokenizing, caching, or the cache lookup) and the process's peak RSS. Ours
also runs as the command a user prepares data with, ``lf-engine data CONFIG`` (whole process, its own cache).
Runs alternate between the tools; the machine is shared and noisy, so read the ratios. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from run_benchmark import DATA_HINT, build_reference_model_apart  # noqa: E402

OURS = """
import json, sys, time
from engine import collector
collector.pause()  # the engine command's process settings: the collector paused for the imports (lf-engine's entry),
from engine.log_setup import setup_logging
setup_logging(False)  # the engine command's logging, as lf-engine's entry sets it
from engine.config import build_config
from engine.data import get_dataset
from engine.models import load_tokenizer
from engine.templates import get_template
import datasets  # noqa: F401,E402 - a training command has it by then (transformers' Trainer imports it), as LLaMA-Factory
collector.settle()  # as the train command does after its imports
cfg = build_config(json.loads(sys.argv[1]))
tokenizer = load_tokenizer(cfg.model)
template = get_template(cfg.model.template, tokenizer)
template.fix_tokenizer(tokenizer)
started = time.perf_counter()
bundle = get_dataset(cfg, tokenizer, template)
print("PHASE", time.perf_counter() - started)
print("ROWS", len(bundle.train))
collector.finish()  # and as lf-engine's entry point ends
"""

THEIRS = """
import json, sys, time
sys.path.insert(0, HERE)
from incumbent_imports import hide_broken_vision_audio
hide_broken_vision_audio()
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
model_args, data_args, training_args, finetuning_args, _ = get_train_args(json.loads(sys.argv[1]))
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
started = time.perf_counter()
dataset = get_dataset(template, model_args, data_args, training_args, stage="sft", **module)
print("PHASE", time.perf_counter() - started)
print("ROWS", len(dataset["train_dataset"]))
""".replace("HERE", repr(str(HERE.parent)))


CLI = "lf-engine data"


def generate_rows(demo: Path, count: int, target: Path) -> Path:
    """``count`` rows (the demo rows, numbered), written one at a time: this process stays small, since Linux carries
    a parent's memory high-water mark into the peak RSS reported for every child it starts later."""
    rows = json.loads(demo.read_text(encoding="utf-8"))
    target.mkdir(parents=True, exist_ok=True)
    with (target / "rows.json").open("w", encoding="utf-8") as handle:
        handle.write("[")
        for i in range(count):
            row = dict(rows[i % len(rows)])
            row["instruction"] = f"{row['instruction']} (#{i})"
            handle.write(("," if i else "") + json.dumps(row, ensure_ascii=False))
        handle.write("]")
    (target / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json"}}), encoding="utf-8")
    return target


def run(cmd: list[str], env: dict) -> dict:
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - t0
        log.seek(0)
        text = log.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"error: {' '.join(cmd[:3])} failed:\n{text[-3000:]}")
    rows = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("ROWS ")), None)
    if rows is None:  # `lf-engine data`: "train: 100,000 rows -> 99,998 sequences (...)"
        rows = next((int(line.split()[4].replace(",", "")) for line in text.splitlines()
                     if line.startswith("train: ")), None)
    phase = next((float(line.split()[1]) for line in text.splitlines() if line.startswith("PHASE ")), float("nan"))
    return {"wall": wall, "phase": phase, "rss_gib": usage.ru_maxrss / 2**20, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(HERE.parents[3] / "shared" / "data" / "alpaca_en_demo.json"))
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lfboard-data-bench"))
    parser.add_argument("--rows", type=int, action="append", help="row counts (default 100000)")
    parser.add_argument("--workers", type=int, action="append", help="preprocessing_num_workers (default 1 and 2)")
    parser.add_argument("--template", default="", help="'' (the tokenizer's own) or a name such as chatml")
    parser.add_argument("--incumbent", default="", help="python of a LLaMA-Factory 0.9.5 install (skipped if absent)")
    args = parser.parse_args()
    demo = Path(args.data)
    if not demo.is_file():
        print(f"error: {demo} not found; {DATA_HINT}", file=sys.stderr)
        return 2
    work = Path(args.work)
    model = build_reference_model_apart(demo, work / "model")
    incumbent = args.incumbent if args.incumbent and Path(args.incumbent).exists() else ""
    if not incumbent:
        print("note: no LLaMA-Factory python (--incumbent): LLaMA-Factory is skipped, ours only")
    results = []
    for count in args.rows or [100_000]:
        data_dir = generate_rows(demo, count, work / f"rows-{count}")
        for workers in args.workers or [1, 2]:
            job = {"model_name_or_path": str(model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
                   "dataset": "rows", "dataset_dir": str(data_dir), "cutoff_len": 256,
                   "preprocessing_num_workers": workers, "output_dir": str(work / "out"), "report_to": "none"}
            if args.template:
                job["template"] = args.template
            caches = {name: work / f"cache-{name}-{count}-{workers}" for name in ("ours", "cli", "theirs")}
            config = work / f"job-{count}-{workers}.yaml"
            config.write_text(json.dumps(job), encoding="utf-8")  # JSON is YAML
            for folder in caches.values():
                shutil.rmtree(folder, ignore_errors=True)
            for attempt in ("first", "cached"):
                env = {**os.environ, "PYTHONPATH": str(HERE.parents[2]), "LF_ENGINE_CACHE": str(caches["ours"])}
                ours = run([sys.executable, "-c", OURS, json.dumps(job)], env)
                results.append(("ours", count, workers, attempt, ours))
                print(f"  ours          rows={count:>7,} workers={workers} {attempt:<6}: {ours['wall']:6.1f} s "
                      f"(data {ours['phase']:.1f} s), {ours['rss_gib']:.2f} GiB", flush=True)
                env["LF_ENGINE_CACHE"] = str(caches["cli"])  # the command a user runs to prepare data
                cli = run([sys.executable, "-m", "engine", "data", str(config)], env)
                results.append((CLI, count, workers, attempt, cli))
                print(f"  {CLI:<13} rows={count:>7,} workers={workers} {attempt:<6}: {cli['wall']:6.1f} s, "
                      f"{cli['rss_gib']:.2f} GiB", flush=True)
                if incumbent:
                    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                    env.update(HF_DATASETS_CACHE=str(caches["theirs"]), DISABLE_VERSION_CHECK="1",
                               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
                    lf_job = {**job, "overwrite_output_dir": True}
                    theirs = run([incumbent, "-c", THEIRS, json.dumps(lf_job)], env)
                    results.append(("LLaMA-Factory", count, workers, attempt, theirs))
                    print(f"  LLaMA-Factory rows={count:>7,} workers={workers} {attempt:<6}: {theirs['wall']:6.1f} s "
                          f"(data {theirs['phase']:.1f} s), {theirs['rss_gib']:.2f} GiB", flush=True)
    print(f"\nPreprocessing (sft, cutoff_len 256, template {args.template or '(tokenizer)'}), whole process; "
          "one sitting, alternating.")
    print(f"{'tool':<14} {'rows':>8} {'workers':>7} {'run':<7} {'wall s':>7} {'data s':>7} {'peak RSS':>9}  goal")
    by_key = {(t, c, w, a): r for t, c, w, a, r in results}
    for tool, count, workers, attempt, res in results:
        goal = ""
        if tool == "ours" and attempt == "first" and ("LLaMA-Factory", count, workers, "first") in by_key:
            theirs = by_key[("LLaMA-Factory", count, workers, "first")]
            goal = (f"{res['wall'] / theirs['wall']:.2f}x LLaMA-Factory's time (goal <= 0.5x); data phase "
                    f"{res['phase'] / theirs['phase']:.2f}x")
        if attempt == "cached":
            first = by_key[(tool, count, workers, "first")]
            goal = f"{100 * res['wall'] / first['wall']:.0f} % of the first run (goal < 10 % for ours)"
            if tool != CLI:
                goal += f"; data phase {100 * res['phase'] / first['phase']:.1f} %"
        print(f"{tool:<14} {count:>8,} {workers:>7} {attempt:<7} {res['wall']:>7.1f} {res['phase']:>7.2f} "
              f"{res['rss_gib']:>7.2f} GiB  {goal}")
    print("(data s: the time inside get_dataset, the tool's own loading, tokenizing and caching; the wall time adds "
          "the process's imports and tokenizer load, which a training command pays whether or not the cache hits. "
          f"`{CLI}`: the command that prepares a config's data without the model, whole process; a second run finds "
          "the cached data from the files alone, without loading the tokenizer)")
    for tool in ("ours", "LLaMA-Factory"):
        for workers in args.workers or [1, 2]:
            line = rss_growth([(c, r["rss_gib"]) for t, c, w, a, r in results if t == tool and a == "first"
                               and w == workers])
            if line:
                print(f"{tool}, workers={workers}, peak RSS by rows{' (goal: flat)' if tool == 'ours' else ''}: {line}")
    return 0


def rss_growth(points: list[tuple[int, float]], tolerance: float = 0.05) -> str:
    """Peak RSS at each row count and whether it grows with the rows: more than ``tolerance`` (5 %) above the
    smallest count's peak at the largest count is growth (below that is noise between processes)."""
    if len(points) < 2:
        return ""
    points = sorted(points)
    (low_rows, low), (high_rows, high) = points[0], points[-1]
    change = (high - low) / low if low else 0.0
    verdict = "GROWS with the rows" if change > tolerance else "flat (does not grow with the rows)"
    per = (high - low) * 1024 / ((high_rows - low_rows) / 10_000) if high_rows > low_rows else 0.0
    return (", ".join(f"{rows:,}: {gib:.2f} GiB" for rows, gib in points)
            + f"; {change:+.0%} from {low_rows:,} to {high_rows:,} rows ({per:+.0f} MiB per 10,000 rows): {verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
