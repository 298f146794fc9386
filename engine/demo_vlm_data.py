"""The demo VLM's picture data: coloured shapes drawn deterministically with PIL.

``examples/data/demo_vlm/`` and ``examples/data/demo_vlm.json`` are written by :func:`write_demo_vlm_dataset`
(``python -m engine.demo_vlm_data examples/data`` regenerates them byte for byte). :func:`draw_shape` also
draws held-out pictures (other sizes and places) to measure what a fine-tuned model learned, and
:func:`score_answer` says whether a reply names a picture's colour and shape.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (30, 170, 50), "blue": (30, 60, 220), "yellow": (240, 210, 20),
}
SHAPES = ("square", "circle", "triangle")
IMAGE_SIZE = 56  # 4x4 patches of 14 px: 4 soft tokens after Qwen2-VL's 2x2 merge
VARIANTS = 4  # pictures per colour and shape in the training set
SEED = 7

QUESTIONS = (
    ("<image>What is in the picture?", "A {colour} {shape}."),
    ("What colour is the shape?<image>", "It is {colour}."),
    ("<image>What shape is it?", "It is a {shape}."),
)


@dataclass(frozen=True)
class Picture:
    """One drawn shape: colour and shape names, its centre (x, y) and half-size in pixels."""

    colour: str
    shape: str
    centre: tuple[int, int]
    radius: int



def draw_shape(picture: Picture, size: int = IMAGE_SIZE):
    """The picture as an RGB PIL image: the shape in its colour on a white background."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    (x, y), r, fill = picture.centre, picture.radius, COLOURS[picture.colour]
    if picture.shape == "square":
        draw.rectangle((x - r, y - r, x + r, y + r), fill=fill)
    elif picture.shape == "circle":
        draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
    elif picture.shape == "triangle":
        draw.polygon([(x, y - r), (x + r, y + r), (x - r, y + r)], fill=fill)
    else:
        raise ValueError(f"unknown shape {picture.shape!r}; choose one of {', '.join(SHAPES)}")
    return image


def sample_pictures(count_per_class: int, seed: int, size: int = IMAGE_SIZE) -> list[Picture]:
    """``count_per_class`` pictures of every colour and shape, at random sizes and places (fixed by ``seed``)."""
    rng = random.Random(seed)
    pictures = []
    for colour in COLOURS:
        for shape in SHAPES:
            for _ in range(count_per_class):
                radius = rng.randint(size * 3 // 10, size * 2 // 5)
                centre = (size // 2 + rng.randint(-3, 3), size // 2 + rng.randint(-3, 3))
                pictures.append(Picture(colour, shape, centre, radius))
    return pictures


def write_demo_vlm_dataset(data_dir: str | Path) -> list[dict[str, Any]]:
    """Write the demo pictures to ``data_dir/demo_vlm/`` and their conversations to ``data_dir/demo_vlm.json``."""
    folder = Path(data_dir)
    (folder / "demo_vlm").mkdir(parents=True, exist_ok=True)
    rows = []
    for index, picture in enumerate(sample_pictures(VARIANTS, SEED)):
        variant = index % VARIANTS  # the first of each kind is plainly `red_square.png`, the others `red_square_2.png`
        name = f"demo_vlm/{picture.colour}_{picture.shape}{f'_{variant + 1}' if variant else ''}.png"
        draw_shape(picture).save(folder / name, optimize=True)
        for question, answer in QUESTIONS:
            rows.append({"messages": [{"role": "user", "content": question},
                                      {"role": "assistant", "content": answer.format(**picture.__dict__)}],
                         "images": [name]})
    (folder / "demo_vlm.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return rows


def score_answer(picture: Picture, reply: str) -> tuple[bool, bool]:
    """(names the right colour and no other, names the right shape and no other) for a reply about ``picture``."""
    words = {w.strip(".,!?;:").lower() for w in reply.split()}
    colours = words & set(COLOURS)
    shapes = words & set(SHAPES)
    return colours == {picture.colour}, shapes == {picture.shape}


if __name__ == "__main__":  # pragma: no cover - regenerates the committed example data
    target = sys.argv[1] if len(sys.argv) > 1 else "examples/data"
    written = write_demo_vlm_dataset(target)
    sys.stdout.write(f"wrote {len(written)} rows to {target}/demo_vlm.json\n")
