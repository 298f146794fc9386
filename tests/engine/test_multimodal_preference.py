"""DPO and KTO with images on a tiny Qwen2-VL: exact placeholder expansion, soft tokens out of the loss, loss falls."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import save_tiny_vlm  # noqa: E402

from engine.cli import main  # noqa: E402

COLORS = [((220, 20, 20), "red"), ((20, 20, 220), "blue"), ((20, 200, 20), "green")]


@pytest.fixture(scope="module")
def qwen2_vl(tmp_path_factory):
    return save_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl")


def _images(folder: Path) -> None:
    from PIL import Image

    (folder / "img").mkdir(parents=True, exist_ok=True)
    for index, (color, _) in enumerate(COLORS):
        Image.new("RGB", (56, 56), color).save(folder / "img" / f"{index}.png")


def _pairwise(folder: Path) -> Path:
    _images(folder)
    rows = []
    for index, (_, word) in enumerate(COLORS):
        rows.append({"conversations": [{"from": "human", "value": "<image>What color is it?"}],
                     "chosen": {"from": "gpt", "value": f"It is {word}."},
                     "rejected": {"from": "gpt", "value": "No idea, sorry."},
                     "images": [f"img/{index}.png"]})
    (folder / "pairs.json").write_text(json.dumps(rows * 2))
    kto = []
    for index, (_, word) in enumerate(COLORS):
        for answer, tag in ((f"It is {word}.", True), ("No idea, sorry.", False)):
            kto.append({"messages": [{"role": "user", "content": "<image>What color is it?"},
                                     {"role": "assistant", "content": answer}],
                        "label": tag, "images": [f"img/{index}.png"]})
    (folder / "kto.json").write_text(json.dumps(kto))
    info = {
        "pairs": {"file_name": "pairs.json", "formatting": "sharegpt", "ranking": True,
                  "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected",
                              "images": "images"}},
        "colors_kto": {"file_name": "kto.json", "formatting": "sharegpt",
                       "columns": {"messages": "messages", "kto_tag": "label", "images": "images"},
                       "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                "assistant_tag": "assistant"}},
    }
    (folder / "dataset_info.json").write_text(json.dumps(info))
    return folder


def _config(folder: Path, model: Path, data: Path, **extra) -> Path:
    import yaml

    config = {"model_name_or_path": str(model), "template": "qwen2_vl", "stage": "dpo", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "lora_rank": 8, "dataset": "pairs",
              "dataset_dir": str(data), "cutoff_len": 512, "image_max_pixels": 56 * 56,
              "output_dir": str(folder / "out"), "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
              "learning_rate": 0.02, "max_steps": 6, "logging_steps": 1, "save_strategy": "no", "plot_loss": False,
              "report_to": "none", "pref_beta": 0.5, **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _losses(folder: Path) -> list[float]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e["loss"] for e in map(json.loads, filter(None, lines)) if e["event"] == "log"]


def _context(model: Path):
    from engine.config import load_config
    from engine.models.loader import load_tokenizer
    from engine.multimodal import media_context
    from engine.templates import get_template

    cfg = load_config(None, {"model_name_or_path": str(model), "template": "qwen2_vl", "image_max_pixels": 56 * 56})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template("qwen2_vl")
    template.fix_tokenizer(tokenizer)
    return tokenizer, template, media_context(cfg, tokenizer)


def test_dpo_rows_expand_placeholders_exactly_and_batch_media_per_half(qwen2_vl, tmp_path):
    import numpy as np
    from PIL import Image

    from engine.data.tokenize import TokenizeOptions
    from engine.multimodal.plugins import unpack_arrays
    from engine.multimodal.preference import build_preference_collator, tokenize_media_preference

    tokenizer, template, ctx = _context(qwen2_vl)
    _images(tmp_path)
    image = str(tmp_path / "img" / "0.png")
    example = {"messages": [{"role": "user", "content": "<image>What color is it?"}],
               "chosen": {"role": "assistant", "content": "It is red."},
               "rejected": {"role": "assistant", "content": "It is blue."}, "images": [image]}
    columns, stats = tokenize_media_preference([example, example], tokenizer, template, TokenizeOptions(512), ctx,
                                               "dpo")
    assert stats["kept"] == 2
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    # the processor's own count: grid t*h*w / merge^2 soft tokens
    processed = ctx.processor.image_processor([Image.open(image).convert("RGB")], return_tensors="np")
    expected = int(np.prod(processed["image_grid_thw"][0])) // ctx.processor.image_processor.merge_size ** 2
    prompt_text = tokenizer.decode(columns["prompt_ids"][0], skip_special_tokens=False)
    assert prompt_text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                           "<|vision_start|>" + "<|image_pad|>" * expected + "<|vision_end|>What color is it?"
                           "<|im_end|>\n<|im_start|>assistant\n")
    assert columns["prompt_ids"][0].count(pad) == expected
    assert tokenizer.decode(columns["chosen_ids"][0], skip_special_tokens=False) == "It is red.<|im_end|>\n"
    assert "pixel_values" in unpack_arrays(columns["mm_inputs"][0])

    class _Trainer:
        from trl.trainer.dpo_trainer import DataCollatorForPreference

        data_collator = DataCollatorForPreference(pad_token_id=tokenizer.pad_token_id)

    class _Bundle:
        media = ctx

    collate = build_preference_collator(_Trainer(), _Bundle(), "dpo")
    rows = [{k: columns[k][i] for k in columns} for i in range(2)]
    batch = collate(rows)
    assert batch["input_ids"].shape[0] == 4  # chosen rows, then rejected rows
    assert int((batch["input_ids"] == pad).sum()) == 4 * expected
    assert batch["image_grid_thw"].shape[0] == 4  # the images again for the rejected half
    assert batch["pixel_values"].shape[0] == 4 * int(np.prod(processed["image_grid_thw"][0]))
    soft = batch["input_ids"] == pad
    assert not batch["completion_mask"][soft].any()  # soft tokens never carry loss
    assert (batch["mm_token_type_ids"] == soft.long()).all()

    # KTO: one row per example and its KL counterpart (the prompt with another row's completion), same images
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference

    _Trainer.data_collator = DataCollatorForUnpairedPreference(pad_token_id=tokenizer.pad_token_id)
    collate = build_preference_collator(_Trainer(), _Bundle(), "kto")
    rows = [{"prompt_ids": columns["prompt_ids"][i], "completion_ids": columns["chosen_ids"][i],
             "KL_completion_ids": columns["rejected_ids"][i], "label": True, "mm_inputs": columns["mm_inputs"][i]}
            for i in range(2)]
    batch = collate(rows)
    assert batch["input_ids"].shape[0] == 2 and batch["image_grid_thw"].shape[0] == 2
    for prefix in ("", "KL_"):
        soft = batch[prefix + "input_ids"] == pad
        assert int(soft.sum()) == 2 * expected and not batch[prefix + "completion_mask"][soft].any()
        assert (batch[prefix + "mm_token_type_ids"] == soft.long()).all()


def test_a_kto_pair_keeps_its_images_where_llama_factorys_cut_would_split_them(qwen2_vl, tmp_path):
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference

    from engine.data.kto_pairs import kl_inputs
    from engine.data.tokenize import TokenizeOptions
    from engine.multimodal.preference import build_preference_collator, tokenize_media_preference
    from engine.train.preference import KLPairCollator

    tokenizer, template, ctx = _context(qwen2_vl)
    _images(tmp_path)
    pictured = {"messages": [{"role": "user", "content": "<image>What color is it?"},
                             {"role": "assistant", "content": "Red."}], "kto_tag": True,
                "images": [str(tmp_path / "img" / "0.png")]}
    wordy = {"messages": [{"role": "user", "content": "Hi"},
                          {"role": "assistant", "content": " ".join(["word"] * 200)}], "kto_tag": False}
    opts = TokenizeOptions(cutoff_len=50)
    columns, stats = tokenize_media_preference([pictured, wordy], tokenizer, template, opts, ctx, "kto")
    assert stats["kept"] == 2 and columns["completion_rest_ids"][1]  # the wordy reply was cut for its own pair
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    soft = columns["prompt_ids"][0].count(pad)
    assert soft and columns["prompt_floor"][0] > len(columns["prompt_ids"][0]) - 8 and columns["prompt_floor"][1] == 0
    # infer_seqlen would keep only the first few prompt tokens of (pictured prompt, wordy reply): the images stay
    prompts, completions = kl_inputs(columns, [1, 0], opts)
    assert prompts[0][:columns["prompt_floor"][0]].count(pad) == soft
    assert len(prompts[0]) + len(completions[0]) == 50 and completions[0] == (
        columns["completion_ids"][1] + columns["completion_rest_ids"][1])[:len(completions[0])]

    class _Trainer:
        data_collator = KLPairCollator(DataCollatorForUnpairedPreference(pad_token_id=tokenizer.pad_token_id,
                                                                         max_length=50))

    class _Bundle:
        media = ctx

    rows = [{"prompt_ids": columns["prompt_ids"][i], "completion_ids": columns["completion_ids"][i],
             "label": columns["label"][i], "mm_inputs": columns["mm_inputs"][i], "KL_prompt_ids": prompts[i],
             "KL_completion_ids": completions[i]} for i in range(2)]
    batch = build_preference_collator(_Trainer(), _Bundle(), "kto")(rows)
    for prefix in ("", "KL_"):
        assert int((batch[prefix + "input_ids"][0] == pad).sum()) == soft
        assert not batch[prefix + "completion_mask"][batch[prefix + "input_ids"] == pad].any()


def test_dpo_with_images_trains_and_the_loss_falls(qwen2_vl, tmp_path):
    data = _pairwise(tmp_path / "data")
    config = _config(tmp_path, qwen2_vl, data)
    assert main(["train", str(config)]) == 0
    losses = _losses(tmp_path / "out")
    assert len(losses) == 6 and losses[0] == pytest.approx(0.6931, abs=0.01)  # the policy starts at the reference
    assert max(losses[-2:]) < losses[0] - 0.2


def test_kto_with_images_trains(qwen2_vl, tmp_path):
    data = _pairwise(tmp_path / "data")
    config = _config(tmp_path, qwen2_vl, data, stage="kto", dataset="colors_kto", max_steps=6)
    assert main(["train", str(config)]) == 0
    losses = _losses(tmp_path / "out")
    assert len(losses) == 6 and losses[0] == pytest.approx(0.5, abs=0.01)
    assert max(losses[-2:]) < losses[0] - 0.1


def test_text_only_pref_losses_and_reply_placeholders_are_refused(qwen2_vl, tmp_path, capsys):
    data = _pairwise(tmp_path / "data")
    assert main(["train", str(_config(tmp_path, qwen2_vl, data, pref_loss="orpo"))]) == 2
    assert "`pref_loss: orpo` trains on text only" in capsys.readouterr().err
    rows = json.loads((data / "pairs.json").read_text())
    rows[0]["conversations"][0]["value"] = "What color is it?"
    rows[0]["chosen"]["value"] = "<image>It is red."
    (data / "pairs.json").write_text(json.dumps(rows))
    assert main(["train", str(_config(tmp_path, qwen2_vl, data))]) == 2
    assert "media placeholders belong in the prompt" in capsys.readouterr().err



@pytest.mark.parametrize(("template_name", "mask_history", "train_on_prompt"),
                         [("glm4v", False, False), ("qwen2_vl", True, False), ("qwen2_vl", False, True)])
def test_media_sft_rows_follow_the_text_rules(qwen2_vl, tmp_path, template_name, mask_history, train_on_prompt):
    """efficient_eos (one EOS closes the sequence), mask_history and train_on_prompt apply to media rows exactly as
    to text rows: with train_on_prompt the soft tokens are labelled like the prompt around them, as LLaMA-Factory
    labels them (they had been masked: found by an outside check against LLaMA-Factory)."""
    from engine.data.tokenize import IGNORE, TokenizeOptions, tokenize_sft
    from engine.multimodal.dataset import tokenize_media_sft
    from engine.multimodal.plugins import soft_token_ids
    from engine.templates import get_template

    tokenizer, _, ctx = _context(qwen2_vl)
    template = get_template(template_name)
    _images(tmp_path)
    messages = [{"role": "user", "content": "<image>Color?"}, {"role": "assistant", "content": "Red."},
                {"role": "user", "content": "Sure?"}, {"role": "assistant", "content": "Yes."}]
    example = {"messages": messages, "images": [str(tmp_path / "img" / "0.png")]}
    opts = TokenizeOptions(cutoff_len=512, mask_history=mask_history, train_on_prompt=train_on_prompt)
    media, _ = tokenize_media_sft([example], tokenizer, template, opts, ctx)
    expanded, _ = ctx.plugin.process(ctx.processor, messages, example["images"], [], [], ctx.options)
    text, _ = tokenize_sft([{"messages": expanded}], tokenizer, template, opts)
    assert media["input_ids"] == text["input_ids"]
    assert media["labels"] == text["labels"]
    soft = soft_token_ids(ctx.processor)
    at_soft = [label for token, label in zip(media["input_ids"][0], media["labels"][0]) if token in soft]
    assert at_soft and at_soft == ([token for token in media["input_ids"][0] if token in soft] if train_on_prompt
                                   else [IGNORE] * len(at_soft))
    if template.uses_efficient_eos:
        assert media["input_ids"][0][-1] == tokenizer.eos_token_id == media["labels"][0][-1]


def test_a_media_row_left_with_no_trained_token_is_kept_as_text_rows_are(qwen2_vl, tmp_path, caplog):
    """cutoff_len that leaves a row's media whole but cuts its whole reply: kept and counted, as a text row (and
    LLaMA-Factory) keeps it; a row cut inside its media is still dropped (the model refuses such a row)."""
    from engine.data.tokenize import IGNORE, TokenizeOptions
    from engine.multimodal.dataset import tokenize_media_sft
    from engine.templates import get_template

    tokenizer, _, ctx = _context(qwen2_vl)
    template = get_template("qwen2_vl")
    _images(tmp_path)
    example = {"messages": [{"role": "user", "content": "<image>" + "What colour is it? " * 200},
                            {"role": "assistant", "content": "Red. " * 10}],
               "images": [str(tmp_path / "img" / "0.png")], "system": ""}
    # LLaMA-Factory's split of cutoff_len gives this reply against this long a prompt no token at 43 (the prompt's
    # start, the image included, fills it)
    columns, stats = tokenize_media_sft([example], tokenizer, template, TokenizeOptions(cutoff_len=43), ctx)
    assert len(columns["input_ids"]) == 1 and stats["untrained"] == 1 and not stats["dropped"]
    assert set(columns["labels"][0]) == {IGNORE}
    with caplog.at_level(logging.WARNING, logger="engine"):
        columns, stats = tokenize_media_sft([example], tokenizer, template, TokenizeOptions(cutoff_len=6), ctx)
    assert not columns["input_ids"] and stats["media_dropped"] == 1
    assert "1 row was dropped because cutoff_len" in caplog.text and "to keep it." in caplog.text  # "1 rows were"


def test_check_names_stages_that_cannot_train_on_media_before_loading(qwen2_vl, tmp_path, capsys):
    data = _pairwise(tmp_path / "data")
    assert main(["check", str(_config(tmp_path, qwen2_vl, data, stage="rm"))]) == 2
    assert "`stage: rm` does not train on images, videos or audio (sft, dpo and kto do)" in capsys.readouterr().err
    assert main(["check", str(_config(tmp_path, qwen2_vl, data, pref_loss="simpo"))]) == 2
    assert "`pref_loss: simpo` trains on text only" in capsys.readouterr().err
    assert main(["check", str(_config(tmp_path, qwen2_vl, data))]) == 0


@pytest.mark.parametrize("stage", ["dpo", "kto"])
def test_paligemma_preference_rows_put_the_image_tokens_first_and_train(tmp_path, stage):
    """PaliGemma, as LLaMA-Factory feeds it: the image tokens open the prompt (placeholders removed), and the batch's
    token types are 0 for them and 1 for the text."""
    from engine.multimodal.plugins import PLUGINS
    from engine.multimodal.preference import MediaPreferenceCollator, token_types

    model = save_tiny_vlm("paligemma", tmp_path / "paligemma")
    data = _pairwise(tmp_path / "data")
    extra = {"stage": "kto", "dataset": "colors_kto"} if stage == "kto" else {}
    config = _config(tmp_path, model, data, template="paligemma", max_steps=2, **extra)
    assert main(["train", str(config)]) == 0
    assert len(_losses(tmp_path / "out")) == 2
    _, processor = __import__("tinyvlms").build_tiny_vlm("paligemma")
    import torch

    types = token_types(PLUGINS["paligemma"], processor)
    assert types == {processor.image_token_id: 0}
    collate = MediaPreferenceCollator(text_collator=None, types=types, type_ids_key="token_type_ids", text_type=1)
    ids = torch.tensor([[processor.image_token_id] * 4 + [5, 6]])
    assert collate._type_ids(ids).tolist() == [[0, 0, 0, 0, 1, 1]]
