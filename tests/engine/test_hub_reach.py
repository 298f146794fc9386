"""No network: a hub model id that is not cached is refused in seconds, not after the download's retries."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from engine import hub_reach
from engine.config import build_config
from engine.errors import ModelError
from engine.preflight import check


@pytest.fixture()
def online(monkeypatch, tmp_path):
    """Downloads allowed (the suite runs with HF_HUB_OFFLINE=1), an empty hub cache, nothing remembered."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                 "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    hub_reach.forget()
    yield monkeypatch
    hub_reach.forget()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: connecting is refused


def hanging_lookup(monkeypatch):
    """A network whose name lookups hang (what makes huggingface_hub wait for its retries)."""
    def hang(*_args, **_kwargs):
        time.sleep(30)
        raise OSError("never")

    monkeypatch.setattr(socket, "create_connection", hang)


def test_a_refused_or_hanging_hub_is_found_out_in_seconds(online):
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert "ConnectionRefusedError" in hub_reach.unreachable()
    hub_reach.forget()
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    started = time.monotonic()
    assert "no answer" in hub_reach.unreachable()
    assert time.monotonic() - started < 2
    started = time.monotonic()
    assert "no answer" in hub_reach.unreachable()  # remembered: no second wait
    assert time.monotonic() - started < 0.1


def fake_proxy(answer: bytes | None) -> tuple[socket.socket, int]:
    """A proxy on localhost that answers each CONNECT with ``answer`` (None: accepts, then says nothing)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            conn.recv(1024)
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_a_hub_that_answers_is_reachable_and_a_proxy_is_asked_for_it(online):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub_reach.unreachable() is None
    online.setenv("HF_ENDPOINT", "https://hub.invalid")
    good, port = fake_proxy(b"HTTP/1.1 200 Connection established\r\n\r\n")
    with good:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        hub_reach.forget()
        assert hub_reach._target("https://hub.invalid") == ("127.0.0.1", port, "hub.invalid:443")
        assert hub_reach.unreachable() is None  # the proxy reaches the hub: downloads go through it
    refusing, port = fake_proxy(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
    with refusing:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        hub_reach.forget()
        assert "502 Bad Gateway" in hub_reach.unreachable()
    silent, port = fake_proxy(None)  # accepts, never forwards: what hangs a download behind a dead proxy
    with silent:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
        hub_reach.forget()
        started = time.monotonic()
        assert "timed out" in hub_reach.unreachable() or "no answer" in hub_reach.unreachable()
        assert time.monotonic() - started < 2
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0")
    hub_reach.forget()
    online.delenv("HTTPS_PROXY")
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert hub_reach.unreachable() is None  # the probe switched off


def test_preflight_refuses_an_uncached_hub_id_in_seconds(online):
    cfg = build_config({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "stage": "sft", "template": "qwen"})
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0")
    check(cfg, "chat")  # the checks' own imports, not timed
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    started = time.monotonic()
    problems = [p for p in check(cfg, "chat") if p.code == "hub_offline"]
    assert time.monotonic() - started < 3
    assert len(problems) == 1 and "`model_name_or_path: Qwen/Qwen2.5-0.5B`" in problems[0]
    assert "cannot be reached" in problems[0] and "hf download Qwen/Qwen2.5-0.5B" in problems[0]


def test_preflight_says_nothing_when_the_hub_answers(online):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        cfg = build_config({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "stage": "sft", "template": "qwen"})
        assert [p for p in check(cfg, "chat") if p.code in ("hub_offline", "model")] == []


def test_the_loader_fails_fast_without_trying_to_download(online):
    from engine.models import loader

    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    calls = []
    real = __import__("huggingface_hub").snapshot_download

    def spy(*args, **kwargs):
        calls.append(kwargs.get("local_files_only", False))
        return real(*args, **kwargs)

    online.setattr("huggingface_hub.snapshot_download", spy)
    started = time.monotonic()
    with pytest.raises(ModelError, match="cannot be reached"):
        loader.resolve_model_path("Qwen/Qwen2.5-0.5B")
    assert time.monotonic() - started < 3 and calls == [True]  # the cache was looked in, the network never tried


def _cache(name: str, config: dict) -> None:
    """``name``'s config.json in the (fixture's) hub cache, as a download leaves it."""
    import json
    import os

    repo = Path(os.environ["HF_HUB_CACHE"]) / f"models--{name.replace('/', '--')}"
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (repo / "snapshots" / ("0" * 40) / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40, encoding="utf-8")


def _rm_adapter(folder: Path, base: str) -> str:
    """LLaMA-Factory's rm output with LoRA: a CAUSAL_LM adapter of ``base`` and its value head (8 inputs)."""
    import json

    import torch
    from safetensors.torch import save_file

    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"task_type": "CAUSAL_LM", "base_model_name_or_path": base}),
                                                encoding="utf-8")
    save_file({"v_head.summary.weight": torch.zeros(1, 8), "v_head.summary.bias": torch.zeros(1)},
              str(folder / "value_head.safetensors"))
    return str(folder)


