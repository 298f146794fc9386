"""Checkpoints and model folders from elsewhere: a weights file whose safetensors header is not the table of tensors
it should be, or a shard index naming something other than files beside it, is named as such by the checks that
read headers (resume, pre-flight, the board's checkpoint picker), never raised out of them."""

from __future__ import annotations

import json
import struct

import pytest

from engine.checkpoints import checkpoint_problem, latest_complete, weights_problem
from engine.runs import RunFolder

GOOD_HEADER = {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}


def _safetensors(path, header: bytes, body: int = 4) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * body)


def _checkpoint(folder, header: bytes):
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    _safetensors(folder / "adapter_model.safetensors", header)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": int(folder.name.split("-")[-1])}))
    return folder


@pytest.mark.parametrize("header", [
    b"[]",
    b'"weights"',
    b'{"w": "data_offsets"}',
    b'{"w": {"data_offsets": 5}}',
    b'{"w": {"data_offsets": ["a", "b"]}}',
    b'{"w": {"data_offsets": []}}',
    b'{"w": {"data_offsets": [0, -4]}}',
])
def test_a_header_that_is_no_table_of_tensors_is_named(tmp_path, header):
    _checkpoint(tmp_path / "checkpoint-2", header)
    assert "adapter_model.safetensors is not a safetensors file" in checkpoint_problem(tmp_path / "checkpoint-2")
    good = _checkpoint(tmp_path / "checkpoint-1", json.dumps(GOOD_HEADER).encode())
    assert checkpoint_problem(good) is None
    latest, skipped = latest_complete(tmp_path)
    assert latest == good and [p.name for p, _ in skipped] == ["checkpoint-2"]


def test_a_header_nested_past_the_parsers_depth_is_unreadable(tmp_path):
    folder = _checkpoint(tmp_path / "checkpoint-1", b"[" * 100_000 + b"]" * 100_000)
    assert "cut off or unreadable" in weights_problem(folder)


def test_a_header_larger_than_safetensors_reads_is_not_read(tmp_path, monkeypatch):
    import engine.checkpoints as checkpoints

    monkeypatch.setattr(checkpoints, "MAX_HEADER_BYTES", 64)
    folder = _checkpoint(tmp_path / "checkpoint-1", json.dumps({**GOOD_HEADER, "__metadata__": {"x": "y" * 80}}).encode())
    assert "a header of" in weights_problem(folder)


@pytest.mark.parametrize("weight_map", [
    {"a": ["model.safetensors"]},
    {"a": 5},
    {"a": "../../outside.safetensors"},
    {"a": "sub/model.safetensors"},
    {"a": ""},
])
def test_a_shard_index_naming_no_file_beside_it_is_named(tmp_path, weight_map):
    (tmp_path / "outside.safetensors").write_bytes(b"")
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert "names shards that are not file names in its folder" in weights_problem(folder)


def test_the_boards_checkpoint_picker_passes_over_a_crafted_checkpoint(tmp_path):
    """One run folder copied in from elsewhere with such a header stopped the top bar's picker (and its refresh)
    with a TypeError; it is left out as a torn save is, and the other runs' checkpoints stay listed."""
    from app.history import checkpoints

    runs = tmp_path / "runs"
    for run_id, header in (("20260101-000000-train-aaaa", b'{"w": {"data_offsets": 5}}'),
                           ("20260101-000001-train-bbbb", json.dumps(GOOD_HEADER).encode())):
        folder = RunFolder(runs / run_id)
        folder.create("train", "stage: sft\n")
        folder.update(status="completed")
        _checkpoint(folder.path / "checkpoint-1", header)
    assert [label for label, _ in checkpoints(runs)] == ["20260101-000001-train-bbbb / checkpoint-1"]


def test_a_value_head_header_nested_past_the_parsers_depth_is_named(tmp_path):
    """The rm pre-flight check reads value_head.safetensors' header the same way: RecursionError was raised."""
    from engine.models.value_head import value_head_inputs

    path = tmp_path / "value_head.safetensors"
    _safetensors(path, b"[" * 100_000 + b"]" * 100_000)
    hidden, problem = value_head_inputs(path)
    assert hidden is None and "is not a safetensors file" in problem and "nested too deeply" in problem


