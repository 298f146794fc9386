"""A model or adapter folder whose JSON files are not what they should be: a config.json saved as UTF-16 (Windows
Notepad's "Unicode"), one that is a list, one nested past json's depth, and an adapter_config.json nested so. The
pre-flight check names the file and the fix for each; before, each stopped `lf-engine check` and `train` with a
UnicodeDecodeError or RecursionError traceback (the model family, bitsandbytes and pre-quantization readers), or
passed a list as a config."""

from __future__ import annotations

import pytest

from engine.config import build_config
from engine.preflight import check

DEEP = "[" * 100_000 + "]" * 100_000


def _cfg(tmp_path, **keys):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "rows.json").write_text('[{"instruction": "a", "output": "b"}]')
    return build_config({"model_name_or_path": str(tmp_path / "model"), "stage": "sft", "template": "chatml",
                         "dataset": str(data / "rows.json"), "output_dir": str(tmp_path / "out"), **keys})


@pytest.mark.parametrize(("content", "says"), [
    ("\ufeff{}".encode("utf-16"), "is not UTF-8 text (byte 0xff at position 0); re-save it as UTF-8"),
    (b"[]", "is not a JSON object (it holds a list)"),
    (DEEP.encode(), "nests lists or objects too deeply to be read"),
])
@pytest.mark.parametrize("command", ["train", "chat", "export"])
def test_a_model_config_json_that_cannot_be_read_is_named(tmp_path, content, says, command):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(content)
    keys = {"export_dir": str(tmp_path / "export")} if command == "export" else {}
    problems = [p for p in check(_cfg(tmp_path, **keys), command) if "config.json" in p]
    assert problems and f"{model / 'config.json'} {says}" in problems[0], problems


def test_an_adapter_config_nested_too_deeply_is_named(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(DEEP)
    problems = check(_cfg(tmp_path, model_name_or_path="demo", adapter_name_or_path=str(adapter)))
    assert any("its adapter_config.json nests lists or objects too deeply" in p for p in problems), problems


class _RunsCode:
    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (self.flag,))


def test_model_weights_that_carry_code_are_refused_not_loaded(tmp_path, capsys):
    """transformers loads a pytorch_model.bin with weights_only=True, which refused this pickle with an
    UnpicklingError traceback advising to load it again with weights_only=False (running its code)."""
    import shutil

    import torch

    from engine.cli import EXIT_USER_ERROR, main
    from engine.demo import ensure_demo_model

    model = tmp_path / "model"
    shutil.copytree(ensure_demo_model(), model)
    (model / "model.safetensors").unlink()
    flag = tmp_path / "ran"
    torch.save({"w": _RunsCode(flag)}, model / "pytorch_model.bin")
    data = tmp_path / "rows.json"
    data.write_text('[{"instruction": "a", "output": "b"}]')
    config = tmp_path / "run.yaml"
    config.write_text(f"model_name_or_path: {model}\nstage: sft\ntemplate: chatml\ndataset: {data}\n"
                      f"output_dir: {tmp_path / 'out'}\nmax_steps: 1\nreport_to: none\n")
    code = main(["train", str(config)])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and "Traceback" not in err, err
    assert f"The weights of `{model}` are a pickle that holds more than tensors" in err
    assert "weights_only=False" not in err and not flag.exists()
