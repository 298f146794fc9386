"""Pre-flight: a model folder's ``num_hidden_layers`` against the decoder layers its safetensors weights hold.

transformers builds as many layers as config.json names and fills those the weights lack with random values (its
load report lists them as MISSING, and loading goes on): a config.json from elsewhere that names 400 layers beside
weights of 4 trained a model of 396 random layers to "completed", and one that names a million would take the memory
of a million layers before anything could say why (the memory estimate reads the weights, which are small). Read from
the weights' headers alone (no tensor, no torch); composite models (a ``text_config``) and weights other than
safetensors are left to transformers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from engine.safetensors_header import HeaderError, read_header

LAYER = re.compile(r"^(?:model\.|transformer\.)?(?:layers|h)\.(\d+)\.")
"""A decoder layer's tensor name (``model.layers.N.``, ``transformer.h.N.``); N is the layer's index."""


def layer_count_problem(folder: Path, config: dict[str, Any], key: str, name: str) -> str | None:
    """Why ``folder``'s weights cannot be the model its config.json describes: fewer decoder layers than its
    ``num_hidden_layers``; None when they can, or when that cannot be told from the headers."""
    claimed = config.get("num_hidden_layers")
    if not isinstance(claimed, int) or isinstance(claimed, bool) or "text_config" in config:
        return None
    layers: set[int] = set()
    for file in sorted(folder.glob("*.safetensors")):
        try:
            header = read_header(file)
        except HeaderError:  # the weights check names a damaged file
            return None
        layers.update(int(match.group(1)) for tensor in header.tensors if (match := LAYER.match(tensor)))
    if not layers or len(layers) >= claimed:
        return None
    return (f"`{key}: {name}`: its config.json names {claimed:,} layers (num_hidden_layers), but its weights hold "
            f"{len(layers):,}; the other {claimed - len(layers):,} would be made up at random, and take their memory. "
            "Copy config.json again from the model the weights came from (or the weights from the model the config "
            "came from).")
