"""By hand: the training rows of every example YAML LLaMA-Factory 0.9.5 ships that trains on text (``examples/``,
a ``dataset`` of its data folder), tokenized by LLaMA-Factory and by ours with sweep_compat's row comparison. Not part
of the test suite; ``sweep_lf_examples`` checks that each example is accepted, this one that its tokens are the same.

    python -m tests.golden.sweep_example_tokens --incumbent /path/to/lf-venv/bin/python --data DIR --examples DIR

``--examples`` is LLaMA-Factory's ``examples/`` folder and ``--data`` its ``data/`` (both ``git archive v0.9.5``). Each
example keeps its data keys as written (``stage``, ``dataset`` with its spaces, ``template`` or none, ``cutoff_len``,
``max_samples``, ``packing``, ...); only the model becomes sweep_compat's test tokenizer of the template's family,
``dataset_dir`` the data folder and ``preprocessing_num_workers`` 1 (the rows do not depend on it unpacked).
Examples whose datasets are on a hub, or that need a processor (VLM templates), are left out; an example with the
same data keys as one before it is named and not run again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden import sweep_compat  # noqa: E402

KEYS = ("stage", "dataset", "template", "cutoff_len", "max_samples", "packing", "neat_packing", "mask_history",
        "train_on_prompt", "enable_thinking", "tool_format", "eval_dataset", "val_size", "default_system",
        "mix_strategy", "interleave_probs", "streaming")
EXAMPLES: list[str] = []
FOLDER: list[Path] = []


def cases(data: str, vlm_dir: str | None = None) -> dict[str, dict]:
    info = json.loads((Path(data) / "dataset_info.json").read_text(encoding="utf-8"))
    out = {}
    for path in EXAMPLES:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if not isinstance(config, dict) or config.get("stage") not in ("pt", "sft", "rm", "dpo", "kto"):
            continue
        names = [n.strip() for n in str(config.get("dataset", "")).split(",") if n.strip()]
        if not names or any("file_name" not in info.get(n, {}) or n.startswith("mllm") for n in names):
            continue
        if "vl" in str(config.get("template", "")):
            continue
        case = {k: config[k] for k in KEYS if k in config}
        case.update(dataset_dir=data, preprocessing_num_workers=1)
        case.setdefault("template", None)
        name = str(Path(path).relative_to(FOLDER[0]))
        same = next((other for other, known in out.items() if known == case), None)
        if same:  # the same data keys as an example before: its rows are that one's
            print(f"{name}: the data keys of {same}")
            continue
        out[name] = case
    return out


USAGE = ("usage: python -m tests.golden.sweep_example_tokens --examples DIR --incumbent PYTHON --data DIR "
         "[sweep_compat's other options]")


def main() -> int:
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(f"{USAGE}\n\n{__doc__.strip()}")
        return 0
    at = args.index("--examples") if "--examples" in args else -1
    if at < 0 or at + 1 >= len(args):
        print(f"{USAGE}\nerror: --examples DIR is required: LLaMA-Factory's examples/ folder (v0.9.5).",
              file=sys.stderr)
        return 2
    folder = Path(args[at + 1])
    if not folder.is_dir():
        print(f"{USAGE}\nerror: --examples {folder} is not a folder; give LLaMA-Factory's examples/ folder.",
              file=sys.stderr)
        return 2
    del args[at:at + 2]
    EXAMPLES.extend(str(p) for p in sorted(folder.rglob("*.yaml")))
    FOLDER.append(folder)
    sweep_compat.cases = cases
    sys.argv = [sys.argv[0], *args]
    return sweep_compat.main()


if __name__ == "__main__":
    sys.exit(main())
