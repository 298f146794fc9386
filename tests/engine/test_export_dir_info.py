"""An export folder's export_info.json as a folder from elsewhere may hold it. It names the files of an earlier
export, which the next export into the folder replaces: a name that is not a plain file name there (``..`` named
the folder's parent, which was deleted whole) or an info file of another shape makes the folder no earlier export,
so the pre-flight check refuses it as a folder that is not empty and nothing is deleted."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engine.export import _clear_previous
from engine.export_checks import _check_export_dir, previous_export_files


def _cfg(tmp_path):
    return SimpleNamespace(model=SimpleNamespace(model_name_or_path=str(tmp_path / "model"), adapter_name_or_path=None))


@pytest.mark.parametrize("info", [
    {"files": [".."]},
    {"files": ["."]},
    {"files": [""]},
    {"files": ["model.safetensors", "../precious"]},
    {"files": ["x\\..\\.."]},
    {"files": [5]},
    {"files": "model.safetensors"},
    ["model.safetensors"],
])
def test_an_info_file_naming_more_than_files_in_the_folder_deletes_nothing(tmp_path, info):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep")
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "model.safetensors").write_text("old")
    (export_dir / "export_info.json").write_text(json.dumps(info))
    assert previous_export_files(export_dir) is None
    [problem] = _check_export_dir(export_dir, _cfg(tmp_path))
    assert "is not empty" in problem and "holds no earlier export" in problem
    _clear_previous(export_dir)
    assert (precious / "notes.txt").read_text() == "keep"
    assert (export_dir / "model.safetensors").read_text() == "old"


def test_an_earlier_export_is_still_replaced_and_a_link_in_it_is_removed_not_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.bin").write_text("keep")
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    (export_dir / "model.safetensors").write_text("old")
    (export_dir / "shards").symlink_to(elsewhere, target_is_directory=True)
    (export_dir / "export_info.json").write_text(json.dumps({"files": ["model.safetensors", "shards"]}))
    assert _check_export_dir(export_dir, _cfg(tmp_path)) == []
    _clear_previous(export_dir)
    assert sorted(p.name for p in export_dir.iterdir()) == []
    assert (elsewhere / "data.bin").read_text() == "keep"


def test_an_info_file_naming_a_folder_there_deletes_nothing(tmp_path):
    """An export writes files only, so a folder the info file names is someone's data: a run folder holding an info
    file that lists its checkpoint had that checkpoint deleted whole by the next export into it."""
    export_dir = tmp_path / "run"
    (export_dir / "checkpoint-50").mkdir(parents=True)
    (export_dir / "checkpoint-50" / "adapter_model.safetensors").write_text("weights")
    (export_dir / "model.safetensors").write_text("old")
    (export_dir / "export_info.json").write_text(json.dumps({"files": ["model.safetensors", "checkpoint-50"]}))
    assert previous_export_files(export_dir) is None
    [problem] = _check_export_dir(export_dir, _cfg(tmp_path))
    assert "is not empty" in problem and "checkpoint-50" in problem
    _clear_previous(export_dir)
    assert (export_dir / "checkpoint-50" / "adapter_model.safetensors").read_text() == "weights"
