"""Export: merge a LoRA adapter into a tiny model, save it sharded with its chat template, verify, refuse bad input."""

import json

import pytest
import torch
from tinymodels import build_tiny_model

from engine.config import ConfigError, build_config
from engine.runs import EventReader


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(base model folder, LoRA adapter folder, the base with the adapter merged in memory)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-export-base"))
    adapter_dir = tmp_path_factory.mktemp("tiny-export-adapter")
    torch.manual_seed(1)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir),
                                LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                           init_lora_weights=False))  # random B: the adapter changes the outputs
    peft_model.save_pretrained(adapter_dir)
    return base_dir, adapter_dir, peft_model.merge_and_unload().eval()


def export_cfg(tiny, target, **extra):
    base_dir, adapter_dir, _ = tiny
    return build_config({"model_name_or_path": str(base_dir), "adapter_name_or_path": str(adapter_dir),
                         "template": "chatml", "export_dir": str(target), **extra})


CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi!"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "你好"},
]


def test_export_merges_lora_into_a_standalone_model(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.export import run_export
    from engine.infer.generation import template_for

    base_dir, _, merged = tiny
    export_dir, run_dir = tmp_path / "exported", tmp_path / "run"
    cfg = export_cfg(tiny, export_dir)
    result = run_export(cfg, run_dir=str(run_dir))

    assert result["verified"] is True and result["export_dir"] == str(export_dir)
    files = set(result["files"])
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "export_config.yaml",
            "export_info.json"} <= files
    assert "adapter_config.json" not in files and "adapter_model.safetensors" not in files
    assert files == {p.name for p in export_dir.iterdir()}
    assert result["size_bytes"] == sum(p.stat().st_size for p in export_dir.iterdir())
    assert "export_dir:" in (export_dir / "export_config.yaml").read_text(encoding="utf-8")
    info = json.loads((export_dir / "export_info.json").read_text(encoding="utf-8"))
    assert info["versions"]["transformers"] and info["dtype"] == "float32"

    # Plain transformers loads the folder and reproduces the merged model exactly.
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    exported = AutoModelForCausalLM.from_pretrained(export_dir).eval()
    ids = torch.tensor([tokenizer.encode("Hello, how are you?")])
    with torch.inference_mode():
        got, expected = exported(input_ids=ids).logits, merged(input_ids=ids).logits
        base_logits = AutoModelForCausalLM.from_pretrained(base_dir)(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, base_logits, atol=1e-3)  # the adapter really was merged

    # The tokenizer's chat template reproduces the training format, and generation stops at the stop word.
    template = template_for(cfg, AutoTokenizer.from_pretrained(base_dir))
    for add_prompt in (True, False):
        rendered = tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=add_prompt)
        assert rendered == template.render(CONVERSATION, add_generation_prompt=add_prompt, tokenizer=tokenizer)
    assert result["chat_template_matches"] is True
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    eos = exported.generation_config.eos_token_id
    assert im_end in (eos if isinstance(eos, list) else [eos])

    events = EventReader(run_dir / "events.jsonl").read_new()
    assert [e["stage"] for e in events] == ["load", "merge", "save", "tokenizer", "verify", "done"]
    assert [e["fraction"] for e in events] == sorted(e["fraction"] for e in events) and events[-1]["fraction"] == 1.0
    assert events[-1]["verified"] is True and events[-1]["files"] == result["files"]


def test_shards_respect_export_size_and_dtype(tiny, tmp_path, monkeypatch):
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    import engine.export
    from engine.export import run_export

    limit = 12_000  # bytes per "GB" for this test: the bfloat16 model (~88 KB) needs several shards
    monkeypatch.setattr(engine.export, "BYTES_PER_GB", limit)
    export_dir = tmp_path / "sharded"
    result = run_export(export_cfg(tiny, export_dir, export_size=1, infer_dtype="bfloat16"))
    shards = sorted(export_dir.glob("model-*.safetensors"))
    assert len(shards) > 2 and "model.safetensors.index.json" in result["files"]
    index = json.loads((export_dir / "model.safetensors.index.json").read_text(encoding="utf-8"))
    assert {p.name for p in shards} == set(index["weight_map"].values())
    for shard in shards:
        with safe_open(str(shard), "pt") as fh:
            tensors = [fh.get_tensor(name) for name in fh.keys()]
        assert all(t.dtype == torch.bfloat16 for t in tensors)
        sizes = [t.numel() * t.element_size() for t in tensors]
        assert sum(sizes) <= limit or len(tensors) == 1  # a single tensor larger than the limit gets its own shard
    exported = AutoModelForCausalLM.from_pretrained(export_dir)
    assert exported.dtype == torch.bfloat16
    with torch.inference_mode():
        ids = torch.tensor([[5, 6, 7, 8]])
        expected = tiny[2](input_ids=ids).logits
        # Merged in bfloat16 rather than float32: equal up to bfloat16 rounding.
        torch.testing.assert_close(exported(input_ids=ids).logits.float(), expected, rtol=0.05, atol=0.01)


