"""A web address typed as the model is said to be one (with the hub id when the address shows it), not reported as a
missing folder or mangled into another path."""

from __future__ import annotations

import pytest

from engine.config import build_config
from engine.errors import ModelError
from engine.models.loader import resolve_model_path
from engine.models.web_address import web_address_problem
from engine.preflight import check


@pytest.mark.parametrize("url, hub_id", [
    ("https://huggingface.co/Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("https://huggingface.co/Qwen/Qwen3-0.6B/tree/main", "Qwen/Qwen3-0.6B"),
    ("https://www.modelscope.cn/models/Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("https://huggingface.co/datasets/owner/data", None),
    ("http://example.com//models/x", None),
])
def test_a_web_address_is_named_as_one(url, hub_id):
    problem = web_address_problem(url)
    assert problem.startswith(f"`model_name_or_path: {url}` is a web address, not a model")
    assert "owner/name" in problem and "local model folder" in problem
    assert (f"hub id is `{hub_id}`" in problem) if hub_id else "this address's hub id" not in problem


@pytest.mark.parametrize("name", ["Qwen/Qwen3-0.6B", "/models//qwen", "demo", "./x", "C:/models", ""])
def test_other_names_are_not_web_addresses(name):
    assert web_address_problem(name) is None


def test_preflight_and_the_loader_say_so(tmp_path):
    url = "https://x.co/a//b"
    cfg = build_config({"model_name_or_path": url, "stage": "sft", "dataset": "d", "dataset_dir": str(tmp_path),
                        "template": "chatml", "output_dir": str(tmp_path / "out")})
    problems = [p for p in check(cfg) if "model_name_or_path" in p]
    assert problems == [web_address_problem(url)]
    with pytest.raises(ModelError, match="is a web address"):
        resolve_model_path(url)
