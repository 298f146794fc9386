"""Board start: the entry module imports no torch/transformers, the runs are read after serving, not before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app import history, topbar

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "peft", "trl", "datasets", "accelerate")


def write_adapter(folder: Path) -> None:
    """A whole (if empty) adapter: a config and a safetensors file with a complete header."""
    header = b"{}"
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)


def run_python(code: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GRADIO_DEFAULT_CONCURRENCY_LIMIT"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["GRADIO_ANALYTICS_ENABLED"] = "False"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads([line for line in out.stdout.splitlines() if line.startswith(("{", "["))][-1])  # past the URL line


def test_importing_the_entry_module_imports_no_torch_or_transformers(tmp_path):
    # lf-board = app.main:entry (pyproject); python -m app runs the same
    found = run_python(
        "import json, sys\nimport app.main, app.__main__\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n", tmp_path)
    assert found == []


def test_start_reads_no_run_folders_before_serving_and_builds_the_server_once(tmp_path):
    """lf-board's main() up to launch: no heavy module, no checkpoint scan over the runs, gradio's server app built
    by the page and by launch only (no extra demo.queue()), and the page's events may run 4 at a time."""
    code = f"""
import json, sys
import gradio as gr
from gradio import routes
from app import main, topbar
scans, apps = [], []
real_scan, real_create = topbar.checkpoints, routes.App.create_app
topbar.checkpoints = lambda d: scans.append(str(d)) or real_scan(d)
routes.App.create_app = staticmethod(lambda *a, **k: apps.append(1) or real_create(*a, **k))
def fake_launch(self, **kwargs):
    print(json.dumps({{"heavy": [m for m in {HEAVY!r} if m in sys.modules], "scans": scans, "apps": len(apps),
                      "limit": self._queue.default_concurrency_limit}}))
gr.Blocks.launch = fake_launch
sys.path.insert(0, {str(REPO_ROOT / "examples" / "benchmark")!r})
from fake_runs import make_finished_runs
make_finished_runs({str(tmp_path / "ws" / "runs")!r}, 5, steps=3)
main.main(["--workspace", {str(tmp_path / "ws")!r}, "--port", "0"])
"""
    found = run_python(code, tmp_path)
    assert found["heavy"] == []
    assert found["scans"] == []  # the checkpoint picker is filled when a page loads
    assert found["apps"] <= 2  # Blocks' own (empty, then at the end of the layout); launch builds the last one
    assert found["limit"] == 4


def test_a_page_load_fills_the_checkpoint_picker(board):
    run = board.jobs.runs_dir / "done"
    (run / "checkpoint-4").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "done", "kind": "train", "status": "completed"}))
    for folder in (run, run / "checkpoint-4"):
        write_adapter(folder)
    values = topbar.load_values(board)
    choices = values[2]["choices"]
    assert [c[1] for c in choices] == ["", str(run), str(run / "checkpoint-4")]
    assert values[3] == [["done", str(run)], ["done / checkpoint-4", str(run / "checkpoint-4")]]


def test_finished_runs_checkpoints_are_remembered_until_the_folder_changes(board, monkeypatch):
    run = board.jobs.runs_dir / "old"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "old", "kind": "train", "status": "failed"}))
    assert history.checkpoints(board.jobs.runs_dir) == []
    globbed = []
    real_glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: globbed.append(self) or real_glob(self, pattern))
    assert history.checkpoints(board.jobs.runs_dir) == []
    assert globbed == []  # unchanged finished run: not listed again
    ckpt = run / "checkpoint-2"
    ckpt.mkdir()  # a new folder changes the run folder's mtime
    write_adapter(ckpt)
    os.utime(run, ns=(0, 1))  # a different mtime even on a coarse clock
    assert history.checkpoints(board.jobs.runs_dir) == [("old / checkpoint-2", str(ckpt))]
    assert globbed == [run]