def test_export_replaces_an_earlier_export_but_nothing_else(tiny, tmp_path):
    from engine.export import run_export

    export_dir = tmp_path / "again"
    run_export(export_cfg(tiny, export_dir))
    first = set(p.name for p in export_dir.iterdir())
    run_export(export_cfg(tiny, export_dir))  # an earlier export is replaced
    assert set(p.name for p in export_dir.iterdir()) == first
    (export_dir / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="notes.txt"):
        run_export(export_cfg(tiny, export_dir))
    assert (export_dir / "notes.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"export_dir": None}, "`export_dir` is not set"),
        ({"adapter_name_or_path": "/no/such/adapter"}, "/no/such/adapter` does not exist"),
        ({"export_quantization_bit": 4}, "`export_quantization_bit: 4` is not supported"),
        ({"export_legacy_format": True}, "safetensors only"),
    ],
)
def test_clear_errors(tiny, tmp_path, extra, message):
    from engine.export import run_export

    with pytest.raises(ConfigError, match=message):
        run_export(export_cfg(tiny, tmp_path / "out", **extra))
    assert not (tmp_path / "out").exists()


def test_refuses_a_non_empty_folder_and_a_non_adapter_folder(tiny, tmp_path):
    from engine.export import run_export

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "data.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not empty .*data.csv"):
        run_export(export_cfg(tiny, busy))
    with pytest.raises(ConfigError, match="no adapter_config.json"):
        run_export(export_cfg(tiny, tmp_path / "out", adapter_name_or_path=str(busy)))
    with pytest.raises(ConfigError, match="is also the model or adapter"):
        run_export(export_cfg(tiny, tiny[1]))


def test_cli_export_prints_size_and_reload_check_and_writes_shared_weights(tiny, tmp_path, capsys):
    from engine.cli import main
    from engine.fileperms import default_file_mode

    base_dir, adapter_dir, _ = tiny
    config = tmp_path / "export.yaml"
    config.write_text(f"model_name_or_path: {base_dir}\nadapter_name_or_path: {adapter_dir}\ntemplate: chatml\n"
                      f"export_dir: {tmp_path / 'out'}\n", encoding="utf-8")
    assert main(["export", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"Exported to {tmp_path / 'out'}: ") and " KB in " in out[0] and "files" in out[0]
    assert out[1].startswith("Reload check: passed (max logit difference ") and "chat template matches: yes" in out[1]
    weights = list((tmp_path / "out").glob("*.safetensors"))
    assert weights and all(p.stat().st_mode & 0o777 == default_file_mode() for p in weights)


def test_links_planted_in_the_export_folder_after_its_check_are_replaced_not_written_through(tiny, tmp_path,
                                                                                             monkeypatch):
    """A link placed in the export folder between the "folder must be empty" check and the writes (a second user
    of a shared workspace) had the Modelfile, export_config.yaml and the weights written through it, into a file
    anywhere the user can write; each is now written in a private staging folder and renamed over the link."""
    import engine.export as export

    export_dir, outside = tmp_path / "exported", tmp_path / "elsewhere"
    outside.mkdir()
    names = ["Modelfile", "export_config.yaml", "model.safetensors", "config.json", "tokenizer.json"]
    for name in names:
        (outside / name).write_text(f"victim {name}", encoding="utf-8")
    clear = export._clear_previous

    def clear_then_plant(folder):
        clear(folder)
        for name in names:
            (folder / name).symlink_to(outside / name)

    monkeypatch.setattr(export, "_clear_previous", clear_then_plant)
    result = export.run_export(export_cfg(tiny, export_dir))
    assert result["verified"] is True
    for name in names:
        assert (outside / name).read_text(encoding="utf-8") == f"victim {name}"
        assert (export_dir / name).is_file() and not (export_dir / name).is_symlink()
    assert "Modelfile" in result["files"]
    assert not [p.name for p in export_dir.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_a_staging_folder_left_by_a_killed_export_is_no_content_and_is_removed(tiny, tmp_path):
    from engine.export import run_export
    from engine.export_checks import STAGING_PREFIX

    export_dir = tmp_path / "exported"
    run_export(export_cfg(tiny, export_dir))
    left = export_dir / f"{STAGING_PREFIX}abc"
    left.mkdir()
    (left / "model.safetensors").write_bytes(b"half")
    run_export(export_cfg(tiny, export_dir))
    assert not left.exists()
