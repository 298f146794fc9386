"""`reward_model:` folders a user or a damaged disk may give: each refused by the pre-flight check (or, for a
pickle's values, as the head is read, before any model loads) naming the problem and the fix, never a traceback,
and a pickled value head that would run code is not run."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.errors import ModelError
from engine.models.value_head import read_value_head
from engine.train.rl_checks import check_reward_model

HEAD = {"v_head.summary.weight": torch.zeros(1, 8), "v_head.summary.bias": torch.zeros(1)}


def _folder(where: Path, files: dict[str, object]) -> str:
    where.mkdir()
    for name, content in files.items():
        if isinstance(content, dict) and all(isinstance(v, torch.Tensor) for v in content.values()):
            save_file(content, str(where / name))
        elif isinstance(content, bytes):
            (where / name).write_bytes(content)
        else:
            (where / name).write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(where)


@pytest.mark.parametrize("files, expected", [
    ({"adapter_config.json": "{not json"}, "adapter_config.json cannot be read (JSONDecodeError); the folder is damaged"),
    ({"adapter_config.json": [1]}, "adapter_config.json is not a JSON object"),
    ({"adapter_config.json": b"\xff\xfe\x00"}, "adapter_config.json cannot be read (UnicodeDecodeError)"),
    ({"config.json": "{"}, "config.json cannot be read (JSONDecodeError)"),
    ({"config.json": []}, "config.json is not a JSON object"),
    ({"config.json": {"architectures": "LlamaForCausalLM"}}, "is a LlamaForCausalLM without a value head"),
    ({"adapter_config.json": {"task_type": "SEQ_CLS"}}, "names no base model (`base_model_name_or_path`)"),
    ({"adapter_config.json": {"task_type": "CAUSAL_LM", "base_model_name_or_path": "/nowhere/base"},
      "value_head.safetensors": HEAD}, "is a LoRA adapter of `/nowhere/base`, which does not exist here"),
    ({"adapter_config.json": {"task_type": "CAUSAL_LM", "base_model_name_or_path": "/"},
      "value_head.safetensors": "garbage"}, "is not a safetensors file (shorter than its header)"),
    ({"config.json": {"architectures": ["LlamaForCausalLM"], "hidden_size": 16}, "value_head.safetensors": HEAD},
     "takes 8 inputs and the model's hidden size is 16: the head was trained on another model"),
    ({"config.json": {"architectures": ["LlamaForCausalLM"], "hidden_size": 8},
      "value_head.safetensors": {"v_head.summary.weight": torch.zeros(1, 0), "v_head.summary.bias": torch.zeros(1)}},
     "holds v_head.summary.bias (1,), v_head.summary.weight (1, 0), not LLaMA-Factory's"),
])
def test_a_damaged_or_foreign_reward_model_is_named_before_loading(tmp_path, files, expected):
    problems = check_reward_model(_folder(tmp_path / "rm", files))  # several raised (JSONDecodeError, ...) or passed
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_value_head_that_is_not_numbers_or_not_tensors_is_refused_as_it_is_read(tmp_path):
    save_file({**HEAD, "v_head.summary.weight": torch.full((1, 8), float("nan"))}, str(tmp_path / "nan.safetensors"))
    with pytest.raises(ModelError, match=r"holds values that are not numbers \(NaN or inf\).*Train the reward model"):
        read_value_head(tmp_path / "nan.safetensors")  # was read, and every reward was NaN
    torch.save({"v_head.summary.weight": 5, "v_head.summary.bias": 3}, str(tmp_path / "ints.bin"))
    with pytest.raises(ModelError, match="holds nothing, not LLaMA-Factory's"):
        read_value_head(tmp_path / "ints.bin")  # was AttributeError: 'int' object has no attribute 'dim'
    save_file({**HEAD, "v_head.summary.bias": torch.ones(1, 1)}, str(tmp_path / "bias11.safetensors"))
    assert read_value_head(tmp_path / "bias11.safetensors")["bias"].tolist() == [1.0]  # one number, as read before
    torch.save({"v_head.summary.weight": torch.zeros(1, 8), "step": 3}, str(tmp_path / "mixed.bin"))
    with pytest.raises(ModelError, match=r"holds v_head.summary.weight \(1, 8\), not"):
        read_value_head(tmp_path / "mixed.bin")  # was AttributeError: 'int' object has no attribute 'shape'


class _Payload:
    def __reduce__(self):
        return (os.mkdir, ("/nonexistent-dir-made-by-a-pickle",))


def test_a_pickled_value_head_that_would_run_code_is_refused_not_run(tmp_path):
    (tmp_path / "value_head.bin").write_bytes(pickle.dumps(_Payload()))
    with pytest.raises(ModelError, match=r"cannot be read \(UnpicklingError: Weights only load failed"):
        read_value_head(tmp_path / "value_head.bin")
    assert not Path("/nonexistent-dir-made-by-a-pickle").exists()


LF_BIN = Path(__file__).resolve().parents[1] / "golden" / "lf_value_head_bin" / "value_head.bin"


def _bin_folder(where: Path, hidden: int, head: bytes | None = None) -> str:
    where.mkdir()
    (where / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": hidden}),
                                       encoding="utf-8")
    (where / "value_head.bin").write_bytes(LF_BIN.read_bytes() if head is None else head)
    return str(where)


def test_llama_factorys_value_head_bin_is_checked_as_its_safetensors_is(tmp_path):
    """value_head.bin (LLaMA-Factory without safetensors; tests/golden/lf_value_head_bin) read without torch and
    without running its pickle: its shapes against the model, and a damaged one named before anything loads."""
    assert check_reward_model(_bin_folder(tmp_path / "fits", 32)) == []
    assert read_value_head(LF_BIN)["weight"].shape == (1, 32)  # what the run then loads (weights_only)
    problems = check_reward_model(_bin_folder(tmp_path / "other", 16))  # was [] and the run failed as it loaded
    assert len(problems) == 1 and "value_head.bin takes 32 inputs and the model's hidden size is 16" in problems[0]
    whole = LF_BIN.read_bytes()
    problems = check_reward_model(_bin_folder(tmp_path / "cut", 32, whole[:len(whole) // 2]))
    assert len(problems) == 1 and "is not a file torch.save wrote (it is not a zip as torch.save writes, or it is " \
        "cut off); it should be the value_head.bin an rm run of LLaMA-Factory saved" in problems[0], problems
    buffer = io.BytesIO()
    torch.save({"v_head.summary.weight": torch.zeros(2, 32), "v_head.summary.bias": torch.zeros(1)}, buffer)
    problems = check_reward_model(_bin_folder(tmp_path / "shape", 32, buffer.getvalue()))
    assert len(problems) == 1 and "holds v_head.summary.weight (2, 32), v_head.summary.bias (1,), not" in problems[0]


def test_a_value_head_bin_whose_pickle_would_run_code_is_refused_at_the_check_not_run(tmp_path):
    buffer = io.BytesIO()
    torch.save({"v_head.summary.weight": torch.zeros(1, 32), "v_head.summary.bias": _Payload()}, buffer)
    problems = check_reward_model(_bin_folder(tmp_path / "rm", 32, buffer.getvalue()))
    assert len(problems) == 1 and "value_head.bin is refused, not loaded: its pickle names `posix.mkdir`" in \
        problems[0] and "loading it could run code" in problems[0], problems
    assert not Path("/nonexistent-dir-made-by-a-pickle").exists()
    torch.save({"v_head.summary.weight": torch.zeros(1, 32)}, buffer := io.BytesIO())
    with zipfile.ZipFile(buffer) as archive:  # a storage's data lost from the zip
        kept = {info.filename: archive.read(info) for info in archive.infolist() if "/data/" not in info.filename}
    damaged = io.BytesIO()
    with zipfile.ZipFile(damaged, "w") as archive:
        for name, data in kept.items():
            archive.writestr(name, data)
    problems = check_reward_model(_bin_folder(tmp_path / "lost", 32, damaged.getvalue()))
    assert len(problems) == 1 and "(the data of its tensor 'v_head.summary.weight' is missing)" in problems[0]