def _state_checkpoint(folder, state: dict):
    _checkpoint(folder, json.dumps(GOOD_HEADER).encode())
    (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


@pytest.mark.parametrize(("state", "says"), [
    ({"global_step": "abc"}, "trainer_state.json's global_step is 'abc', not a step number"),
    ({"global_step": -1}, "not a step number"),
    ({"global_step": True}, "not a step number"),
    ({"global_step": 10**30}, "trainer_state.json says step a number past any run's steps, not 3 as its folder's name"),
    ({"global_step": 7}, "trainer_state.json says step 7, not 3"),
    ({"global_step": 3, "log_history": 5}, "log_history is not a list of logs"),
    ({"global_step": 3, "log_history": [1]}, "log_history is not a list of logs"),
    ({"global_step": 3, "max_steps": "10"}, "max_steps is not a number"),
])
def test_a_trainer_state_that_lies_about_its_step_is_not_resumed_from(tmp_path, state, says):
    """A state claiming a step past the run's end resumed there, trained nothing and ended 'completed'; one whose
    step is text stopped the Trainer with a TypeError. Such a checkpoint is skipped as a torn one is, and named; a
    full disk's clean-up (remove_torn) still removes only saves that were cut off, never such a folder."""
    from engine.checkpoints import remove_torn

    good = _state_checkpoint(tmp_path / "checkpoint-2", {"global_step": 2, "log_history": [{"loss": 1.0}]})
    bad = _state_checkpoint(tmp_path / "checkpoint-3", state)
    assert says in checkpoint_problem(bad)
    assert latest_complete(tmp_path) == (good, [(bad, checkpoint_problem(bad))])
    assert remove_torn(tmp_path) == [] and bad.is_dir()


def test_a_trainer_state_of_another_transformers_is_refused_naming_its_keys(tmp_path):
    """TrainerState(**saved) stopped the run with "got an unexpected keyword argument" and a traceback."""
    from types import SimpleNamespace

    from engine.errors import UserError
    from engine.train.resume_fit import guard_loads

    folder = _state_checkpoint(tmp_path / "checkpoint-2", {"global_step": 2, "new_field": 1})
    with pytest.raises(UserError, match=r"keys transformers \S+ does not know \(`new_field`\)\. It was saved by another"):
        guard_loads(SimpleNamespace(), SimpleNamespace(), str(folder))
    _state_checkpoint(tmp_path / "checkpoint-4", {"global_step": 4, "log_history": []})
    guard_loads(SimpleNamespace(), SimpleNamespace(), str(tmp_path / "checkpoint-4"))


def _state_named_not_removed(tmp_path, bad):
    from engine.checkpoints import remove_torn

    good = _state_checkpoint(tmp_path / "checkpoint-2", {"global_step": 2})
    problem = checkpoint_problem(bad)
    assert problem and "copy the checkpoint again" in problem
    assert latest_complete(tmp_path) == (good, [(bad, problem)])
    assert remove_torn(tmp_path) == [] and (bad / "adapter_model.safetensors").is_file()
    return problem


def test_an_outsized_trainer_state_is_named_never_read_whole_nor_removed(tmp_path):
    """A sparse trainer_state.json of gigabytes was read whole (in the board's process too, when it resumes a run),
    failed to parse and so counted as a cut-off save: the full-disk clean-up then deleted the checkpoint. Past the
    bound (far above a real run's) it is named and left alone, without being read."""
    import tracemalloc

    from engine.checkpoints import MAX_STATE_BYTES

    bad = _state_checkpoint(tmp_path / "checkpoint-3", {"global_step": 3})
    with open(bad / "trainer_state.json", "r+b") as fh:
        fh.truncate(MAX_STATE_BYTES + 1)
    tracemalloc.start()
    try:
        problem = _state_named_not_removed(tmp_path, bad)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"is {MAX_STATE_BYTES + 1:,} bytes, more than any run writes" in problem
    assert peak < 32 << 20


def test_a_trainer_state_that_is_a_pipe_or_a_device_is_named_never_removed(tmp_path):
    """A named pipe (or a link to /dev/zero) there read as 'no trainer_state.json: the save was cut off', and the
    full-disk clean-up deleted the whole checkpoint; reading it would have waited for a writer for good."""
    import os

    pipe = _state_checkpoint(tmp_path / "checkpoint-3", {"global_step": 3})
    (pipe / "trainer_state.json").unlink()
    os.mkfifo(pipe / "trainer_state.json")
    assert "not a regular file" in _state_named_not_removed(tmp_path, pipe)
    device = _state_checkpoint(tmp_path / "checkpoint-4", {"global_step": 4})
    (device / "trainer_state.json").unlink()
    (device / "trainer_state.json").symlink_to("/dev/zero")
    assert "not a regular file" in checkpoint_problem(device)
    from engine.checkpoints import remove_torn
    assert remove_torn(tmp_path) == [] and device.is_dir() and pipe.is_dir()


def test_a_cut_off_trainer_state_is_still_a_torn_save(tmp_path):
    from engine.checkpoints import remove_torn

    bad = _state_checkpoint(tmp_path / "checkpoint-3", {"global_step": 3})
    (bad / "trainer_state.json").write_text('{"global_step": 3, "log_hi')
    assert checkpoint_problem(bad) == "trainer_state.json is cut off"
    assert remove_torn(tmp_path) == ["checkpoint-3"]
