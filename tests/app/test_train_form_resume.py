"""The Train form's "Resume from checkpoint" reads as the API's does: its help said `true` resumes the last
checkpoint, but every board run starts in a new folder, so Start launched a run that failed at once ("holds no
checkpoint-* folder yet ... set output_dir", which the board does not let a user set), and a run id failed too ("does
not exist"). Now `true` is refused before anything runs, with the fix, and a run id resumes that run's latest
complete checkpoint (the preview shows it, the run's meta records it)."""

from __future__ import annotations

import json
from pathlib import Path

from app.i18n import load_locale
from app.tabs import train
from engine.runs import RunFolder

DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


def form(**changes):
    mapping = dict(model_name_or_path="demo", stage="sft", finetuning_type="lora", dataset="demo_identity",
                   template="chatml", dataset_dir=str(DEMO_DATA), cutoff_len=64, max_steps=1)
    return {**mapping, **changes}


def old_run(board) -> tuple[str, Path]:
    run = board.jobs.runs_dir / "20261207-100000-train-old"
    ckpt = run / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": run.name, "kind": "train", "status": "aborted"}))
    (ckpt / "adapter_config.json").write_text("{}")
    header = b"{}"
    (ckpt / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    return run.name, ckpt


def test_true_is_refused_with_the_fix_before_anything_runs(board):
    for lang in ("en", "zh"):
        message, run_id = train.start_run(board, form(resume_from_checkpoint="true"), "", lang)
        assert run_id is None and not any(board.jobs.runs_dir.iterdir())
        assert load_locale(lang)["job_resume_true"].split("`")[0] in message, message
        _, yaml_text, _ = train.preview_command(board, form(resume_from_checkpoint="true"), "", lang)
        assert yaml_text.startswith("# ") and "resume_from_checkpoint" in yaml_text.split("\n", 2)[1]


def test_a_run_id_resumes_its_latest_complete_checkpoint(board):
    run_name, ckpt = old_run(board)
    _, yaml_text, pending = train.preview_command(board, form(resume_from_checkpoint=run_name), "", "en")
    assert f"resume_from_checkpoint: {ckpt}" in yaml_text, yaml_text
    message, run_id = train.start_run(board, form(resume_from_checkpoint=f" {run_name} "), pending, "en")
    assert run_id == pending, message
    info = RunFolder(board.jobs.runs_dir / run_id).info()
    assert info["resumed_from"] == run_name and info["resumed_checkpoint"] == str(ckpt)
    assert f"resume_from_checkpoint: {ckpt}" in (board.jobs.runs_dir / run_id / "config.yaml").read_text()


def test_the_help_names_what_the_board_accepts():
    for lang in ("en", "zh"):
        help_text = load_locale(lang)["h_resume_from_checkpoint"]
        assert "true" not in help_text and ("ID" in help_text or "id" in help_text)
