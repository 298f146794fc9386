"""The built-in tiny vision-language model (``model_name_or_path: demo-vlm``), made offline and deterministically.

A Qwen2-VL-architecture model (the real transformers class, so every path a Qwen2-VL fine-tune takes is the one
exercised) with a byte-level BPE tokenizer trained on the demo datasets' text plus Qwen2-VL's special tokens, the
PIL image processor (no torchvision needed) and the ``qwen2_vl`` template as its chat template. A short warm-up on
the demo image captions (``examples/data/demo_vlm.json``) makes it write words and close its turns; what it says
about an image only becomes right once the user fine-tunes it. :func:`ensure_demo_vlm` keeps one copy under
``$LF_BOARD_HOME/demo-vlm``, rebuilt when its stamp (version, data, library versions) changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from engine.demo import DemoDataMissing, demo_data_dir, load_demo_texts

logger = logging.getLogger(__name__)

DEMO_VLM_PATH = "demo-vlm"
DEMO_VLM_VERSION = "4"
STAMP_FILE = "lf_demo_vlm.json"
DATA_FILE = "demo_vlm.json"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
SEED = 1234
WARMUP_STEPS = 48
IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS = 56 * 56, 112 * 112


def demo_vlm_home() -> Path:
    """Where the demo VLM is cached: ``$LF_BOARD_HOME/demo-vlm`` (default ``~/.cache/lf-board``)."""
    base = os.environ.get("LF_BOARD_HOME") or Path("~/.cache/lf-board").expanduser()
    return Path(base).expanduser() / "demo-vlm"


def _rows(data_dir: Path) -> list[dict[str, Any]]:
    path = data_dir / DATA_FILE
    if not path.is_file():
        raise DemoDataMissing(f"The demo VLM is built from {path}, which is missing; restore examples/data or set "
                              "LF_DEMO_DATA_DIR to a copy of it.")
    return json.loads(path.read_text(encoding="utf-8"))


def _tokenizer(corpus: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=SPECIAL_TOKENS[1:], clean_up_tokenization_spaces=False)


def _model(tokenizer):
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    config = Qwen2VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
                     "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
                     "bos_token_id": None, "tie_word_embeddings": True,
                     "rope_parameters": {"rope_type": "default", "mrope_section": [4, 2, 2], "rope_theta": 10000.0}},
        vision_config={"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2,
                       "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        tie_word_embeddings=True, **ids)
    torch.manual_seed(SEED)
    return Qwen2VLForConditionalGeneration(config)


def _warm_up(model: Any, processor: Any, rows: list[dict[str, Any]], data_dir: Path, documents: list[str]) -> float:
    """A few deterministic steps of "pre-training": short captions of the demo images (``Describe the image.`` ->
    ``red square.``, worded unlike the demo dataset's answers), so the merger and language model learn to look
    at the picture, alternating with the demo text documents (ChatML conversations) so it keeps writing words and
    closing turns; the vision tower stays as initialised. Fine-tuning then teaches the dataset's answers."""
    from engine.multimodal.collator import MediaCollator
    from engine.multimodal.dataset import MediaContext, tokenize_media_sft
    from engine.multimodal.plugins import PLUGINS
    from engine.multimodal.processor import MediaOptions
    from engine.templates import get_template

    images = sorted({path for row in rows for path in row["images"]})
    examples = [{"messages": [{"role": "user", "content": "<image>Describe the image."},
                              {"role": "assistant", "content": Path(path).stem.replace("_", " ") + "."}],
                 "system": "", "tools": "", "images": [str(data_dir / path)]} for path in images]
    context = MediaContext(PLUGINS["qwen2_vl"], processor, MediaOptions(image_max_pixels=IMAGE_MAX_PIXELS))
    from engine.data.tokenize import TokenizeOptions

    columns, _ = tokenize_media_sft(examples, processor.tokenizer, get_template("qwen2_vl"),
                                    TokenizeOptions(cutoff_len=512), context)
    features = [dict(zip(columns, values)) for values in zip(*columns.values())]
    texts = []
    for document in documents[:64]:
        ids = processor.tokenizer(document, add_special_tokens=False)["input_ids"][:48]
        texts.append({"input_ids": ids, "labels": list(ids), "mm_inputs": b"", "mm_token_type_ids": [0] * len(ids)})
    collate = MediaCollator(tokenizer=processor.tokenizer)
    for name, param in model.named_parameters():
        param.requires_grad_(not name.startswith(("model.visual.blocks", "model.visual.patch_embed")))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    model.train()
    loss = torch.tensor(0.0)
    for step in range(WARMUP_STEPS):
        pool = features if step % 2 == 0 else texts
        batch = collate([pool[(step // 2 * 4 + i) % len(pool)] for i in range(4)])
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.requires_grad_(True)
    return float(loss.detach())


def _stamp(data_dir: Path) -> dict[str, Any]:
    import transformers

    digest = hashlib.sha256((data_dir / DATA_FILE).read_bytes())
    for row in _rows(data_dir):
        for path in row["images"]:
            digest.update((data_dir / path).read_bytes())
    return {"version": DEMO_VLM_VERSION, "data_sha256": digest.hexdigest(), "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__}


def build_demo_vlm(target_dir: str | Path, data_dir: str | Path | None = None) -> Path:
    """Build the demo VLM into ``target_dir``: model, processor (image processor + tokenizer), chat template."""
    from transformers import GenerationConfig, Qwen2VLImageProcessorPil, Qwen2VLProcessor

    from engine.multimodal.processor import build_processor, save_processor
    from engine.templates import get_template

    started = time.perf_counter()
    folder = Path(data_dir).expanduser() if data_dir else demo_data_dir()
    rows = _rows(folder)
    corpus, documents = load_demo_texts(folder)
    corpus += [turn["content"] for row in rows for turn in row["messages"]]
    tokenizer = _tokenizer(corpus)
    image_processor = Qwen2VLImageProcessorPil(min_pixels=IMAGE_MIN_PIXELS, max_pixels=IMAGE_MAX_PIXELS)
    processor = build_processor(Qwen2VLProcessor, {"image_processor": image_processor, "tokenizer": tokenizer})
    with torch.random.fork_rng(devices=[]):
        model = _model(tokenizer)
        loss = _warm_up(model, processor, rows, folder, documents)
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config = GenerationConfig(eos_token_id=[stop], pad_token_id=tokenizer.pad_token_id,
                                               max_new_tokens=32)
    target = Path(target_dir).expanduser()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.chat_template = get_template("qwen2_vl").to_jinja()
    save_processor(processor, target)
    (target / STAMP_FILE).write_text(json.dumps(_stamp(folder), indent=2) + "\n", encoding="utf-8")
    logger.info("Built the demo VLM in %s (%.1f s, warm-up loss %.3f).", target, time.perf_counter() - started, loss)
    return target


def ensure_demo_vlm(folder: str | Path | None = None) -> Path:
    """The cached demo VLM, built on first use or when its stamp is out of date (a file lock serialises builds)."""
    from filelock import FileLock

    target = Path(folder).expanduser() if folder else demo_vlm_home()
    data_dir = demo_data_dir()
    expected = _stamp(data_dir) if (data_dir / DATA_FILE).is_file() else None

    def current() -> bool:
        try:
            stamp = json.loads((target / STAMP_FILE).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return False
        return (expected is None or stamp == expected) and (target / "model.safetensors").is_file()

    if current():
        return target
    if expected is None:
        _rows(data_dir)  # raises DemoDataMissing with the fix
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=900):
        if current():
            return target
        staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            build_demo_vlm(staging, data_dir)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
