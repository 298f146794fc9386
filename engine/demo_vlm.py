"""The built-in tiny vision-language model (``model_name_or_path: demo-vlm``), made offline and deterministically.

A Qwen2-VL-architecture model (the real transformers class, so every path a Qwen2-VL fine-tune takes is the one
exercised) with a byte-level BPE tokenizer trained on the demo datasets' text plus Qwen2-VL's special tokens, the
PIL image processor (no torchvision needed) and the ``qwen2_vl`` template as its chat template. Its vision tower
stands in for a pre-trained one (colour-and-layout patch filters, pass-through blocks; see :func:`_pooling_filters`)
and a short warm-up on the demo text and the demo pictures (``examples/data/demo_vlm.json``, captioned only with
where the shape is) makes it write words and close its turns; it names colours and shapes only once the user
fine-tunes it (``examples/sft_vlm_demo.yaml``). :func:`ensure_demo_vlm` keeps one copy under
``$LF_BOARD_HOME/demo-vlm``, rebuilt when its stamp (version, data, library versions) changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from engine.demo import MAX_STAMP_BYTES, DemoDataMissing, build_once, demo_data_dir, load_demo_texts
from engine.demo_names import demo_vlm_home
from engine.small_json import read_small_json

logger = logging.getLogger(__name__)

DEMO_VLM_PATH = "demo-vlm"
DEMO_VLM_VERSION = "6"
STAMP_FILE = "lf_demo_vlm.json"
DATA_FILE = "demo_vlm.json"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS = 56 * 56, 112 * 112


@dataclass(frozen=True)
class DemoVLMSpec:
    """Size and warm-up of the demo VLM.

    The warm-up is a short pre-training of the language model (the vision tower and merger stay as made): blocks of
    the demo text documents (so it writes words and closes its turns) alternating with the demo pictures captioned
    with where the shape is (``Where is the shape?`` -> ``At the top left.``), so it takes image tokens in stride
    but never learns colour or shape names: those come from fine-tuning. ``final_norm_scale`` sharpens the output
    distribution, as for ``demo`` (LoRA cannot change norms or the tied output head). ``pool_grid``: see
    :func:`_pooling_filters`.
    """

    hidden_size: int = 128
    intermediate_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    vision_depth: int = 2
    vision_dim: int = 160
    final_norm_scale: float = 4.0
    pool_grid: int = 7
    seed: int = 1234
    warmup_steps: int = 120
    warmup_lr: float = 3e-3
    warmup_block: int = 64
    warmup_batch: int = 4


SPEC = DemoVLMSpec()




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


def _model(tokenizer, spec: DemoVLMSpec):
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    head_dim = spec.hidden_size // spec.num_heads
    quarter = head_dim // 8  # mrope sections (temporal, height, width) cover half the rotary dimensions
    config = Qwen2VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": spec.hidden_size,
                     "intermediate_size": spec.intermediate_size, "num_hidden_layers": spec.num_layers,
                     "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
                     "max_position_embeddings": 2048, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id, "bos_token_id": None, "tie_word_embeddings": True,
                     "rope_parameters": {"rope_type": "default", "mrope_section": [2 * quarter, quarter, quarter],
                                         "rope_theta": 10000.0}},
        vision_config={"depth": spec.vision_depth, "embed_dim": spec.vision_dim, "hidden_size": spec.hidden_size,
                       "num_heads": 2, "mlp_ratio": 2, "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2},
        tie_word_embeddings=True, **ids)
    torch.manual_seed(spec.seed)
    model = Qwen2VLForConditionalGeneration(config)
    with torch.no_grad():
        model.model.language_model.norm.weight.fill_(spec.final_norm_scale)
        _pooling_filters(model.model.visual.patch_embed.proj.weight, spec.pool_grid)
        for block in model.model.visual.blocks:  # pass-through blocks: the pooled colours reach the merger intact
            for layer in (block.attn.proj, block.mlp.fc2):
                layer.weight.zero_()
                if layer.bias is not None:
                    layer.bias.zero_()
    return model


def _pooling_filters(weight: torch.Tensor, grid: int) -> None:
    """Make the first filters of the patch embedding colour means over a ``grid`` x ``grid`` split of each patch.

    A random patch embedding mixes colour with where in the patch the colour lies, which a tiny model cannot
    untangle from a few dozen pictures (measured: fine-tuning then stays at chance); a pre-trained vision tower's
    first layer has colour and layout detectors. These filters stand in for that (one per channel and sub-block);
    the other filters are zero, and the blocks after them pass their input through unchanged.
    """
    out, channels, frames, height, width = weight.shape
    step = height // grid
    index = 0
    for channel in range(channels):
        for row in range(grid):
            for col in range(grid):
                if index >= out:
                    return
                weight[index].zero_()
                cells = (slice(row * step, (row + 1) * step), slice(col * step, (col + 1) * step))
                weight[index, channel, :, cells[0], cells[1]] = 1.0 / (frames * step * step)
                index += 1
    weight[index:].zero_()


def _where(path: Path) -> str:
    """Where the shape in a demo picture is (``At the top left.``): its bounding box centre against the middle."""
    from PIL import Image, ImageOps

    with Image.open(path) as image:
        box = ImageOps.invert(image.convert("L")).getbbox() or (0, 0, image.width, image.height)
        width, height = image.size
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return f"At the {'top' if y < height / 2 else 'bottom'} {'left' if x < width / 2 else 'right'}."


def _warm_up(model: Any, processor: Any, rows: list[dict[str, Any]], data_dir: Path, documents: list[str],
             spec: DemoVLMSpec) -> float:
    """The spec's warm-up (see :class:`DemoVLMSpec`); returns the last loss."""
    from engine.data.tokenize import TokenizeOptions
    from engine.multimodal.collator import MediaCollator
    from engine.multimodal.dataset import MediaContext, tokenize_media_sft
    from engine.multimodal.plugins import PLUGINS
    from engine.multimodal.processor import MediaOptions
    from engine.templates import get_template

    images = sorted({path for row in rows for path in row["images"]})
    examples = [{"messages": [{"role": "user", "content": "<image>Where is the shape?"},
                              {"role": "assistant", "content": _where(data_dir / path)}],
                 "system": "", "tools": "", "images": [str(data_dir / path)]} for path in images]
    context = MediaContext(PLUGINS["qwen2_vl"], processor, MediaOptions(image_max_pixels=IMAGE_MAX_PIXELS))
    columns, _ = tokenize_media_sft(examples, processor.tokenizer, get_template("qwen2_vl"),
                                    TokenizeOptions(cutoff_len=512), context)
    pictures = [dict(zip(columns, values)) for values in zip(*columns.values())]
    stream: list[int] = []
    for document in documents:
        stream += processor.tokenizer(document, add_special_tokens=False)["input_ids"] + [processor.tokenizer.pad_token_id]
    block = min(spec.warmup_block, len(stream))
    texts = [{"input_ids": stream[i:i + block], "labels": stream[i:i + block], "mm_inputs": b"",
              "mm_token_type_ids": [0] * block} for i in range(0, len(stream) - block + 1, block)]
    collate = MediaCollator(tokenizer=processor.tokenizer)
    generator = torch.Generator().manual_seed(spec.seed)
    model.model.visual.requires_grad_(False)  # the vision tower and merger stay as made (see _pooling_filters)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=spec.warmup_lr,
                                  weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 10) * max(0.05, 1 - step / spec.warmup_steps))
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(spec.warmup_steps):
        pool = pictures if step % 2 else texts
        picks = torch.randint(len(pool), (spec.warmup_batch,), generator=generator).tolist()
        loss = model(**collate([pool[i] for i in picks])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()
    model.requires_grad_(True)
    return float(loss.detach())


def _stamp(data_dir: Path) -> dict[str, Any]:
    import transformers

    digest = hashlib.sha256((data_dir / DATA_FILE).read_bytes())
    for row in _rows(data_dir):
        for path in row["images"]:
            digest.update((data_dir / path).read_bytes())
    return {"version": DEMO_VLM_VERSION, "spec": asdict(SPEC), "data_sha256": digest.hexdigest(),
            "transformers": transformers.__version__}  # not torch's version: see engine.demo._stamp


def build_demo_vlm(target_dir: str | Path, data_dir: str | Path | None = None, spec: DemoVLMSpec | None = None) -> Path:
    """Build the demo VLM into ``target_dir``: model, processor (image processor + tokenizer), chat template."""
    from transformers import GenerationConfig, Qwen2VLImageProcessorPil, Qwen2VLProcessor

    from engine.multimodal.processor import build_processor, save_processor
    from engine.templates import get_template

    started = time.perf_counter()
    logger.info("Building the demo VLM, offline (once; it takes a while on a busy machine)...")
    spec = spec or SPEC
    folder = Path(data_dir).expanduser() if data_dir else demo_data_dir()
    rows = _rows(folder)
    corpus, documents = load_demo_texts(folder)
    corpus += [turn["content"] for row in rows for turn in row["messages"]]
    tokenizer = _tokenizer(corpus)
    image_processor = Qwen2VLImageProcessorPil(min_pixels=IMAGE_MIN_PIXELS, max_pixels=IMAGE_MAX_PIXELS)
    processor = build_processor(Qwen2VLProcessor, {"image_processor": image_processor, "tokenizer": tokenizer})
    with torch.random.fork_rng(devices=[]):
        model = _model(tokenizer, spec)
        loss = _warm_up(model, processor, rows, folder, documents, spec)
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
    target = Path(folder).expanduser() if folder else demo_vlm_home()
    data_dir = demo_data_dir()
    expected = _stamp(data_dir) if (data_dir / DATA_FILE).is_file() else None

    def current() -> bool:
        try:
            stamp = read_small_json(target / STAMP_FILE, MAX_STAMP_BYTES)  # bounded, a regular file only
        except (OSError, ValueError, RecursionError):  # missing, no regular file, outsized, not JSON: built again
            return False
        if isinstance(stamp, dict):
            stamp.pop("torch", None)  # written by earlier versions; no longer part of the stamp
        return (expected is None or stamp == expected) and (target / "model.safetensors").is_file()

    if current():
        return target
    if expected is None:
        _rows(data_dir)  # raises DemoDataMissing with the fix
    return build_once(target, current, lambda staging: build_demo_vlm(staging, data_dir))
