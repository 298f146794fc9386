"""Load LLaMA-Factory 0.9.5's template, formatter, tool and processor modules from a git mirror, with stubs.

Only for regenerating the golden fixtures (``python -m tests.golden.generate``); tests never import it. The
mirror is read with ``git show``; nothing of LLaMA-Factory is installed or copied into this repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

MIRROR = os.environ.get("LF_MIRROR", "/work/.mirror/hiyouga+LLaMA-Factory/repo")
REF = os.environ.get("LF_REF", "v0.9.5")
FILES = ["data/parser.py", "data/data_utils.py", "data/formatter.py", "data/tool_utils.py", "data/template.py", "data/converter.py",
         "data/processor/processor_utils.py", "data/processor/supervised.py", "data/processor/pairwise.py",
         "data/processor/feedback.py", "data/processor/pretrain.py"]

_STUB_LOGGING = '''
import logging as _logging
class _L(_logging.LoggerAdapter):
    def __init__(self, name):
        super().__init__(_logging.getLogger(name), {})
    def info_rank0(self, *a, **k): pass
    def warning_rank0(self, *a, **k): pass
    def warning_rank0_once(self, *a, **k): pass
    def warning_once(self, *a, **k): pass
def get_logger(name=None):
    return _L(name or "lf")
'''
_STUB_MM = '''
class BasePlugin:
    def process_messages(self, messages, images, videos, audios, processor):
        return messages
    def process_token_ids(self, input_ids, labels, images, videos, audios, tokenizer, processor):
        return input_ids, labels
def get_mm_plugin(name="base", **kwargs):
    return BasePlugin()
'''


def load_lf() -> types.ModuleType:
    """Import ``llamafactory`` (stubbed package) from the mirror; returns the package module."""
    root = Path(tempfile.mkdtemp(prefix="lfstub-")) / "llamafactory"
    for sub in ("", "extras", "data", "data/processor"):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / "__init__.py").write_text("")
    (root / "extras/logging.py").write_text(_STUB_LOGGING)
    (root / "extras/constants.py").write_text("IGNORE_INDEX = -100\nDATA_CONFIG = 'dataset_info.json'\n")
    (root / "extras/misc.py").write_text("def use_modelscope():\n    return False\n\n\n"
                                         "def use_openmind():\n    return False\n")
    (root / "data/mm_plugin.py").write_text(_STUB_MM)
    for name in FILES:
        text = subprocess.run(["git", "-C", MIRROR, "show", f"{REF}:src/llamafactory/{name}"], check=True,
                              capture_output=True, text=True).stdout
        (root / name).write_text(text)
    sys.path.insert(0, str(root.parent))
    import llamafactory.data.template  # noqa: F401

    return sys.modules["llamafactory"]