def test_checking_a_form_and_starting_a_run_import_no_torch_or_transformers(tmp_path):
    """The Train tab checks the form on every change (the engine's pre-flight checks) and prepares the launch on
    Start, and the Evaluate, Chat and Export tabs check theirs; none may pull torch, transformers or PEFT into the
    board (they once did: +350 MB for every session). The scale-out Check and a two-process Start run their check
    (which counts the model's parameters with torch) in a subprocess; loading a config reads transformers'
    defaults in one.
    The device facts come from the environment report; with them the device checks still refuse what cannot run."""
    code = f"""
import json, sys
import yaml
from app import catalog, forms
from app.tabs import strategy
catalog.ENVIRONMENT.start = lambda: None  # the report is collected in a subprocess; here it is given
mapping = yaml.safe_load(open({str(REPO_ROOT / "examples" / "sft_lora_demo.yaml")!r}))
mapping.update(dataset_dir={str(REPO_ROOT / "examples" / "data")!r}, output_dir={str(tmp_path / "out")!r})
result = {{}}
result["unknown"] = forms.validate(mapping, "train").problems  # report not collected yet
catalog.ENVIRONMENT._report = {{"accelerator": "cpu", "accelerator_label": "CPU"}}
result["cpu"] = forms.validate(mapping, "train").problems
result["eval"] = forms.validate(mapping, "eval").problems
result["prepared"] = strategy.prepare(mapping, "single", 1, "en")[1:]
keyed, result["ddp"], refusal = strategy.prepare(mapping, "ddp", 2, "en")
result["ddp_refusal"] = refusal
result["fsdp"] = strategy.prepare(mapping, "fsdp2", 2, "en")[0].get("fsdp")
result["check"] = strategy.check_text(mapping, "ddp", 2, "en")
from app.config_import import left_out  # loading a config: transformers' defaults are read in a subprocess
result["left"] = left_out({{"run_name": "exp-7", "save_only_model": False, "lr_scheduler_type": "linear"}}, [])
result["fa2"] = forms.validate({{**mapping, "flash_attn": "fa2", "fp16": True}}, "train").problems
adapter = {str(tmp_path / "adapter")!r}
import pathlib
pathlib.Path(adapter).mkdir()
pathlib.Path(adapter, "adapter_config.json").write_text("{{}}")
pathlib.Path(adapter, "adapter_model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{{}}")
pathlib.Path(adapter, "lf_config.yaml").write_text("template: chatml")
served = {{"model_name_or_path": "demo", "template": "chatml", "adapter_name_or_path": adapter,
          "finetuning_type": "lora"}}
result["api"] = forms.validate(served, "api").problems
result["export"] = forms.validate({{**served, "export_dir": {str(tmp_path / "exported")!r}}}, "export").problems
result["heavy"] = [m for m in {HEAVY + ("bitsandbytes",)!r} if m in sys.modules]
print(json.dumps(result))
"""
    found = run_python(code, tmp_path)
    assert found["heavy"] == []
    assert found["unknown"] == [] and found["cpu"] == [] and found["eval"] == []
    assert found["prepared"] == [None, None]
    assert found["ddp"] == {"strategy": "ddp", "nproc": 2} and found["ddp_refusal"] is None
    assert found["fsdp"] == "full_shard auto_wrap"
    assert "Estimated memory per device" in found["check"] and "This strategy can run." in found["check"]
    assert found["left"] == ["`run_name: exp-7`"]
    assert found["api"] == [] and found["export"] == []
    assert any("flash_attention_2" in p and "NVIDIA GPU" in p for p in found["fa2"])
    assert any("fp16: true" in p and "CPU" in p for p in found["fa2"])


def test_checking_a_form_with_a_local_model_imports_no_torch(tmp_path):
    """A model folder on disk gets the memory estimate (from its weights' headers) and the pre-quantized check; the
    board once imported torch for the first (the accelerator and its memory) on every such form: +220 MB. The
    accelerator's facts come from the environment report, its memory included; a pre-quantized model's question goes
    to a child interpreter."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [1024, 1024, 256], "data_offsets": [0, 0]}}).encode()
    (model / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)  # 0.27 B parameters
    code = f"""
