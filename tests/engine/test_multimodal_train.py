"""Training tiny VLMs end to end through `lf-engine train`: media rows, masked soft tokens, falling loss."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import image_file, save_tiny_vlm, write_image_dataset  # noqa: E402

from engine.cli import main  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines() if x.strip()]


def _losses(folder: Path) -> list[float]:
    return [e["loss"] for e in _events(folder) if e["event"] == "log"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlms")
    return {family: save_tiny_vlm(family, root / family) for family in ("qwen2_vl", "gemma4", "qwen3_5", "glm4v", "llava_next",
                                                                           "qwen2_audio", "intern_vl", "mistral3",
                                                                           "pixtral", "llava_next_video",
                                                                           "video_llava", "ernie_vl",
                                                                           "minicpmv4_6")}


def _image_dataset(folder: Path) -> Path:
    return write_image_dataset(folder)


def _config(folder: Path, model: Path, template: str, dataset: str, dataset_dir: Path, **extra) -> Path:
    import yaml

    config = {"model_name_or_path": str(model), "template": template, "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "freeze_vision_tower": True,
              "freeze_multi_modal_projector": True, "dataset": dataset, "dataset_dir": str(dataset_dir),
              "cutoff_len": 1024, "image_max_pixels": 112 * 112, "output_dir": str(folder / "out"),
              "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "learning_rate": 0.01,
              "max_steps": 2, "logging_steps": 1, "save_strategy": "no", "plot_loss": False, "report_to": "none",
              **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_tiny_vlm_learns_from_images(models, tmp_path):
    """Full fine-tuning of the language model on two coloured images: the loss falls."""
    data = _image_dataset(tmp_path / "data")
    config = _config(tmp_path, models["qwen2_vl"], "qwen2_vl", "colors", data, finetuning_type="full",
                     learning_rate=0.003, max_steps=8, tokenized_path=str(tmp_path / "tok"))
    assert main(["train", str(config)]) == 0
    losses = _losses(tmp_path / "out")
    assert len(losses) == 8 and losses[-1] < losses[0] - 0.3
    # the fully fine-tuned folder carries the processor, so it loads on its own like the base model
    from engine.config import build_config
    from engine.multimodal.processor import load_media_processor

    assert (tmp_path / "out" / "processor_config.json").is_file()
    trained = build_config({"model_name_or_path": str(tmp_path / "out")}).model
    assert load_media_processor(trained).image_processor is not None
    # media were processed once and cached with the rows
    from datasets import load_from_disk

    cached = load_from_disk(str(tmp_path / "tok"))["train"]
    assert {"mm_inputs", "mm_token_type_ids"} <= set(cached.column_names)
    row = cached[0]
    assert sum(row["mm_token_type_ids"]) > 0
    image_positions = [i for i, t in enumerate(row["mm_token_type_ids"]) if t == 1]
    assert all(row["labels"][i] == -100 for i in image_positions)  # soft tokens never carry loss


@pytest.mark.parametrize(("family", "template"), [("qwen2_vl", "qwen2_vl"), ("gemma4", "gemma4"),
                                                  ("qwen3_5", "qwen3_5"), ("llava_next", "llava_next"),
                                                  ("intern_vl", "intern_vl"), ("mistral3", "mistral_small"),
                                                  ("mistral3", "ministral3"), ("pixtral", "pixtral"),
                                                  ("llava_next_video", "llava_next_video"),
                                                  ("video_llava", "video_llava"), ("ernie_vl", "ernie_vl"),
                                                  ("minicpmv4_6", "minicpm_v_4_6")])
@pytest.mark.skipif(not (SHARED / "mllm_demo.json").is_file(), reason="shared data absent")
def test_two_steps_on_mllm_demo(models, tmp_path, family, template):
    config = _config(tmp_path, models[family], template, "mllm_demo", SHARED)
    assert main(["train", str(config)]) == 0
    events = _events(tmp_path / "out")
    assert events[0]["event"] == "start" and events[0]["num_examples"] == 6
    assert len(_losses(tmp_path / "out")) == 2 and events[-1]["status"] == "completed"


@pytest.mark.skipif(not (SHARED / "mllm_audio_demo.json").is_file(), reason="shared data absent")
def test_qwen2_audio_trains_on_llamafactorys_audio_demo(models, tmp_path):
    config = _config(tmp_path, models["qwen2_audio"], "qwen2_audio", "mllm_audio_demo", SHARED)
    assert main(["train", str(config)]) == 0
    events = _events(tmp_path / "out")
    assert events[0]["num_examples"] == 3 and events[0]["data"]["train"]["media_tokens"] > 0
    assert len(_losses(tmp_path / "out")) == 2 and events[-1]["status"] == "completed"


def test_qwen3_5_trains_on_images_through_the_qwen3_vl_plugin(models, tmp_path):
    data = _image_dataset(tmp_path / "data")
    config = _config(tmp_path, models["qwen3_5"], "qwen3_5", "colors", data, max_steps=3)
    assert main(["train", str(config)]) == 0
    events = _events(tmp_path / "out")
    assert len(_losses(tmp_path / "out")) == 3 and events[-1]["status"] == "completed"
    assert events[0]["data"]["train"]["media_tokens"] > 0


def test_glm4v_trains_on_images(models, tmp_path):
    """GLM-4.1V: `<|begin_of_image|>` soft tokens `<|end_of_image|>`, the efficient-EOS reasoning template."""
    from datasets import load_from_disk

    data = _image_dataset(tmp_path / "data")
    config = _config(tmp_path, models["glm4v"], "glm4v", "colors", data, max_steps=2,
                     tokenized_path=str(tmp_path / "tok"))
    assert main(["train", str(config)]) == 0
    assert len(_losses(tmp_path / "out")) == 2 and _events(tmp_path / "out")[-1]["status"] == "completed"
    row = load_from_disk(str(tmp_path / "tok"))["train"][0]
    image = [i for i, kind in enumerate(row["mm_token_type_ids"]) if kind == 1]
    assert image and all(row["labels"][i] == -100 for i in image)
    assert row["input_ids"][-1] == row["labels"][-1]  # one trained EOS closes the sequence (efficient_eos)


def test_media_rows_train_packed(models, tmp_path):
    """LLaMA-Factory 0.9.5 packs media rows; so does this (tests/engine/test_multimodal_packing.py has the rest)."""
    data = _image_dataset(tmp_path / "data")
    config = _config(tmp_path, models["qwen2_vl"], "qwen2_vl", "colors", data, packing=True)
    assert main(["train", str(config)]) == 0
    events = _events(tmp_path / "out")
    assert events[-1]["status"] == "completed" and events[0]["data"]["train"]["packed_sequences"] == 1


def test_preflight_reports_every_media_problem_at_once(models, tmp_path, capsys):
    data = _image_dataset(tmp_path / "data")
    rows = json.loads((data / "colors.json").read_text())[:2]
    rows.append({"messages": [{"role": "user", "content": "<image><image>Two?"},
                              {"role": "assistant", "content": "One."}], "images": ["img/0.png"]})
    rows.append({"messages": [{"role": "user", "content": "<image>Where?"}, {"role": "assistant", "content": "Gone."}],
                 "images": ["img/missing.png"]})
    rows.append({"messages": [{"role": "user", "content": "<image>Web?"}, {"role": "assistant", "content": "No."}],
                 "images": ["https://example.com/a.png"]})
    (data / "bad.png").write_bytes(b"not an image")
    rows.append({"messages": [{"role": "user", "content": "<image>Bad?"}, {"role": "assistant", "content": "Bad."}],
                 "images": ["bad.png"]})
    rows.append({"messages": [{"role": "user", "content": "<audio>Hear?"}, {"role": "assistant", "content": "No."}],
                 "audios": ["img/0.png"]})
    (data / "colors.json").write_text(json.dumps(rows))
    info = json.loads((data / "dataset_info.json").read_text())
    info["colors"]["columns"]["audios"] = "audios"
    (data / "dataset_info.json").write_text(json.dumps(info))
    config = _config(tmp_path, models["qwen2_vl"], "qwen2_vl", "colors", data)
    assert main(["check", str(config)]) == 2
    err = capsys.readouterr().err
    assert "Dataset `colors` row 2: 2 <image> placeholders but 1 image file" in err
    assert "row 3: image file " in err and "missing.png is missing: fix the path" in err
    assert "row 4: image https://example.com/a.png is a remote URL" in err
    assert "row 5: image file " in err and "bad.png cannot be read" in err
    assert "row 6: has audio input, which this model cannot take (it takes images, videos)" in err


@pytest.mark.skipif(not (SHARED / "mllm_video_demo.json").is_file(), reason="shared data absent")
def test_video_dataset_passes_the_checks_without_torchvision(models, tmp_path, capsys):
    """Gemma 4 and the Qwen VL families take video through Pillow (engine.multimodal.video_pil)."""
    config = _config(tmp_path, models["gemma4"], "gemma4", "mllm_video_demo", SHARED)
    assert main(["check", str(config)]) == 0
    assert "torchvision" not in capsys.readouterr().err


def test_alpaca_rows_count_each_column_once(models, tmp_path, capsys):
    """An alpaca entry naming `prompt: instruction` (as LLaMA-Factory's demo entries do) had its instruction counted
    twice, once as the prompt and once as the messages column, so a row with one <image> and one image was refused;
    a placeholder in `input` (the default query column) is counted too."""
    data = tmp_path / "data"
    data.mkdir()
    image = image_file(data, "red.png", (56, 56))
    rows = [{"instruction": "<image>What colour?", "input": "", "output": "Red.", "images": [image]},
            {"instruction": "Describe it.", "input": "<image>", "output": "Red.", "images": [image]},
            {"instruction": "<image>And this?", "input": "<image>", "output": "Red.", "images": [image]}]
    (data / "rows.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json", "columns": {
        "prompt": "instruction", "query": "input", "response": "output", "images": "images"}}}))
    config = _config(tmp_path, models["qwen2_vl"], "qwen2_vl", "rows", data)
    assert main(["check", str(config)]) == 2
    err = capsys.readouterr().err
    assert "row 0" not in err and "row 1" not in err
    assert "Dataset `rows` row 2: 2 <image> placeholders but 1 image file" in err


def test_accumulated_micro_batches_each_count_as_their_mean(models, tmp_path):
    """With a multimodal model, LLaMA-Factory's trainers average each micro-batch's own mean loss over the
    accumulation steps (model_accepts_loss_kwargs off), not the tokens of all of them together: a step's logged
    loss is the mean of its micro-batches' losses."""
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText

    from engine.config import load_config
    from engine.data import get_dataset
    from engine.models.tokenizer_setup import load_text_components
    from engine.multimodal import media_context
    from engine.train.sft import _media_collator

    data = tmp_path / "data"
    (data / "img").mkdir(parents=True)
    rows = []
    for index, (color, reply) in enumerate([((220, 20, 20), "Red."),
                                            ((20, 20, 220), "It is a very deep and dark shade of blue, like the sea.")]):
        Image.new("RGB", (56, 56), color).save(data / "img" / f"{index}.png")
        rows.append({"messages": [{"role": "user", "content": "<image>What color is it?"},
                                  {"role": "assistant", "content": reply}], "images": [f"img/{index}.png"]})
    (data / "rows.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"rows": {
        "file_name": "rows.json", "formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    config = _config(tmp_path, models["qwen2_vl"], "qwen2_vl", "rows", data, per_device_train_batch_size=1,
                     gradient_accumulation_steps=2, max_steps=1, disable_shuffling=True, learning_rate=1e-6)
    assert main(["train", str(config)]) == 0
    logged = _losses(tmp_path / "out")[0]

    cfg = load_config(config)
    tokenizer, template = load_text_components(cfg)
    bundle = get_dataset(cfg, tokenizer, template, media=media_context(cfg, tokenizer))
    collate = _media_collator(tokenizer, bundle)
    model = AutoModelForImageTextToText.from_pretrained(models["qwen2_vl"]).eval()
    losses, counts = [], []
    for index in range(2):  # the untrained LoRA adds nothing: the base model's losses are the step's
        batch = collate([bundle.train[index]])
        with torch.no_grad():
            losses.append(model(**batch).loss.item())
        counts.append(int((batch["labels"][:, 1:] != -100).sum()))
    assert counts[0] != counts[1]  # so the two ways of averaging differ
    assert logged == pytest.approx(sum(losses) / 2, rel=1e-4)
    assert logged != pytest.approx(sum(loss * count for loss, count in zip(losses, counts)) / sum(counts), rel=1e-3)


def _paligemma(folder: Path):
    """(model folder, tokenizer, template, media context) of a tiny PaliGemma, and an image at folder/a.png."""
    from PIL import Image

    from engine.config import load_config
    from engine.models.loader import load_tokenizer
    from engine.multimodal import media_context
    from engine.templates import get_template

    model = save_tiny_vlm("paligemma", folder / "paligemma")
    cfg = load_config(None, {"model_name_or_path": str(model), "template": "paligemma"})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template("paligemma")
    template.fix_tokenizer(tokenizer)
    Image.new("RGB", (40, 30), (200, 10, 10)).save(folder / "a.png")
    return model, tokenizer, template, media_context(cfg, tokenizer)


@pytest.mark.skipif(not (SHARED / "mllm_demo.json").is_file(), reason="shared data absent")
def test_paligemma_rows_open_with_their_image_tokens_and_train(tmp_path):
    """PaliGemma's image tokens open each row (before BOS), outside the loss, with token types 0 (the text 1), as
    LLaMA-Factory builds them; the placeholders are removed from the text; mask_history puts the turns before them,
    as there; it trains on LLaMA-Factory's mllm_demo."""
    from engine.data.tokenize import IGNORE, TokenizeOptions
    from engine.multimodal.dataset import tokenize_media_sft

    model, tokenizer, template, ctx = _paligemma(tmp_path)
    example = {"messages": [{"role": "user", "content": "<image>What color?"}, {"role": "assistant", "content": "Red."}],
               "images": [str(tmp_path / "a.png")]}
    image = ctx.processor.image_token_id
    rows, _ = tokenize_media_sft([example], tokenizer, template, TokenizeOptions(cutoff_len=256), ctx)
    ids, labels = rows["input_ids"][0], rows["labels"][0]
    assert ids[:5] == [image] * 4 + [tokenizer.bos_token_id] and image not in ids[5:]
    assert labels[:5] == [IGNORE] * 5 and labels[-1] == tokenizer.eos_token_id
    assert ctx.plugin.type_ids(ctx.processor, ids) == [0] * 4 + [1] * (len(ids) - 4)
    reversed_rows, _ = tokenize_media_sft([example], tokenizer, template,
                                          TokenizeOptions(cutoff_len=256, mask_history=True), ctx)
    assert reversed_rows["input_ids"][0][-4:] == [image] * 4
    config = _config(tmp_path, model, "paligemma", "mllm_demo", SHARED)
    assert main(["train", str(config)]) == 0
    assert len(_losses(tmp_path / "out")) == 2


def test_paligemma_prediction_and_chat_prompts_open_with_the_image_tokens(tmp_path):
    from engine.multimodal.predict import media_prompt_row

    model, tokenizer, template, ctx = _paligemma(tmp_path)
    messages = [{"role": "user", "content": "<image>caption en"}]
    row = media_prompt_row({"images": [str(tmp_path / "a.png")]}, messages, tokenizer, template, ctx, 256)
    assert row["prompt_ids"][:5] == [ctx.processor.image_token_id] * 4 + [tokenizer.bos_token_id]
    assert main(["chat", str(_config(tmp_path, model, "paligemma", "mllm_demo", SHARED, max_new_tokens=3)),
                 "--query", "caption en", "--image", str(tmp_path / "a.png")]) == 0


def _tiny_lfm2_vl(folder: Path) -> Path:
    """A tiny LFM2-VL (a vision-language model no media plugin serves here) with its tokenizer."""
    from tinyvlms import _tokenizer
    from transformers import Lfm2VlConfig, Lfm2VlForConditionalGeneration

    tokenizer = _tokenizer(["<|pad|>", "<|im_start|>", "<|im_end|>", "<image>"], eos="<|im_end|>", pad="<|pad|>",
                           named={"image_token": "<image>"})
    config = Lfm2VlConfig(
        text_config={"model_type": "lfm2", "vocab_size": len(tokenizer) + 8, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "layer_types": ["conv", "full_attention"], "pad_token_id": tokenizer.pad_token_id,
                     "eos_token_id": tokenizer.eos_token_id},
        vision_config={"model_type": "siglip2_vision_model", "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "num_patches": 64, "patch_size": 16},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), projector_hidden_size=32)
    Lfm2VlForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.skipif(not (SHARED / "mllm_demo.json").is_file(), reason="shared data absent")
def test_a_vision_model_no_plugin_serves_trains_its_text_rows_and_refuses_media_rows(tmp_path):
    """LLaMA-Factory's vision templates without a plugin here (lfm2_vl, kimi_vl, ...) train their models on
    text rows; a row with media is refused with the reason (before, even text rows were refused), by the pre-flight
    check and by the data layer itself."""
    from engine.config import build_config
    from engine.data import get_dataset
    from engine.models.tokenizer_setup import load_text_components
    from engine.multimodal import UnservedMedia, media_context
    from engine.multimodal.checks import check_media
    from engine.multimodal.errors import MediaError

    model = _tiny_lfm2_vl(tmp_path / "model")
    text = _config(tmp_path, model, "lfm2_vl", "alpaca_en_demo", SHARED, max_samples=8, cutoff_len=128)
    assert main(["train", str(text)]) == 0
    assert _events(tmp_path / "out")[-1]["status"] == "completed"
    cfg = build_config({"model_name_or_path": str(model), "template": "lfm2_vl", "dataset": "mllm_demo",
                        "dataset_dir": str(SHARED)})
    assert any("has image input, which this model cannot take" in p for p in check_media(cfg))
    tokenizer, template = load_text_components(cfg)
    media = media_context(cfg, tokenizer)
    assert isinstance(media, UnservedMedia)
    with pytest.raises(MediaError, match="No media plugin serves model type `lfm2_vl`.*drop the rows' media"):
        get_dataset(cfg, tokenizer, template, media=media)
    # the board's dataset preview shows the rows, their images, and the reason instead of soft-token counts
    import yaml

    from app.preview_worker import run

    path = tmp_path / "preview.yaml"
    path.write_text(yaml.safe_dump({"model_name_or_path": str(model), "template": "lfm2_vl",
                                    "dataset": "mllm_demo", "dataset_dir": str(SHARED)}))
    shown = run(str(path), 2)["rows"][0]["media"]
    assert shown["images"] and shown["soft_tokens"] is None and "No media plugin serves" in shown["error"]


def test_images_embedded_in_the_rows_train_as_llamafactory_reads_them(models, tmp_path, capsys, monkeypatch):
    """Hub vision datasets keep their images in the rows (`datasets`' Image feature: {"bytes", "path"} in parquet,
    PIL images once decoded), and LLaMA-Factory reads them; they were refused here ("save the files"). A parquet
    file with an Image column, a hub dataset that `datasets` decodes to PIL images, and a data URL now check and
    train; a damaged embedded image is named by `check`. (The rows of such parquet files were compared with
    LLaMA-Factory 0.9.5's: identical.)"""
    import base64
    import io

    import datasets
    from PIL import Image

    def png(color) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (56, 56), color).save(buffer, format="PNG")
        return buffer.getvalue()

    def row(word, images):
        return {"messages": [{"role": "user", "content": "<image>What color is it?"},
                             {"role": "assistant", "content": f"It is {word}."}], "images": images}

    entry = {"formatting": "sharegpt", "columns": {"messages": "messages", "images": "images"},
             "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}
    data = tmp_path / "data"
    data.mkdir()
    features = datasets.Features({"messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
                                  "images": datasets.Sequence(datasets.Image())})
    rows = [row("red", [{"bytes": png((220, 20, 20)), "path": None}]),
            row("blue", [{"bytes": png((20, 20, 220)), "path": None}])]
    datasets.Dataset.from_list(rows * 2, features=features).to_parquet(str(data / "rows.parquet"))
    url = "data:image/png;base64," + base64.b64encode(png((20, 220, 20))).decode()
    (data / "urls.json").write_text(json.dumps([row("green", [url])] * 4))
    (data / "bad.json").write_text(json.dumps([row("red", ["data:image/png;base64," + base64.b64encode(
        b"not a png").decode()])]))
    (data / "dataset_info.json").write_text(json.dumps({
        "rows": {"file_name": "rows.parquet", **entry}, "urls": {"file_name": "urls.json", **entry},
        "bad": {"file_name": "bad.json", **entry}, "hub": {"hf_hub_url": "someone/colors", **entry}}))
    hub = datasets.Dataset.from_list(rows * 2, features=features)  # `datasets` gives decoded PIL images
    assert isinstance(hub[0]["images"][0], Image.Image)
    monkeypatch.setattr(datasets, "load_dataset", lambda path, **kwargs: hub)
    for name in ("rows", "urls", "hub", "bad"):
        (tmp_path / name).mkdir()
    for name in ("rows", "urls", "hub"):
        config = _config(tmp_path / name, models["qwen2_vl"], "qwen2_vl", name, data, max_steps=1)
        assert main(["check", str(config)]) == 0, capsys.readouterr().err
        assert main(["train", str(config)]) == 0
        assert all(math.isfinite(x) for x in _losses(tmp_path / name / "out"))
    capsys.readouterr()
    assert main(["check", str(_config(tmp_path / "bad", models["qwen2_vl"], "qwen2_vl", "bad", data))]) == 2
    assert "row 0: an image embedded in the row cannot be read" in capsys.readouterr().err
