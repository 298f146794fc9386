"""By hand: compare_rows' comparison (rows and processed media) of LLaMA-Factory's multimodal demo sets through tiny
VLMs, many configs at once. Not part of the test suite.

    python -m tests.golden.sweep_media --incumbent /path/to/lf-venv/bin/python --data DIR [--vlm-dir DIR]
        [--only SUBSTR] [--list]

``--data`` is LLaMA-Factory's data folder (``mllm_demo``, ``mllm_video_demo``, ``mllm_audio_demo``,
``mllm_video_audio_demo`` and their ``mllm_demo_data``). ``--vlm-dir`` holds (or receives) one tiny VLM per family
of ``tests/engine/tinyvlms.py`` (``save_tiny_vlm``). Each case is one family's template on one set (text sets too:
tools, pairs, KTO rows, through the family's processor) with options that change the tokens or the media (short cutoffs that cut through the media, ``image_max_pixels``, ``video_fps``,
``video_maxlen``, ``mask_history``, ``train_on_prompt``, ``val_size``). LLaMA-Factory tokenizes every case in one
process of its environment (compare_rows' script, once per case), ours in this one; a table is printed: case, split,
rows identical / LLaMA-Factory's rows (ours), first difference. Where LLaMA-Factory's environment lacks a torchvision
that imports, the processors that need it cannot be built there: both sides' messages are shown (an environment with
torch 2.14.1, torchvision 0.29.1 and LLaMA-Factory 0.9.5's other pins builds them all but MiniCPM-V 4.6's).

Known differences, deliberate: a row whose media ``cutoff_len`` cuts through is dropped here (kept there; the model
then refuses the batch), so the short-cutoff cases differ or are refused here ("None of the ... has a token to train
on"); InternVL video rows are refused here (README: its video layout is not built); Gemma 4's ``pixel_values_videos``
is one array of all frames here (transformers 5.24's layout) where transformers 5.6's processor gives one per video,
same values. Failing there only: GLM-4V and LLaVA-NeXT-Video/Video-LLaVA videos (its call passes ``images`` to
transformers' video processor), Qwen-Omni audio (torchaudio wants torchcodec).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden.compare_rows import THEIRS as ONE  # noqa: E402
from tests.golden.compare_rows import _same, ours  # noqa: E402
from tests.golden.compare_stream import HIDE_MEDIA_LIBS  # noqa: E402
from tests.golden.sweep_compat import _first_difference  # noqa: E402

THEIRS = HIDE_MEDIA_LIBS + r"""
import copy, json, sys, traceback
cases_path, out_path, script = sys.argv[1:4]
results, pristine = {}, None
for name, args in json.load(open(cases_path)).items():
    import llamafactory.data.template as lf_templates
    if pristine is None:  # get_template_and_fix_tokenizer changes the registered template
        pristine = copy.deepcopy(lf_templates.TEMPLATES)
    lf_templates.TEMPLATES.clear()
    lf_templates.TEMPLATES.update(copy.deepcopy(pristine))
    sys.argv = ["-c", json.dumps(args), out_path + ".one"]
    try:
        exec(compile(script, "compare_rows", "exec"), {"__name__": "__main__"})
        results[name] = json.load(open(out_path + ".one"))
    except BaseException:
        results[name] = {"error": traceback.format_exc()[-1500:]}
