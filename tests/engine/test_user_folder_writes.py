"""Files the engine writes into a folder the user chose (a ``tokenized_path``, an ``output_dir``, an
``export_dir``) replace what is there under that name: a link planted there (a folder copied from elsewhere, or
shared) was written through, changing the file it pointed to, anywhere the user can write."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]


def plant_link(folder: Path, name: str, outside: Path) -> Path:
    """A link ``folder/name`` to a file of the user's outside the folder; that file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True, exist_ok=True)
    target = outside / f"precious-{name.replace('/', '-')}"
    target.write_text("the user's own file\n", encoding="utf-8")
    (folder / name).symlink_to(target)
    return target


def test_tokenized_path_counts_and_provenance_replace_a_planted_link(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    saved, outside = tmp_path / "tokenized", tmp_path / "outside"
    outside.mkdir()
    targets = {name: plant_link(saved, name, outside) for name in ("lf_stats.json", "lf_tokenized.json")}
    assert main(["data", str(REPO / "examples" / "sft_lora_demo.yaml"), f"dataset_dir={REPO / 'examples' / 'data'}",
                 "dataset=demo_identity", "max_samples=4", f"tokenized_path={saved}", "overwrite_cache=true"]) == 0
    for name, target in targets.items():
        assert target.read_text(encoding="utf-8") == "the user's own file\n", f"{name} was written through its link"
        assert not (saved / name).is_symlink() and (saved / name).is_file(), name
    assert json.loads((saved / "lf_stats.json").read_text(encoding="utf-8"))["train"]["rows"] == 4
    assert json.loads((saved / "lf_tokenized.json").read_text(encoding="utf-8"))["stage"] == "sft"
    assert sorted(p.name for p in saved.iterdir() if p.name.startswith(".")) == []  # no temp file left


def test_run_folder_files_replace_a_planted_link(tmp_path):
    """An output_dir from elsewhere (a resumed run's folder, copied or shared): its config.yaml, events.jsonl,
    loss.png and the profiler's profile.json and profile.md."""
    from engine.runs import EventWriter, RunFolder
    from engine.train.plotting import plot_loss
    from engine.train.profiler import ModuleProfilerCallback

    out, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    names = ("config.yaml", "events.jsonl", "loss.png", "profile.json", "profile.md", ".profile.json.tmp")
    targets = {name: plant_link(out, name, outside) for name in names}
    RunFolder(out).create("train", "stage: sft\n")
    writer = EventWriter(out / "events.jsonl")
    for step in range(1, 6):
        writer.write({"event": "log", "step": step, "loss": 2.0 / step})
    assert plot_loss(out / "events.jsonl", out / "loss.png") == out / "loss.png"
    profiler = ModuleProfilerCallback(["model.layers.0"], folder=out)
    profiler.steps_timed, profiler.step_ms = 1, 2.0
    profiler.totals["model.layers.0"].update(forward=0.5, backward=1.0, calls=1)
    profiler.finish()
    for name, target in targets.items():
        assert target.read_text(encoding="utf-8") == "the user's own file\n", f"{name} was written through its link"
    for name in names[:-1]:
        assert not (out / name).is_symlink() and (out / name).is_file(), name
    assert (out / "config.yaml").read_text(encoding="utf-8") == "stage: sft\n"
    assert len((out / "events.jsonl").read_text(encoding="utf-8").splitlines()) == 5
    assert (out / "loss.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((out / "profile.json").read_text(encoding="utf-8"))["modules"][0]["module"] == "model.layers.0"
    assert "| model.layers.0 |" in (out / "profile.md").read_text(encoding="utf-8")


def test_a_saved_split_replaces_planted_links(tmp_path, monkeypatch):
    """datasets writes a split's files by name: dataset_dict.json, a split's state.json, dataset_info.json and Arrow
    data, and a split's folder itself, each planted as a link in a tokenized_path saved again."""
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    saved, outside = tmp_path / "tokenized", tmp_path / "outside"
    outside.mkdir()
    args = ["data", str(REPO / "examples" / "sft_lora_demo.yaml"), f"dataset_dir={REPO / 'examples' / 'data'}",
            "dataset=demo_identity", "max_samples=4", f"tokenized_path={saved}"]
    assert main(args) == 0
    names = ["dataset_dict.json", *(f"train/{p.name}" for p in sorted((saved / "train").iterdir()))]
    targets = {}
    for name in names:
        (saved / name).unlink()
        targets[name] = plant_link(saved, name, outside)
    (outside / "elsewhere").mkdir()
    (saved / "eval").symlink_to(outside / "elsewhere", target_is_directory=True)  # a split folder that is a link
    assert main([*args, "overwrite_cache=true", "val_size=0.5"]) == 0
    for name, target in targets.items():
        assert target.read_text(encoding="utf-8") == "the user's own file\n", f"{name} was written through its link"
        assert not (saved / name).is_symlink() and (saved / name).is_file(), name
    assert list((outside / "elsewhere").iterdir()) == []
    assert not (saved / "eval").is_symlink() and (saved / "eval" / "state.json").is_file()
    assert main(args) == 0  # the saved data loads
