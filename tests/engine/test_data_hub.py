"""Hub-hosted dataset_info.json entries: hf_hub_url through `datasets`, ms_hub_url / om_hub_url when chosen."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from engine.data import DatasetError, load_examples
from engine.data.hub import choose_hubs, hub_source
from engine.data.registry import resolve_dataset

ROWS = [{"instruction": "Say hi", "input": "", "output": "Hi!"}, {"instruction": "Add 2+2", "input": "",
                                                                    "output": "4"}]


class Args:
    def __init__(self, folder):
        self.dataset_dir = str(folder)
        self.max_samples = None
        self.mix_strategy = "concat"
        self.interleave_probs = None


@pytest.fixture
def hub_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("USE_MODELSCOPE_HUB", "0")  # restored after the test (choose_hubs sets it)
    monkeypatch.setenv("USE_OPENMIND_HUB", "0")
    info = {
        "alpaca_hub": {"hf_hub_url": "org/alpaca", "subset": "en", "split": "validation", "revision": "v1",
                       "folder": "data"},
        "both_hubs": {"hf_hub_url": "org/both", "ms_hub_url": "ms-org/both"},
        "ms_only": {"ms_hub_url": "ms-org/only"},
        "scripted": {"script_url": "my_script"},
    }
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    return tmp_path


def test_hf_entry_loads_through_datasets_with_its_subset_split_and_revision(hub_dir, monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, **kwargs):
        calls.append((path, kwargs))
        return datasets.Dataset.from_list(ROWS)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    examples = load_examples(Args(hub_dir), "alpaca_hub", "sft")
    assert calls == [("org/alpaca", {"name": "en", "data_dir": "data", "split": "validation", "revision": "v1",
                                     "cache_dir": None})]
    assert [e["messages"][-1]["content"] for e in examples] == ["Hi!", "4"]


def test_uncached_entry_offline_names_the_entry(hub_dir, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetError, match=r"'alpaca_hub' \(hf_hub_url: org/alpaca\).*not in the local cache"):
        load_examples(Args(hub_dir), "alpaca_hub", "sft")


def test_an_entry_with_a_hub_url_and_a_file_name_reads_the_hub_as_llamafactory(hub_dir, monkeypatch):
    """LLaMA-Factory 0.9.5 (get_dataset_list) takes an entry's hub URL before its `file_name`, so the same config
    trains on the same rows; offline without a cache, the error names the local file and the one edit that reads it."""
    import datasets

    (hub_dir / "local.json").write_text(json.dumps([{"instruction": "Local", "input": "", "output": "file"}]))
    info = json.loads((hub_dir / "dataset_info.json").read_text())
    info["hub_and_file"] = {"file_name": "local.json", "hf_hub_url": "org/alpaca"}
    (hub_dir / "dataset_info.json").write_text(json.dumps(info))
    spec = resolve_dataset("hub_and_file", hub_dir)
    assert spec.hub["kind"] == "hf_hub" and str(spec.path) == "org/alpaca"
    from engine.data.registry import list_datasets

    assert list_datasets(hub_dir)["hub_and_file"]["hub"] is True
    monkeypatch.setattr(datasets, "load_dataset", lambda path, **kwargs: datasets.Dataset.from_list(ROWS))
    assert [e["messages"][-1]["content"] for e in load_examples(Args(hub_dir), "hub_and_file", "sft")] == ["Hi!", "4"]

    def offline(path, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub (offline mode is enabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DatasetError, match=r"also names `file_name: local.json`.*remove `hf_hub_url`"):
        load_examples(Args(hub_dir), "hub_and_file", "sft")
    del info["hub_and_file"]["hf_hub_url"]  # the edit the message names: the local file is read
    (hub_dir / "dataset_info.json").write_text(json.dumps(info))
    assert [e["messages"][-1]["content"] for e in load_examples(Args(hub_dir), "hub_and_file", "sft")] == ["file"]


def test_a_script_or_cloud_entry_with_a_file_name_is_refused_with_the_edit(hub_dir):
    """LLaMA-Factory loads such an entry by its script or cloud file, not the local file: refused, naming the edit."""
    info = json.loads((hub_dir / "dataset_info.json").read_text())
    (hub_dir / "local.json").write_text(json.dumps(ROWS))
    info["scripted_file"] = {"script_url": "my_script", "file_name": "local.json"}
    info["cloud_file"] = {"cloud_file_name": "s3://bucket/data.json", "file_name": "local.json"}
    (hub_dir / "dataset_info.json").write_text(json.dumps(info))
    for name, key in (("scripted_file", "script_url"), ("cloud_file", "cloud_file_name")):
        with pytest.raises(DatasetError, match=f"names both `{key}` and `file_name`.*Remove `{key}`"):
            resolve_dataset(name, hub_dir)


def test_hub_choice_follows_llamafactory(hub_dir, monkeypatch):
    assert hub_source({"hf_hub_url": "a", "ms_hub_url": "b"}) == ("hf_hub", "a")
    assert hub_source({"ms_hub_url": "b"}) == ("ms_hub", "b")
    assert hub_source({"file_name": "x.json"}) is None
    choose_hubs(types.SimpleNamespace(use_modelscope_hub=True, use_openmind_hub=False))
    assert hub_source({"hf_hub_url": "a", "ms_hub_url": "b"}) == ("ms_hub", "b")
    assert hub_source({"hf_hub_url": "a", "om_hub_url": "c"}) == ("hf_hub", "a")
    assert resolve_dataset("both_hubs", hub_dir).hub["kind"] == "ms_hub"


def test_modelscope_entry_needs_its_package(hub_dir, monkeypatch):
    import engine.data.hub as hub

    real = hub.importlib.util.find_spec
    monkeypatch.setattr(hub.importlib.util, "find_spec", lambda n: None if n == "modelscope" else real(n))
    with pytest.raises(DatasetError, match=r"'ms_only' \(ms_hub_url: ms-org/only\).*pip install modelscope"):
        load_examples(Args(hub_dir), "ms_only", "sft")


def test_modelscope_entry_loads_with_the_package(hub_dir, monkeypatch):
    import datasets

    seen = {}

    class MsDataset:
        @staticmethod
        def load(**kwargs):
            seen.update(kwargs)
            return datasets.Dataset.from_list(ROWS)

    monkeypatch.setitem(sys.modules, "modelscope", types.SimpleNamespace(MsDataset=MsDataset,
                                                                          __spec__=object()))
    import engine.data.hub as hub

    real = hub.importlib.util.find_spec
    monkeypatch.setattr(hub.importlib.util, "find_spec", lambda n: object() if n == "modelscope" else real(n))
    assert len(load_examples(Args(hub_dir), "ms_only", "sft")) == 2
    assert seen["dataset_name"] == "ms-org/only" and seen["split"] == "train"


def test_script_entries_are_refused_with_the_reason(hub_dir):
    with pytest.raises(DatasetError, match="`script_url: my_script`, which this engine does not run"):
        resolve_dataset("scripted", hub_dir)


def test_shared_llamafactory_registry_resolves_every_hub_entry():
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if not (shared / "dataset_info.json").is_file():
        pytest.skip("../shared/data is absent")
    info = json.loads((shared / "dataset_info.json").read_text())
    hub_names = [n for n, e in info.items() if not e.get("file_name")]
    assert len(hub_names) >= 80
    assert all(resolve_dataset(n, shared).hub for n in hub_names)


def test_modelscope_models_use_its_snapshot_or_are_refused(tmp_path, monkeypatch):
    import importlib.util

    from engine.errors import ModelError
    from engine.models.loader import resolve_model_path

    monkeypatch.setenv("USE_MODELSCOPE_HUB", "1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "modelscope" else real(n, *a))
    with pytest.raises(ModelError, match="`use_modelscope_hub: true` needs the `modelscope` package"):
        resolve_model_path("Qwen/Qwen3-0.6B")
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "modelscope" else real(n, *a))
    fetched = []
    fake = types.SimpleNamespace(snapshot_download=lambda repo, revision, cache_dir: fetched.append(repo) or
                                 str(tmp_path))
    monkeypatch.setitem(sys.modules, "modelscope", fake)
    assert resolve_model_path("Qwen/Qwen3-0.6B") == str(tmp_path) and fetched == ["Qwen/Qwen3-0.6B"]


def test_llamafactorys_online_and_remote_dataset_dirs(tmp_path, monkeypatch):
    """`dataset_dir: ONLINE` makes every dataset name a hub dataset; `dataset_dir: REMOTE:owner/repo` reads that hub
    repository's dataset_info.json (here from a local hub cache, downloads off), as LLaMA-Factory 0.9.5 does."""
    import datasets

    calls = []
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda path, **kwargs: calls.append((path, kwargs)) or datasets.Dataset.from_list(ROWS))
    args = Args(tmp_path)
    args.dataset_dir = "ONLINE"
    examples = load_examples(args, "llamafactory/alpaca_en", "sft")
    assert calls[0][0] == "llamafactory/alpaca_en" and len(examples) == 2

    cache = tmp_path / "hub"
    snapshot = cache / "datasets--llamafactory--demo_data" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "dataset_info.json").write_text(json.dumps({
        "alpaca_remote": {"hf_hub_url": "llamafactory/alpaca_en", "split": "train"},
        "both": {"file_name": "data.json", "hf_hub_url": "llamafactory/both"},
        "local_only": {"file_name": "data.json"}}))
    (cache / "datasets--llamafactory--demo_data" / "refs").mkdir()
    (cache / "datasets--llamafactory--demo_data" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    spec = resolve_dataset("alpaca_remote", "REMOTE:llamafactory/demo_data")
    assert str(spec.path) == "llamafactory/alpaca_en"
    assert str(resolve_dataset("both", "REMOTE:llamafactory/demo_data").path) == "llamafactory/both"  # the hub first
    with pytest.raises(DatasetError, match="names only a local `file_name`"):
        resolve_dataset("local_only", "REMOTE:llamafactory/demo_data")
    with pytest.raises(DatasetError, match="Unknown dataset 'alpaca_remot'.*Did you mean 'alpaca_remote'"):
        resolve_dataset("alpaca_remot", "REMOTE:llamafactory/demo_data")
    with pytest.raises(DatasetError, match="'other/repo'.*cannot be fetched"):
        resolve_dataset("x", "REMOTE:other/repo")


def test_an_uncached_online_dataset_names_a_fix_without_dataset_info(monkeypatch):
    """Under `dataset_dir: ONLINE` there is no dataset_info.json to edit: the offline fix says what to do instead."""
    import datasets

    def offline(path, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub (offline mode is enabled)")

    monkeypatch.setenv("USE_MODELSCOPE_HUB", "0")
    monkeypatch.setenv("USE_OPENMIND_HUB", "0")
    monkeypatch.setattr(datasets, "load_dataset", offline)
    args = Args("ONLINE")
    with pytest.raises(DatasetError, match="set `dataset_dir` to a folder whose dataset_info.json names") as err:
        load_examples(args, "someone/nothing", "sft")
    assert "set `file_name` for" not in str(err.value)


def test_online_follows_the_chosen_hub_and_the_board_keeps_both_words(monkeypatch):
    """ONLINE names a ModelScope dataset when ModelScope is the chosen hub (LLaMA-Factory's USE_MODELSCOPE_HUB); the
    board does not turn ONLINE or REMOTE:owner/repo into folder paths."""
    from app.forms import absolute_paths

    monkeypatch.setenv("USE_OPENMIND_HUB", "0")
    monkeypatch.setenv("USE_MODELSCOPE_HUB", "1")
    assert resolve_dataset("AI-ModelScope/alpaca", "ONLINE").hub["kind"] == "ms_hub"
    monkeypatch.setenv("USE_MODELSCOPE_HUB", "0")
    assert resolve_dataset("llamafactory/alpaca_en", "ONLINE").hub["kind"] == "hf_hub"
    for value in ("ONLINE", "REMOTE:llamafactory/demo_data"):
        assert absolute_paths({"dataset_dir": value})["dataset_dir"] == value
