"""Skipped KTO rows lend their reply to the KL pairs in data with images and in ``eval_on_each_dataset`` sets too, as
LLaMA-Factory 0.9.5 forms the pairs over a preprocessing batch before it drops the rows it cannot use (its KL pair
is the row's own prompt and media with the partner's reply text). Checked against LLaMA-Factory by hand with
tests/golden/compare_rows.py on a tiny Qwen2-VL (before: 4 of 9 rows identical on such data; after: 9 of 9)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import save_tiny_vlm  # noqa: E402

from engine.config import build_config  # noqa: E402
from engine.data import get_dataset  # noqa: E402
from engine.data.errors import DatasetError  # noqa: E402
from engine.data.kto_pairs import kl_partners  # noqa: E402
from engine.data.tokenize import prompt_and_reply  # noqa: E402
from engine.templates import get_template  # noqa: E402
from engine.train.preference import _with_kl_pairs  # noqa: E402  (as the trainer pairs a set: here a no-op)

TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}
INFO = {"kto_media": {"file_name": "kto_media.json", "formatting": "sharegpt",
                      "columns": {"messages": "messages", "kto_tag": "label", "images": "images"}, "tags": TAGS}}


@pytest.fixture(scope="module")
def qwen2_vl(tmp_path_factory):
    return save_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl")


def _row(index: int, label: object = True, image: str | None = "img/0.png", reply: str | None = None) -> dict:
    row = {"messages": [{"role": "user", "content": ("<image>" if image else "") + f"What is in picture {index}?"},
                        {"role": "assistant", "content": reply if reply is not None else f"Answer {index}."}],
           "images": [image] if image else []}
    if label is not ...:
        row["label"] = label
    return row


def _write(folder: Path, rows: list[dict]) -> None:
    from PIL import Image

    (folder / "img").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (56, 56), (200, 30, 30)).save(folder / "img" / "0.png")
    (folder / "kto_media.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(INFO), encoding="utf-8")


def _media_run(model: Path, folder: Path, **extra):
    from engine.models.loader import load_tokenizer
    from engine.multimodal import media_context

    cfg = build_config({"model_name_or_path": str(model), "template": "qwen2_vl", "stage": "kto",
                        "dataset": "kto_media", "dataset_dir": str(folder), "cutoff_len": 1024,
                        "image_max_pixels": 56 * 56, **extra})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template("qwen2_vl")
    template.fix_tokenizer(tokenizer)
    return cfg, tokenizer, template, media_context(cfg, tokenizer)


def _reply_ids(tokenizer, template, reply: str) -> list[int]:
    example = {"messages": [{"role": "user", "content": ""}], "system": "", "tools": ""}
    return prompt_and_reply(tokenizer, template, example, {"role": "assistant", "content": reply})[1]


def test_skipped_rows_with_images_lend_their_reply_and_each_row_keeps_its_own_media(qwen2_vl, tmp_path,
                                                                                      monkeypatch):
    from engine.multimodal.plugins import unpack_arrays

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(i, label=i % 2 == 0, image="img/0.png" if i % 3 else None) for i in range(10)]
    rows[2]["label"] = None  # no boolean kto_tag: skipped, its reply is row 3's KL completion
    rows[5] = _row(5, label=..., image="img/missing.png")  # a missing file and no kto_tag: still lends its reply
    rows[7]["messages"][0]["content"] = "<image><image>" + rows[7]["messages"][0]["content"]
    rows[7]["label"] = None  # a bad image count on a skipped row: never processed, its reply still lends
    rows[9]["label"] = None  # the last row lends its reply to the first
    _write(tmp_path, rows)
    cfg, tokenizer, template, ctx = _media_run(qwen2_vl, tmp_path)
    bundle = get_dataset(cfg, tokenizer, template, media=ctx)
    train = _with_kl_pairs(bundle.train, cfg)
    kept = [i for i in range(10) if i not in (2, 5, 7, 9)]
    assert bundle.media is ctx and len(train) == len(kept) and "kl_stand_in" not in train.column_names
    partners = kl_partners(len(rows))
    assert {partners[i] for i in kept} & {2, 5, 7, 9}  # kept rows pair with skipped ones on this data
    for at, i in enumerate(kept):
        assert list(train["KL_prompt_ids"][at]) == list(train["prompt_ids"][at])  # its own prompt and images
        partner_reply = rows[partners[i]]["messages"][-1]["content"]
        assert list(train["KL_completion_ids"][at]) == _reply_ids(tokenizer, template, partner_reply)
        assert bool(unpack_arrays(train["mm_inputs"][at])) == bool(rows[i]["images"])


def test_a_row_dropped_because_the_cut_would_split_its_image_still_lends_its_reply(qwen2_vl, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(0), _row(1), _row(2, reply="Lent by the dropped row.")]
    rows[2]["messages"][0]["content"] = "word " * 60 + rows[2]["messages"][0]["content"]  # the cut splits its image
    rows.append(_row(3, label=False))
    _write(tmp_path, rows)
    cfg, tokenizer, template, ctx = _media_run(qwen2_vl, tmp_path, cutoff_len=120)
    train = _with_kl_pairs(get_dataset(cfg, tokenizer, template, media=ctx).train, cfg)
    assert len(train) == 3  # LLaMA-Factory keeps row 2 (and its training stops there); its reply is row 3's KL one
    assert list(train["KL_completion_ids"][2]) == _reply_ids(tokenizer, template, "Lent by the dropped row.")


def test_a_kept_row_pairing_with_a_reply_that_holds_a_placeholder_is_refused(qwen2_vl, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(0), _row(1, label=None, reply="See <image>."), _row(2)]
    _write(tmp_path, rows)
    cfg, tokenizer, template, ctx = _media_run(qwen2_vl, tmp_path)
    with pytest.raises(DatasetError, match="media placeholder.*: dataset `kto_media` row 1. "):  # LF: ValueError
        _with_kl_pairs(get_dataset(cfg, tokenizer, template, media=ctx).train, cfg)


def test_a_kept_media_row_pairing_with_no_reply_is_refused(qwen2_vl, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(0), _row(1, label=None), _row(2)]
    rows[1]["messages"] = rows[1]["messages"][:1]  # no reply: LLaMA-Factory stops with an IndexError on row 2
    _write(tmp_path, rows)
    cfg, tokenizer, template, ctx = _media_run(qwen2_vl, tmp_path)
    with pytest.raises(DatasetError, match=r"no reply to give .*: dataset `kto_media` row 1\. "):
        _with_kl_pairs(get_dataset(cfg, tokenizer, template, media=ctx).train, cfg)


def test_a_text_row_skipped_for_a_missing_image_still_lends_its_reply(tmp_path, chat_tokenizer, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(i, image=None) for i in range(4)]
    rows[1] = _row(1, label=None, image="img/missing.png")  # before: read as a row with no reply, and refused
    _write(tmp_path, rows)
    cfg = build_config({"model_name_or_path": "unused", "dataset_dir": str(tmp_path), "dataset": "kto_media",
                        "stage": "kto", "template": "chatml", "cutoff_len": 64})
    template = get_template("chatml")
    train = get_dataset(cfg, chat_tokenizer, template).train
    assert len(train) == 3
    assert list(train["KL_completion_ids"][1]) == _reply_ids(chat_tokenizer, template, "Answer 1.")


def test_eval_on_each_dataset_sets_are_paired_with_their_skipped_rows(tmp_path, chat_tokenizer, monkeypatch):
    from engine.data.each_eval import eval_sets_by_name

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = [_row(i, label=i % 2 == 0, image=None) for i in range(6)]
    rows[2]["label"] = None
    _write(tmp_path, rows)
    base = {"model_name_or_path": "unused", "dataset_dir": str(tmp_path), "stage": "kto", "template": "chatml",
            "cutoff_len": 64}
    template = get_template("chatml")
    cfg = build_config({**base, "eval_dataset": "kto_media"})
    held = _with_kl_pairs(eval_sets_by_name(cfg, chat_tokenizer, template)["kto_media"], cfg)
    whole = get_dataset(build_config({**base, "dataset": "kto_media"}), chat_tokenizer, template).train
    assert len(held) == 5 and "kl_stand_in" not in held.column_names
    for name in ("prompt_ids", "completion_ids", "KL_prompt_ids", "KL_completion_ids"):
        assert [list(ids) for ids in held[name]] == [list(ids) for ids in whole[name]]
    assert list(held["KL_completion_ids"][2]) == _reply_ids(chat_tokenizer, template, "Answer 2.")


def test_the_media_check_passes_over_rows_the_stage_skips_anyway(qwen2_vl, tmp_path):
    """LLaMA-Factory drops a KTO row without a boolean kto_tag before its plugin reads the media, so a bad image count
    or a missing file there stops nothing; on a row it keeps, both are still reported by name."""
    from engine.multimodal.checks import check_media

    rows = [_row(0), _row(1, label=None), _row(2, label=..., image="img/missing.png"), _row(3)]
    rows[1]["messages"][0]["content"] = "<image>" + rows[1]["messages"][0]["content"]  # two placeholders, one image
    _write(tmp_path, rows)
    cfg, *_ = _media_run(qwen2_vl, tmp_path)
    assert check_media(cfg) == []
    rows[1]["label"], rows[2]["label"] = True, False
    _write(tmp_path, rows)
    problems = check_media(cfg)
    assert any("Dataset `kto_media` row 1: 2 <image> placeholders but 1 image file" in p for p in problems)
    assert any("Dataset `kto_media` row 2: image file " in p and "is missing" in p for p in problems)
    sft = build_config({**{k: getattr(cfg.data, k) for k in ("dataset", "dataset_dir")},
                        "model_name_or_path": str(qwen2_vl), "template": "qwen2_vl", "stage": "sft"})
    rows[1]["label"] = None  # a plain row for sft: kept there, so checked
    _write(tmp_path, rows)
    assert any("row 1: 2 <image> placeholders" in p for p in check_media(sft))
