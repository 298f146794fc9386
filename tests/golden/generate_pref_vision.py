"""Regenerate tests/golden/lf_pref_vision.json: what LLaMA-Factory 0.9.5 logs for dpo and kto with images.

    python -m tests.golden.generate_pref_vision /path/to/lf-venv/bin/python [CASE ...]

Builds the models and data of :mod:`tests.golden.pref_vision_runs` here, runs each case (or only those named after the
interpreter, replacing their entries) with LLaMA-Factory's own ``run_exp`` in the environment given, on the CPU, and
keeps every log entry its Trainer hands to callbacks, for tests/engine/test_pref_vision_lf.py.

Where that environment's torchvision does not import with its torch, transformers cannot build Qwen2-VL's video
processor, so ``AutoProcessor`` fails for it and LLaMA-Factory would go on without a processor (and refuse the
images). The LLaMA-Factory process then builds the processor itself from the folder's parts: transformers' PIL image processor
(``Qwen2VLImageProcessorPil``, what turns each picture into patches either way), the tokenizer, and a stand-in
for the video processor that fails if called (these runs have no video); that processor is not saved with the
output (the logs are what is kept). Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.lf_logs import RECORD_AND_RUN
from tests.golden.pref_vision_runs import CASES, build_model, config, write_data

PATH = Path(__file__).with_name("lf_pref_vision.json")

RUN = r"""
import importlib.machinery, json, subprocess, sys, types
broken = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True).returncode != 0
if broken:
    sys.modules["torchvision"] = None
if subprocess.run([sys.executable, "-c", "import torchaudio"], capture_output=True).returncode:
    sys.modules["torchaudio"] = types.ModuleType("torchaudio")  # LLaMA-Factory's mm_plugin imports it
    sys.modules["torchaudio"].__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
import transformers
from transformers import TrainerCallback
from transformers.processing_utils import ProcessorMixin

if broken:
    check = ProcessorMixin.check_argument_for_proper_class

    class NoVideo:  # stands in for the video processor (LLaMA-Factory requires one); any call fails
        def __call__(self, *args, **kwargs):
            raise RuntimeError("no video processor in this run")

    def lenient(self, name, argument):
        return None if isinstance(argument, NoVideo) else check(self, name, argument)

    auto = transformers.AutoProcessor.from_pretrained

    def from_parts(path, **kwargs):
        if json.load(open(f"{path}/config.json"))["model_type"] != "qwen2_vl":
            return auto(path, **kwargs)
        from transformers import AutoTokenizer, Qwen2VLImageProcessorPil, Qwen2VLProcessor
        config = json.load(open(f"{path}/processor_config.json"))
        image = Qwen2VLImageProcessorPil(**{k: v for k, v in config["image_processor"].items()
                                            if k != "image_processor_type"})
        processor = Qwen2VLProcessor(image_processor=image, tokenizer=AutoTokenizer.from_pretrained(path),
                                     video_processor=NoVideo())
        processor.save_pretrained = lambda *args, **kwargs: None  # the stand-in has nothing to save
        return processor

    ProcessorMixin.check_argument_for_proper_class = lenient
    transformers.AutoProcessor.from_pretrained = staticmethod(from_parts)
""" + RECORD_AND_RUN


def main() -> None:
    python, chosen = sys.argv[1], sys.argv[2:] or list(CASES)
    unknown = sorted(set(chosen) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are {sorted(CASES)}")
    work = Path(tempfile.mkdtemp(prefix="lf-pref-vision-"))
    data = write_data(work / "data")
    models = {family: build_model(work / family, family) for family in sorted({CASES[c]["family"] for c in chosen})}
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
           "WANDB_DISABLED": "true"}
    out = json.loads(PATH.read_text(encoding="utf-8")) if sys.argv[2:] and PATH.exists() else {"cases": {}}
    for case in chosen:
        logs = work / f"{case}.jsonl"
        cfg = config(case, models[CASES[case]["family"]], data, work / case)
        subprocess.run([python, "-c", RUN, json.dumps(cfg), str(logs)], check=True, env=env)
        out["cases"][case] = {"logs": [json.loads(line) for line in logs.read_text().splitlines()]}
        PATH.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")  # after each case
        print(f"{case}: {len(out['cases'][case]['logs'])} log entries; wrote {PATH}")


if __name__ == "__main__":
    main()
