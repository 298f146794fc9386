"""tests/golden/compare_rows.py on a config that names the built-in demo model (as every example config does): the
demo's name means nothing to LLaMA-Factory, which looked it up on the hub and stopped with a traceback."""

from __future__ import annotations

import json
import sys

import engine.demo
import engine.demo_vlm
from tests.golden import compare_rows


def test_llamafactory_is_given_the_demo_models_folder(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(engine.demo, "ensure_demo_model", lambda: tmp_path / "demo-model")
    monkeypatch.setattr(engine.demo_vlm, "ensure_demo_vlm", lambda: tmp_path / "demo-vlm")
    seen = tmp_path / "seen.json"
    incumbent = tmp_path / "incumbent"  # stands in for LLaMA-Factory's python: keeps the config it is given
    incumbent.write_text(f'#!/bin/sh\nprintf "%s" "$3" > {seen}\necho stopped here >&2\nexit 1\n', encoding="utf-8")
    incumbent.chmod(0o755)
    for name, folder in (("demo", "demo-model"), ("LF-Demo", "demo-model"), ("demo-vlm", "demo-vlm"),
                         (str(tmp_path / "mine"), "mine")):
        config = json.dumps({"model_name_or_path": name, "stage": "sft", "dataset": "demo_identity"})
        monkeypatch.setattr(sys, "argv", ["compare_rows", "--incumbent", str(incumbent), config])
        assert compare_rows.main() == 1
        assert "stopped here" in capsys.readouterr().out
        assert json.loads(seen.read_text(encoding="utf-8"))["model_name_or_path"] == str(tmp_path / folder)