json.dump(results, open(out_path, "w"))
"""

# family of tests/engine/tinyvlms.py -> LLaMA-Factory's template for it
FAMILIES = {"llava": "llava", "gemma3": "gemma3", "gemma4": "gemma4", "llava_next": "llava_next",
            "qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_vl", "qwen3_vl": "qwen3_vl", "qwen3_5": "qwen3_5",
            "glm4v": "glm4v", "intern_vl": "intern_vl", "qwen2_5_omni": "qwen2_omni",
            "llava_next_video": "llava_next_video", "video_llava": "video_llava", "minicpmv4_6": "minicpm_v_4_6"}
VIDEO = ("gemma4", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "glm4v", "intern_vl", "qwen2_5_omni",
         "llava_next_video", "video_llava")
AUDIO = ("qwen2_5_omni",)


def cases(data: str, vlm_dir: str) -> dict[str, dict]:
    base = {"dataset_dir": data, "preprocessing_num_workers": 1, "image_max_pixels": 64 * 64,
            "video_max_pixels": 64 * 64, "video_maxlen": 4}
    out: dict[str, dict] = {}

    def add(name, family, stage, dataset, cutoff, **more):
        out[f"{family}/{name}"] = {"model_name_or_path": str(Path(vlm_dir) / family), "template": FAMILIES[family],
                                   "stage": stage, "dataset": dataset, "cutoff_len": cutoff, **base, **more}

    for family in FAMILIES:  # text rows through the family's processor (LLaMA-Factory needs one for its template)
        add("text/sft/glaive/512", family, "sft", "glaive_toolcall_en_demo", 512, max_samples=20)
        add("text/sft/identity/33", family, "sft", "identity", 33, max_samples=20)
        add("text/rm/dpo_en/64", family, "rm", "dpo_en_demo", 64, max_samples=20)
        add("text/kto/kto_en/64", family, "kto", "kto_en_demo", 64, max_samples=20)
        add("sft/mllm_demo/2048", family, "sft", "mllm_demo", 2048)
        add("sft/mllm_demo/64", family, "sft", "mllm_demo", 64)
        add("sft/mllm_demo/mask_history", family, "sft", "mllm_demo", 2048, mask_history=True)
        add("sft/mllm_demo/train_on_prompt_pixels", family, "sft", "mllm_demo", 2048, train_on_prompt=True,
            image_max_pixels=32 * 32, image_min_pixels=16 * 16)
        add("sft/mllm_demo+identity/val", family, "sft", "mllm_demo,identity", 1024, val_size=0.3, do_eval=True,
            max_samples=8)
        if family in VIDEO:
            add("sft/mllm_video_demo/2048", family, "sft", "mllm_video_demo", 2048)
            add("sft/mllm_video_demo/fps_maxlen", family, "sft", "mllm_video_demo", 2048, video_fps=1.0,
                video_maxlen=2)
            add("sft/mllm_video_demo/48", family, "sft", "mllm_video_demo", 48)
        if family in AUDIO:
            add("sft/mllm_audio_demo/2048", family, "sft", "mllm_audio_demo", 2048)
            add("sft/mllm_video_audio_demo/2048", family, "sft", "mllm_video_audio_demo", 2048,
                use_audio_in_video=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory 0.9.5")
    parser.add_argument("--data", required=True, help="LLaMA-Factory's data folder (with mllm_demo_data)")
    parser.add_argument("--vlm-dir", help="a folder of tiny VLMs, one subfolder per family (built where missing)")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    opts = parser.parse_args()
    vlm_dir = Path(opts.vlm_dir or tempfile.mkdtemp())
    chosen = {k: v for k, v in cases(opts.data, str(vlm_dir)).items() if opts.only in k}
    if opts.list:
        print("\n".join(chosen))
        return 0
    from tests.engine.tinyvlms import save_tiny_vlm

    for family in {Path(args["model_name_or_path"]).name for args in chosen.values()}:
        if not (vlm_dir / family).exists():
            save_tiny_vlm(family, vlm_dir / family)
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, args in chosen.items():
            args.update({"do_train": True, "finetuning_type": "lora", "report_to": "none", "overwrite_cache": True,
                         "output_dir": str(root / "out" / name.replace("/", "_"))})
        (root / "cases.json").write_text(json.dumps(chosen), encoding="utf-8")
        proc = subprocess.run([opts.incumbent, "-c", THEIRS, str(root / "cases.json"), str(root / "theirs.json"),
                               ONE], capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:])
            return 1
        theirs_all = json.loads((root / "theirs.json").read_text(encoding="utf-8"))
        bad = 0
        print(f"{'case':55} {'split':22} identical/LF rows (ours)  first difference")
        for name, args in chosen.items():
            theirs = theirs_all[name]
            try:
                mine = ours(dict(args))
            except Exception as exc:  # a refusal or crash on our side is a result of the sweep too
                mine = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            if "error" in theirs or "error" in mine:
                bad += not ("error" in theirs and "error" in mine)
                lf = theirs.get("error", "ok").strip().splitlines()[-1][:150]
                print(f"{name:55} {'-':22} LF: {lf} | ours: {mine.get('error', 'ok')[:150]}", flush=True)
                continue
            for split, rows in theirs.items():
                got = mine.get(split, [])
                n = sum(_same(split, a, b) for a, b in zip(rows, got))
                ok = n == len(rows) == len(got)
                bad += not ok
                diff = "" if ok or split.startswith("media:") else _first_difference(rows, got)
                if not ok and split.startswith("media:"):
                    i = next((i for i, (a, b) in enumerate(zip(rows, got)) if not _same(split, a, b)), None)
                    diff = f"row {i}: LF {rows[i]} ours {got[i]}" if i is not None else "row counts"
                print(f"{name:55} {split:22} {n}/{len(rows)} ({len(got)})  {diff[:400]}", flush=True)
        print(f"{len(chosen)} cases, {bad} with a difference")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
