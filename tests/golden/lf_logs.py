"""Log entries compared with LLaMA-Factory's recorded ones (the preference-metric golden tests): which keys count,
how close a value must be, and the comparison of our events with its entries step by step."""

from __future__ import annotations

import math

RECORD_AND_RUN = r"""from llamafactory.train.tuner import run_exp

class Record(TrainerCallback):
    def __init__(self, path):
        self.path = path
    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero:
            with open(self.path, "a") as handle:
                handle.write(json.dumps({"step": state.global_step, **(logs or {})}) + "\n")

run_exp(args=json.loads(sys.argv[1]), callbacks=[Record(sys.argv[2])])
"""
"""The end of the LLaMA-Factory driver scripts (run in its environment, after their imports of json, sys and
TrainerCallback): its run_exp with a callback that appends every log entry, with its step, to the file argv[2]."""

SKIP = {"epoch", "step", "learning_rate", "total_flos", "train_runtime", "train_samples_per_second",
        "train_steps_per_second"}
"""Keys not compared: the step bookkeeping (compared apart) and timings."""


def metrics(entry: dict) -> dict:
    """The numbers of a log entry that are compared."""
    return {key: value for key, value in entry.items() if key not in SKIP and not key.endswith(("_runtime",
            "_per_second")) and isinstance(value, (int, float))}


def close(ours: float, theirs: float) -> bool:
    return math.isclose(ours, theirs, rel_tol=2e-4, abs_tol=2e-5)


def differences(pairs: list[tuple[dict, dict]]) -> tuple[float, list[str]]:
    """(the largest absolute difference among the keys that agree, a line per key of LLaMA-Factory's entry that ours
    lacks or holds another value for) over ``(our entry, its entry)`` pairs."""
    worst, wrong = 0.0, []
    for ours, lf in pairs:
        for key, value in metrics(lf).items():
            if key not in ours or not close(ours[key], value):
                wrong.append(f"step {lf['step']} {key}: ours {ours.get(key, 'missing')}, LLaMA-Factory {value}")
            else:
                worst = max(worst, abs(ours[key] - value))
    return worst, wrong


def _evaluates(entry: dict) -> bool:
    return any(key.startswith("eval_") for key in entry)


def as_our_events(entries: list[dict]) -> list[dict]:
    """LLaMA-Factory's recorded log entries (every ``on_log``) as our events.jsonl holds them. Its workflow evaluates
    once more after training (the entries after the training summary, the one with ``train_runtime``); where its
    last step already evaluated, that second evaluation scores the same weights again and stays out of its
    trainer_log.jsonl and trainer_state.json (written before it), and ours is not run (its metrics are the last
    step's: engine/train/final_eval.py). Where the last step did not evaluate, the final evaluation is kept."""
    end = next((index for index, entry in enumerate(entries) if "train_runtime" in entry), None)
    if end is None:
        return entries
    last = entries[end]["step"]
    if any(_evaluates(entry) and entry["step"] == last for entry in entries[:end]):
        return entries[:end + 1]
    return entries
