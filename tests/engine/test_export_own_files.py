"""An export into its own run folder lists (and the next one removes) only the files it wrote. It listed whatever
the folder held when it ended: a run.json temp file the board was writing at that moment (``.run.json.<pid>.<tid>.tmp``)
went into export_info.json, and the next export then removed a file of that name (another writer's, in the
making) as an earlier export's; its size was also read after that writer had renamed it (FileNotFoundError)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from tinymodels import build_tiny_model

from engine.export import _clear_previous
from engine.export_checks import _check_export_dir, previous_export_files

BOARD_TEMP = ".run.json.4242.139872.tmp"
"""The name of the board's temp file while it replaces run.json (engine.atomic_write)."""


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base_dir = build_tiny_model(tmp_path_factory.mktemp("own-base"))
    adapter_dir = tmp_path_factory.mktemp("own-adapter")
    get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir),
                   LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(adapter_dir)
    return base_dir, adapter_dir


def test_a_temp_file_in_the_making_is_not_listed_as_the_exports(adapter, tmp_path, monkeypatch):
    from engine import export
    from engine.config import load_config
    from engine.lifecycle import JobContext

    export_dir = tmp_path / "merged"
    config = tmp_path / "export.yaml"
    config.write_text(f"model_name_or_path: {adapter[0]}\nadapter_name_or_path: {adapter[1]}\ntemplate: chatml\n"
                      f"export_dir: {export_dir}\n", encoding="utf-8")
    real = export._chat_template_matches

    def board_writes_run_json(*args, **kwargs):  # while the export verifies, the board replaces run.json
        (export_dir / BOARD_TEMP).write_text('{"status": "run')
        return real(*args, **kwargs)

    monkeypatch.setattr(export, "_chat_template_matches", board_writes_run_json)
    with JobContext(export_dir, "export"):
        result = export.run_export(load_config(str(config)), run_dir=str(export_dir))
    info = json.loads((export_dir / "export_info.json").read_text(encoding="utf-8"))
    assert BOARD_TEMP not in info["files"] and BOARD_TEMP not in result["files"]
    assert "model.safetensors" in info["files"] and "export_info.json" in info["files"]
    assert info["files"] == result["files"]
    assert not any(name in info["files"] for name in ("run.json", "events.jsonl", "config.yaml"))
    assert result["size_bytes"] == sum((export_dir / name).stat().st_size for name in info["files"])


def _cfg(tmp_path: Path):
    return SimpleNamespace(model=SimpleNamespace(model_name_or_path=str(tmp_path / "model"), adapter_name_or_path=None))


def test_an_info_file_naming_a_temp_file_never_has_it_removed(tmp_path):
    """An export_info.json written before this fix may name one; a file of that name now is another writer's."""
    export_dir = tmp_path / "merged"
    export_dir.mkdir()
    (export_dir / "model.safetensors").write_text("old")
    (export_dir / "run.json").write_text("{}")
    (export_dir / "export_info.json").write_text(json.dumps({"files": ["export_info.json", "model.safetensors",
                                                                       BOARD_TEMP]}))
    (export_dir / BOARD_TEMP).write_text('{"status": "run')  # the board's write in the making
    assert BOARD_TEMP not in [path.name for path in previous_export_files(export_dir)]
    assert _check_export_dir(export_dir, _cfg(tmp_path)) == []  # nor is it "other files" that refuse the export
    _clear_previous(export_dir)
    assert (export_dir / BOARD_TEMP).read_text() == '{"status": "run'
    assert sorted(p.name for p in export_dir.iterdir()) == [BOARD_TEMP, "run.json"]


def test_a_temp_file_beside_an_earlier_export_does_not_refuse_the_next(tmp_path):
    export_dir = tmp_path / "merged"
    export_dir.mkdir()
    (export_dir / "model.safetensors").write_text("old")
    (export_dir / "export_info.json").write_text(json.dumps({"files": ["export_info.json", "model.safetensors"]}))
    (export_dir / ".config.yaml.77.88.tmp").write_text("model_name")
    assert _check_export_dir(export_dir, _cfg(tmp_path)) == []