def test_a_reward_model_adapter_of_an_uncached_hub_model_is_refused_before_the_run(online, tmp_path):
    from engine.train.rl_checks import check_reward_model, check_rl

    rm = _rm_adapter(tmp_path / "rm", "someone/base-model")
    cfg = build_config({"model_name_or_path": "demo", "stage": "grpo", "template": "qwen", "reward_model": rm})
    online.setenv("HF_HUB_OFFLINE", "1")
    problems = [p for p in check_rl(cfg) if "reward_model" in p]  # was []: the run failed as the reward model loaded
    assert len(problems) == 1 and problems[0].code == "hub_offline", problems
    assert problems[0].startswith(f"`reward_model: {rm}` is a LoRA adapter of `someone/base-model`, a hub id that is "
                                  "not in the local cache, and downloads are off (HF_HUB_OFFLINE).")
    assert "`hf download someone/base-model --local-dir DIR`), copy DIR here and set `base_model_name_or_path` in " \
        "the adapter's adapter_config.json to DIR." in problems[0]
    online.delenv("HF_HUB_OFFLINE")
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    problems = [p for p in check_rl(cfg) if "reward_model" in p]
    assert len(problems) == 1 and "a hub id that is not in the local cache, and the hub (http://127.0.0.1:" in \
        problems[0] and "cannot be reached (ConnectionRefusedError" in problems[0], problems
    assert [p for p in check(cfg, "train") if p.code == "hub_offline"] == problems  # the board's and the CLI's check
    _cache("someone/base-model", {"hidden_size": 16})  # in the cache: its config says what the head must take
    assert [p for p in check_rl(cfg) if "reward_model" in p] == [
        f"`reward_model: {rm}`: its value head value_head.safetensors takes 8 inputs and the model's hidden size is "
        "16: the head was trained on another model. Give the rm run's output_dir as it saved it (with the model it "
        "was trained on)."]
    rm = _rm_adapter(tmp_path / "rm2", "someone/other-model")
    _cache("someone/other-model", {"hidden_size": 8})
    cfg = build_config({"model_name_or_path": "demo", "stage": "grpo", "template": "qwen", "reward_model": rm})
    assert [p for p in check_rl(cfg) if "reward_model" in p] == []
    online.setenv("HF_HUB_OFFLINE", "1")  # the demo (built here) and a local base are not asked about
    assert check_reward_model(_rm_adapter(tmp_path / "demo_rm", "demo"), cfg) == []
    (tmp_path / "base").mkdir()
    assert check_reward_model(_rm_adapter(tmp_path / "local_rm", str(tmp_path / "base")), cfg) == []


def test_a_ref_model_hub_id_not_in_the_cache_is_refused_offline(online, tmp_path):
    online.setenv("HF_HUB_OFFLINE", "1")
    cfg = build_config({"model_name_or_path": "demo", "stage": "dpo", "template": "qwen", "dataset": "demo_dpo",
                        "ref_model": "someone/ref-model", "output_dir": str(tmp_path / "out")})
    problems = [p for p in check(cfg, "train") if p.code == "hub_offline"]  # was []: it failed after the policy loaded
    assert len(problems) == 1 and problems[0].startswith(
        "`ref_model: someone/ref-model` is a hub id that is not in the local cache, and downloads are off"), problems
    assert "copy DIR here and set `ref_model` to it." in problems[0]
    _cache("someone/ref-model", {"hidden_size": 8})
    assert [p for p in check(cfg, "train") if p.code == "hub_offline"] == []
