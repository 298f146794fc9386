"""By hand: every entry of a LLaMA-Factory ``data/dataset_info.json`` (its own, at v0.9.5: 104 entries), tokenized by
LLaMA-Factory 0.9.5 and by ours with sweep_compat's row comparison. Not part of the test suite.

    python -m tests.golden.sweep_dataset_info --incumbent /path/to/lf-venv/bin/python --data DIR [--only SUBSTR]

``--data`` is LLaMA-Factory's ``data/`` folder (``git archive v0.9.5 data``). Each entry is one case, template ``qwen``
on the ``qwen`` family test tokenizer, its stage from the entry (``ranking``: rm; a ``kto_tag`` column: kto; a lone
``prompt`` column: pt; else sft), ``max_samples`` 20. Entries on a hub (``hf_hub_url``, ``ms_hub_url``, ``om_hub_url``)
are read offline (``HF_HUB_OFFLINE=1``): where the data is not cached both sides must refuse (the table shows both
messages; ours must name the entry and the way to get the data, never a traceback). Multimodal entries on a text
tokenizer are refused by both (LLaMA-Factory: the template's plugin takes no media; ours names the fix).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden import sweep_compat  # noqa: E402


def stage_of(entry: dict) -> str:
    columns = entry.get("columns") or {}
    if entry.get("ranking"):
        return "rm"
    if "kto_tag" in columns:
        return "kto"
    if set(columns) == {"prompt"}:
        return "pt"
    return "sft"


def cases(data: str, vlm_dir: str | None = None) -> dict[str, dict]:
    info = json.loads((Path(data) / "dataset_info.json").read_text(encoding="utf-8"))
    base = {"dataset_dir": data, "max_samples": 20, "preprocessing_num_workers": 1, "template": "qwen",
            "cutoff_len": 512}
    return {f"{name}/{stage_of(entry)}": {**base, "stage": stage_of(entry), "dataset": name}
            for name, entry in info.items()}


def main() -> int:
    sweep_compat.cases = cases
    return sweep_compat.main()


if __name__ == "__main__":
    sys.exit(main())
