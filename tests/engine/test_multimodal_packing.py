"""Packing rows with media (`packing` / `neat_packing`, as LLaMA-Factory 0.9.5 accepts them for multimodal data).

The gold test: a packed sequence gives each of its rows exactly the logits the row gets alone, for every family
with media (3D rotary positions, two-way image attention under a sliding window, plain positions). The packed
columns are the unpacked rows (whose tokens tests/engine/test_multimodal_plugins.py checks against the processors)
joined in LLaMA-Factory's knapsack order, with their media in the same order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm, save_tiny_vlm, write_image_dataset  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.data.tokenize import TokenizeOptions, pack_order  # noqa: E402
from engine.multimodal.collator import MediaCollator  # noqa: E402
from engine.multimodal.dataset import MediaContext, tokenize_media_sft  # noqa: E402
from engine.multimodal.packed_model import attach  # noqa: E402
from engine.multimodal.plugins import plugin_for, unpack_arrays  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402
from engine.templates import get_template  # noqa: E402

TEMPLATES = {"qwen2_vl": "qwen2_vl", "qwen2_5_vl": "qwen2_vl", "qwen3_vl": "qwen3_vl", "glm4v": "glm4v",
             "gemma3": "gemma3", "gemma4": "gemma4", "llava": "llava", "ernie_vl": "ernie_vl"}
LONG = " ".join(["They are playing soccer on the field."] * 12)  # past Gemma's 64-token sliding window


def _image(color: str, size: tuple[int, int] = (56, 84)):
    from PIL import Image

    return Image.new("RGB", size, color)


def _examples(video: str | None = None) -> list[dict]:
    def row(prompt: str, answer: str, images: list, videos: tuple = ()) -> dict:
        return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                "system": "", "tools": "", "images": images, "videos": list(videos)}

    rows = [row("<image>What is in the picture?", "A red square. " + LONG, [_image("red")]),
            row("Hello, who are they?", "They are playing.", []),
            row("<image><image>Describe both", "Soccer on the field.", [_image("blue", (84, 56)), _image("green")])]
    if video:  # a video between image rows, and one beside an image in the same row
        rows[1:1] = [row("<video>What happens?", "It gets brighter.", [], [video]),
                     row("<image><video>And here?", "A square, then light.", [_image("red")], [video])]
    return rows


def _tokenized(family: str, processor, packing: bool, batches=None, cutoff_len: int = 4096, video=None):
    model_type = {"qwen2_5_vl": "qwen2_5_vl", "gemma4": "gemma4", "ernie_vl": "ernie4_5_vl_moe"}.get(family, family)
    plugin = plugin_for(model_type, TEMPLATES[family])
    context = MediaContext(plugin, processor, MediaOptions())
    opts = TokenizeOptions(cutoff_len=cutoff_len, packing=packing, mask_packed_starts=False)
    columns, stats = tokenize_media_sft(_examples(video), processor.tokenizer, get_template(TEMPLATES[family]), opts,
                                        context, batches)
    return [dict(zip(columns, values)) for values in zip(*columns.values())], stats, plugin


def _rows_of(packed: dict) -> list[tuple[int, int]]:
    starts = [i for i, position in enumerate(packed["position_ids"]) if position == 0] + [len(packed["input_ids"])]
    return list(zip(starts, starts[1:]))


def _logits_alone_and_packed(family: str, hooked: bool = True, bidirectional: bool = False, video=None):
    model, processor = build_tiny_vlm(family)
    if bidirectional:  # larger Gemma 4 models attend both ways within an image
        model.config.get_text_config().use_bidirectional_attention = "vision"
    rows, _, plugin = _tokenized(family, processor, packing=False, video=video)
    packs, stats, _ = _tokenized(family, processor, packing=True, video=video)
    assert stats["packed_sequences"] == len(packs) == 1 and len(_rows_of(packs[0])) == len(rows)
    collate = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=plugin.type_ids_key,
                            extra_types=plugin.extra_type_ids(processor))  # ERNIE-4.5-VL's MoE routing types
    if hooked:
        attach(model)
    alone = {}
    with torch.no_grad():
        for row in rows:
            alone[tuple(row["input_ids"])] = model(**collate([row])).logits[0, :len(row["input_ids"])]
        # the packed sequence beside a one-row sequence in the same batch (padding in its own block)
        single = {**rows[1], "position_ids": list(range(len(rows[1]["input_ids"])))}
        logits = model(**collate([packs[0], single])).logits
    pairs = [(logits[0, start:end], alone[tuple(packs[0]["input_ids"][start:end])])
             for start, end in _rows_of(packs[0])]
    pairs.append((logits[1, :len(single["input_ids"])], alone[tuple(single["input_ids"])]))
    return pairs


@pytest.mark.parametrize("family", list(TEMPLATES))
def test_each_packed_row_gets_the_logits_it_gets_alone(family):
    for packed, alone in _logits_alone_and_packed(family):
        torch.testing.assert_close(packed, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma4"])
def test_packed_rows_with_video_get_the_logits_they_get_alone(family, tmp_path):
    """Video grids (Qwen2.5-VL's seconds per temporal patch, Qwen3-VL's timestamped frames) consumed row by row."""
    from test_multimodal_plugins import _write_video

    video = _write_video(tmp_path / "clip.mp4", seconds=2.0)
    for packed, alone in _logits_alone_and_packed(family, video=video):
        torch.testing.assert_close(packed, alone, rtol=1e-4, atol=1e-5)


def test_gemma4_two_way_image_attention_stays_within_each_packed_row():
    for packed, alone in _logits_alone_and_packed("gemma4", bidirectional=True):
        torch.testing.assert_close(packed, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("family", "bidirectional"), [("qwen2_vl", False), ("gemma3", False), ("gemma4", True),
                                                    ("ernie_vl", False)])
def test_without_the_model_hook_packed_rows_would_differ(family, bidirectional):
    """What engine.multimodal.packed_model fixes: 2D positions for 3D rotary models, and transformers' sliding-window
    two-way image mask on packed positions."""
    pairs = _logits_alone_and_packed(family, hooked=False, bidirectional=bidirectional)
    assert max(float((packed - alone).abs().max()) for packed, alone in pairs) > 1e-3


def test_packed_columns_are_the_rows_in_knapsack_order_with_their_media():
    _, processor = build_tiny_vlm("qwen2_vl")
    rows, _, _ = _tokenized("qwen2_vl", processor, packing=False)
    lengths = [len(row["input_ids"]) for row in rows]
    packs, stats, _ = _tokenized("qwen2_vl", processor, packing=True, cutoff_len=max(lengths) + 5)
    order = pack_order(lengths, max(lengths) + 5)
    assert [len(pack) for pack in order] == [1, 2] and stats["packed_sequences"] == 2
    for pack, indices in zip(packs, order):
        for key in ("input_ids", "labels", "mm_token_type_ids"):
            assert pack[key] == [value for index in indices for value in rows[index][key]]  # first labels kept
        assert pack["position_ids"] == [p for index in indices for p in range(lengths[index])]
        media = [unpack_arrays(rows[index]["mm_inputs"]) for index in indices]
        joined = unpack_arrays(pack["mm_inputs"])
        for key in ("pixel_values", "image_grid_thw"):
            expected = [row[key] for row in media if key in row]
            assert (joined[key] == numpy.concatenate(expected)).all()


def test_rows_are_packed_only_within_llamafactorys_preprocessing_batches():
    _, processor = build_tiny_vlm("llava")
    packs, _, _ = _tokenized("llava", processor, packing=True, batches=[(0, 2), (2, 3)])
    assert [len(_rows_of(pack)) for pack in packs] == [2, 1]
    assert len(_tokenized("llava", processor, packing=True)[0]) == 1


def _image_dataset(folder: Path) -> Path:
    return write_image_dataset(folder, with_text_row=True)


def _config(folder: Path, model: Path, template: str, data: Path, **extra) -> Path:
    import yaml

    config = {"model_name_or_path": str(model), "template": template, "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "colors", "dataset_dir": str(data),
              "cutoff_len": 256, "image_max_pixels": 112 * 112, "output_dir": str(folder / "out"),
              "per_device_train_batch_size": 2, "learning_rate": 0.01, "max_steps": 2, "logging_steps": 1,
              "save_strategy": "no", "plot_loss": False, "report_to": "none", **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("key", ["packing", "neat_packing"])
def test_lf_engine_trains_a_vlm_on_packed_media_rows(tmp_path, key):
    from datasets import load_from_disk

    model = save_tiny_vlm("qwen2_vl", tmp_path / "model")
    config = _config(tmp_path, model, "qwen2_vl", _image_dataset(tmp_path / "data"),
                     tokenized_path=str(tmp_path / "tok"), **{key: True})
    assert main(["train", str(config)]) == 0
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines() if x.strip()]
    assert events[-1]["status"] == "completed"
    losses = [e["loss"] for e in events if e["event"] == "log"]
    assert len(losses) == 2 and all(loss == loss and loss > 0 for loss in losses)
    stats = events[0]["data"]["train"]
    assert stats["rows"] == 12 and 1 < stats["packed_sequences"] < 12 and stats["media_tokens"] > 0
    packs = load_from_disk(str(tmp_path / "tok"))["train"]
    assert all(len(pack["input_ids"]) <= 255 for pack in packs)  # LLaMA-Factory packs to cutoff_len - 1
    assert sum(pack["position_ids"].count(0) for pack in packs) == 12
    grids = [unpack_arrays(pack["mm_inputs"]).get("image_grid_thw") for pack in packs]
    assert sum(len(grid) for grid in grids if grid is not None) == 8


def test_packing_is_refused_for_a_model_whose_layers_carry_state_across_rows(tmp_path, capsys):
    model = save_tiny_vlm("qwen3_5", tmp_path / "model")
    config = _config(tmp_path, model, "qwen3_5", _image_dataset(tmp_path / "data"), packing=True)
    assert main(["train", str(config)]) == 2
    err = capsys.readouterr().err
    assert "`packing` cannot keep packed rows apart in this model (qwen3_5_text)" in err
    assert "linear_attention" in err and "`packing: false`" in err
    assert not (tmp_path / "out" / "events.jsonl").exists()


def test_text_packing_is_refused_before_the_run_for_a_hybrid_model(tmp_path, capsys):
    """The text path too: `lf-engine check` reads config.json, nothing is loaded."""
    import yaml

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_next",
                                                   "layer_types": ["linear_attention", "full_attention"]}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model_name_or_path": str(model), "stage": "sft", "do_train": True,
                                      "dataset": "alpaca_en_demo", "packing": True,
                                      "output_dir": str(tmp_path / "out")}))
    assert main(["check", str(config)]) != 0
    assert "`packing` cannot keep packed rows apart in this model (qwen3_next)" in capsys.readouterr().err


@pytest.mark.parametrize("hooked", [True, False])
def test_packed_text_rows_through_a_qwen_vl_model_stay_apart(hooked):
    """Text-only packed rows on a 3D-rotary model: without the hook the model builds no per-row mask at all."""
    from engine.data.collator import PaddingCollator

    model, processor = build_tiny_vlm("qwen2_vl")
    tokenizer = processor.tokenizer
    rows = [tokenizer("They are playing soccer on the field.")["input_ids"], tokenizer("A red square.")["input_ids"]]
    if hooked:
        attach(model)
    collate = PaddingCollator(tokenizer=tokenizer)
    packed = {"input_ids": rows[0] + rows[1], "labels": rows[0] + rows[1],
              "position_ids": list(range(len(rows[0]))) + list(range(len(rows[1])))}
    with torch.no_grad():
        logits = model(**collate([packed])).logits[0]
        second = model(**collate([{"input_ids": rows[1], "labels": rows[1]}])).logits[0, :len(rows[1])]
    gap = float((logits[len(rows[0]):len(rows[0]) + len(rows[1])] - second).abs().max())
    assert (gap < 1e-5) if hooked else (gap > 1e-3)


SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


@pytest.mark.skipif(not (SHARED / "mllm_demo_data" / "3.flac").is_file(), reason="shared data absent")
def test_packed_audio_rows_get_the_logits_they_get_alone():
    """Gemma 4 audio: clips of different lengths zero-padded into one pack, each row still its own."""
    model, processor = build_tiny_vlm("gemma4n")
    plugin = plugin_for(model.config.model_type, "gemma4n")
    context = MediaContext(plugin, processor, MediaOptions())
    audio = SHARED / "mllm_demo_data"

    def row(prompt: str, answer: str, clips: list[str]) -> dict:
        return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                "system": "", "tools": "", "images": [], "videos": [], "audios": [str(audio / c) for c in clips]}

    examples = [row("<audio>What is it?", "A sound.", ["1.mp3"]), row("Hi?", "Hello.", []),
                row("<audio><audio>Both?", "Two sounds.", ["2.wav", "3.flac"])]
    template = get_template("gemma4n")

    def tokenized(packing: bool) -> list[dict]:
        opts = TokenizeOptions(cutoff_len=8192, packing=packing, mask_packed_starts=False)
        columns, _ = tokenize_media_sft(examples, processor.tokenizer, template, opts, context)
        return [dict(zip(columns, values)) for values in zip(*columns.values())]

    rows, packs = tokenized(False), tokenized(True)
    assert len(packs) == 1
    collate = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=plugin.type_ids_key)
    attach(model)
    with torch.no_grad():
        alone = {tuple(r["input_ids"]): model(**collate([r])).logits[0, :len(r["input_ids"])] for r in rows}
        logits = model(**collate(packs)).logits[0]
    for start, end in _rows_of(packs[0]):
        torch.testing.assert_close(logits[start:end], alone[tuple(packs[0]["input_ids"][start:end])],
                                   rtol=1e-4, atol=1e-5)


def _write(path: Path, config: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(config))
    return path


def test_chat_and_export_of_a_packing_config_are_not_refused_for_a_hybrid_model(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_next", "full_attention_interval": 4}))
    config = _write(tmp_path / "c.yaml", {"model_name_or_path": str(model), "stage": "sft", "do_train": True,
                                          "dataset": "alpaca_en_demo", "packing": True,
                                          "output_dir": str(tmp_path / "out")})
    main(["check", "--for", "chat", str(config)])
    main(["check", "--for", "export", str(config)])
    assert "cannot keep packed rows apart" not in capsys.readouterr().err
    main(["check", "--for", "eval", str(config), "do_train=false", "do_predict=true", "predict_with_generate=true"])
    assert "cannot keep packed rows apart" not in capsys.readouterr().err  # prediction generates, unpacked
    main(["check", str(config)])
    assert "cannot keep packed rows apart" in capsys.readouterr().err


def test_packed_rows_saved_in_tokenized_path_count_as_packing_whatever_the_config_says_now(tmp_path, capsys, caplog):
    """Rows packed into tokenized_path stay packed when a later config says `packing: false`: the model hook goes
    on, and a model that cannot keep them apart is refused."""
    data = _image_dataset(tmp_path / "data")
    saved = str(tmp_path / "tok")
    qwen3_vl = save_tiny_vlm("qwen3_vl", tmp_path / "qwen3_vl")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    first = _config(tmp_path / "a", qwen3_vl, "qwen3_vl", data, tokenized_path=saved, packing=True)
    assert main(["data", str(first)]) == 0
    qwen3_5 = save_tiny_vlm("qwen3_5", tmp_path / "qwen3_5")
    second = _config(tmp_path / "b", qwen3_5, "qwen3_5", data, tokenized_path=saved, packing=False)
    assert main(["train", str(second)]) == 2
    err = capsys.readouterr().err
    assert "`packing` cannot keep packed rows apart in this model (qwen3_5_text)" in err and "Traceback" not in err
    (tmp_path / "c").mkdir()
    third = _config(tmp_path / "c", qwen3_vl, "qwen3_vl", data, tokenized_path=saved, packing=False)
    with caplog.at_level("WARNING"):
        assert main(["train", str(third)]) == 0
    assert "holds packed rows: they train packed" in caplog.text
