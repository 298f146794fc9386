"""A job never records itself in another kind of job's run folder: an evaluation pointed at the training run it
evaluates (`output_dir` = the adapter folder), or an export given that run's config.yaml, replaced the training run's
run.json (pid, times) and config.yaml and appended a second `end` to its events.jsonl."""

import argparse
import json
from pathlib import Path

from engine.cli import EXIT_USER_ERROR, _run_dir_of, main
from engine.lifecycle import JobContext
from engine.runs import RunFolder
from engine.train.output_dir import other_job_problem

REPO = Path(__file__).resolve().parents[2]
TRAIN_CONFIG = "model_name_or_path: demo\nstage: sft\ndo_train: true\n"


def _finished(folder: Path, kind: str = "train", status: str = "completed") -> Path:
    run = RunFolder(folder)
    run.create(kind, TRAIN_CONFIG, command=["python", "-m", "engine", kind])
    run.update(status=status, pid=1, exit_code=0)
    (folder / "events.jsonl").write_text(json.dumps({"event": "end", "status": status}) + "\n")
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("run.json", "config.yaml", "events.jsonl")}


def test_predict_into_a_training_runs_folder_is_refused_and_the_run_stays(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    run = _finished(tmp_path / "sft")
    before = _snapshot(run)
    code = main(["eval", str(REPO / "examples" / "predict_demo.yaml"), f"output_dir={run}",
                 "adapter_name_or_path=null", "max_samples=2"])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and "Traceback" not in err, err
    assert f"`output_dir: {run}` holds a train run (completed)" in err and f"`{run / 'predict'}`" in err
    assert _snapshot(run) == before
    assert not (run / "generated_predictions.jsonl").exists()


def test_which_records_a_job_may_join():
    assert other_job_problem("/nowhere", "predict") is None


def test_records_of_the_same_family_or_queued_ones_are_joined(tmp_path):
    assert other_job_problem(_finished(tmp_path / "a", "eval", "failed"), "predict") is None  # eval = predict
    assert other_job_problem(_finished(tmp_path / "b", "export", "failed"), "export") is None  # a retry
    queued = tmp_path / "c"
    RunFolder(queued).create("predict", "")  # the board writes the record, then starts the job that fills it
    assert other_job_problem(queued, "predict") is None
    assert "holds a train run (aborted)" in other_job_problem(_finished(tmp_path / "d", status="aborted"), "export")


def test_a_training_runs_config_given_to_export_keeps_that_runs_record(tmp_path):
    run = _finished(tmp_path / "sft")
    args = argparse.Namespace(config=str(run / "config.yaml"), run_dir=None)
    assert _run_dir_of(args, "export") is None and _run_dir_of(args, "chat") is None
    board = tmp_path / "export-1"
    RunFolder(board).create("export", "")
    assert _run_dir_of(argparse.Namespace(config=str(board / "config.yaml"), run_dir=None), "export") == board


def test_a_new_training_run_in_an_old_evaluations_folder_is_recorded_as_training(tmp_path):
    folder = _finished(tmp_path / "p", "predict")
    with JobContext(folder, "train", TRAIN_CONFIG, fresh=True):
        pass
    assert RunFolder(folder).info()["kind"] == "train"


def test_llamafactorys_way_to_predict_keeps_the_training_runs_events(tmp_path, capsys, monkeypatch):
    """`train` with `do_train: false` (how LLaMA-Factory predicts) counted as a new training run: pointed at the
    training run's folder it emptied that run's events.jsonl (its loss curve) and replaced its config.yaml."""
    monkeypatch.chdir(REPO)
    run = _finished(tmp_path / "sft")
    (run / "events.jsonl").write_text("".join(json.dumps({"event": "log", "step": i, "loss": 1.0}) + "\n"
                                              for i in range(1, 4)))
    before = _snapshot(run)
    code = main(["train", str(REPO / "examples" / "predict_demo.yaml"), f"output_dir={run}",
                 "adapter_name_or_path=null", "max_samples=2"])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and "holds a train run (completed): this predict job" in err, err
    assert _snapshot(run) == before


def test_an_api_port_out_of_range_is_a_user_error(capsys):
    assert main(["api", str(REPO / "examples" / "chat_demo.yaml"), "--port", "99999"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "--port 99999 is not a TCP port" in err and "Traceback" not in err


def test_rewards_options_are_checked_before_sampling(tmp_path, capsys):
    """`lf-engine rewards --samples -1` was an IndexError, and an --out that is a folder or in a missing folder an
    OSError traceback after every completion had been sampled."""
    config = str(REPO / "examples" / "grpo_demo.yaml")
    for extra, words in ((["--samples", "-1"], "--samples -1: give at least 1"),
                         (["--out", str(tmp_path)], "is a folder; give a file name"),
                         (["--out", str(tmp_path / "no" / "r.json")], "does not exist; create it")):
        assert main(["rewards", config, *extra]) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err


def test_a_kind_is_named_with_its_article(tmp_path):
    from engine.wording import with_article

    assert [with_article(w) for w in ("eval", "export", "train", "predict", "assistant", "user", "observation")] == \
        ["an eval", "an export", "a train", "a predict", "an assistant", "a user", "an observation"]
    assert "holds an eval run (failed): this train job" in other_job_problem(
        _finished(tmp_path / "e", "eval", "failed"), "train")