import json, sys
import yaml
from app import catalog, forms
catalog.ENVIRONMENT.start = lambda: None
mapping = yaml.safe_load(open({str(REPO_ROOT / "examples" / "sft_lora_demo.yaml")!r}))
mapping.update(model_name_or_path={str(model)!r}, dataset_dir={str(REPO_ROOT / "examples" / "data")!r},
               output_dir={str(tmp_path / "out")!r}, finetuning_type="full")
result = {{}}
result["unknown"] = forms.validate(mapping, "train").problems  # report not collected yet: no estimate
catalog.ENVIRONMENT._report = {{"accelerator": "cuda", "accelerator_label": "CUDA",
                                "devices": [{{"index": 0, "memory_total_gib": 2.0, "memory_free_gib": 1.5}}]}}
result["gpu"] = forms.validate(mapping, "train").problems
catalog.ENVIRONMENT._report = {{"accelerator": "cpu", "accelerator_label": "CPU"}}
result["cpu"] = forms.validate(mapping, "train").problems
result["heavy"] = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps(result))
"""
    found = run_python(code, tmp_path)
    assert found["heavy"] == []
    memory = [p for key in ("unknown", "cpu") for p in found[key] if "GiB" in p]
    assert memory == []  # unknown facts: no estimate; this machine's memory holds 0.27 B parameters
    assert any("needs about" in p and "the CUDA device has 2.0 GiB in all" in p for p in found["gpu"]), found["gpu"]


def test_a_prequantized_model_is_refused_on_the_form_without_torch_in_the_board(tmp_path):
    """A model folder whose config.json carries a `quantization_config` transformers cannot load here: the form
    showed nothing and Start launched a job that refused at its start; now the form's check says what the job's
    would (the question asked in a child interpreter, once per config.json), and the board still imports no torch."""
    model = tmp_path / "model"
    model.mkdir()
    quantized = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                 "quantization_config": {"quant_method": "gptq", "bits": "four"}}
    (model / "config.json").write_text(json.dumps(quantized))
    code = f"""
import json, sys
import yaml
from app import catalog, forms, prequantized
catalog.ENVIRONMENT.start = lambda: None
catalog.ENVIRONMENT._report = {{"accelerator": "cpu", "accelerator_label": "CPU"}}
asked = []
real_run = prequantized.run_worker
prequantized.run_worker = lambda *a, **k: asked.append(a[1][0]) or real_run(*a, **k)
mapping = yaml.safe_load(open({str(REPO_ROOT / "examples" / "sft_lora_demo.yaml")!r}))
mapping.update(model_name_or_path={str(model)!r}, dataset_dir={str(REPO_ROOT / "examples" / "data")!r},
               output_dir={str(tmp_path / "out")!r})
result = {{"first": forms.validate(mapping, "train").problems, "again": forms.validate(mapping, "chat").problems}}
result["codes"] = [getattr(p, "code", None) for p in result["first"]]
result["asked"] = asked
result["heavy"] = [m for m in {HEAVY!r} if m in sys.modules]
print(json.dumps(result))
"""
    found = run_python(code, tmp_path)
    assert found["heavy"] == []
    problems = [p for p in found["first"] if "quantization_config" in p]
    assert len(problems) == 1 and problems[0].startswith(f"`{model}` has a `quantization_config` in its config.json "
                                                         "that transformers cannot read"), found["first"]
    assert "`quant_method: gptq`: Only support quantization to [2,3,4,8] bits" in problems[0]
    assert found["codes"][found["first"].index(problems[0])] == "model"  # headed "Model", not "Device"
    assert [p for p in found["again"] if "quantization_config" in p] == problems  # remembered: asked once
    assert found["asked"] == [str(model)]
