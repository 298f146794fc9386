"""LLaMA-Factory's side of the benchmarks, in its own venv: where that venv's torchvision/torchaudio build does not
import beside its torch (here torchvision 0.28 beside torch 2.13: ``torchvision::nms does not exist``), transformers
fails at ``PreTrainedModel`` and no LLaMA-Factory module loads. The benchmarks load text only, so those two are hidden
(as tests/golden's harness does) before LLaMA-Factory is imported. Standard library only: it runs in either venv."""

from __future__ import annotations

import sys
import types


def hide_broken_vision_audio() -> None:
    """Hide torchvision and torchaudio where their build does not import beside the installed torch (else nothing)."""
    try:
        import torchaudio  # noqa: F401
        import torchvision  # noqa: F401
    except Exception:
        for name in [key for key in sys.modules if key.split(".")[0] in ("torchvision", "torchaudio")]:
            del sys.modules[name]
        sys.modules["torchvision"] = sys.modules["torchaudio"] = None
        import transformers  # noqa: F401  (its availability checks now say no)

        sys.modules["torchaudio"] = types.ModuleType("torchaudio")  # LLaMA-Factory's mm_plugin imports it at start
        import llamafactory.data.mm_plugin  # noqa: F401

        sys.modules["torchaudio"] = None
