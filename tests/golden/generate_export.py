"""Regenerate tests/golden/lf_export.json: what LLaMA-Factory 0.9.5's export writes beside the model.

    python -m tests.golden.generate_export /path/to/llamafactory-venv/bin/python

Runs, in LLaMA-Factory's own environment (DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1):

- for every text template of tests/golden/tokenizers.FAMILY_SPECIALS, on that family's tokenizer with no chat
  template of its own: the Ollama Modelfile its ``get_ollama_modelfile`` writes (or the error it raises), and the
  Jinja chat template it puts into such a tokenizer;
- ``llamafactory-cli export`` of the built-in demo model (``lf-engine demo`` builds it, deterministically) with the
  ``qwen`` template: the files written, generation_config.json, the tokenizer's padding side and special tokens,
  the saved chat template, the Modelfile.

tests/engine/test_export_lf.py compares ours with these. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

REPO = Path(__file__).resolve().parents[2]
PATH = Path(__file__).with_name("lf_export.json")
EXPORT = {"template": "qwen", "finetuning_type": "lora", "export_size": 5, "export_device": "cpu",
          "export_legacy_format": False}
TOKENIZER_KEYS = ("padding_side", "eos_token", "pad_token", "bos_token")

THEIRS = HIDE_MEDIA_LIBS + r"""
import json
sys.path.insert(0, sys.argv[1])
from tests.golden.tokenizers import FAMILY_SPECIALS, load
from llamafactory.data.template import TEMPLATES, get_template_and_fix_tokenizer
from llamafactory.hparams import DataArguments
from llamafactory.train.tuner import export_model

out = {"templates": {}}
for name in FAMILY_SPECIALS:
    if name not in TEMPLATES:
        continue
    tokenizer = load("family", name)
    tokenizer.chat_template = None
    entry = {}
    try:
        template = get_template_and_fix_tokenizer(tokenizer, DataArguments(template=name))
    except Exception as err:
        out["templates"][name] = {"error": f"{type(err).__name__}: {err}"}
        continue
    entry["chat_template"] = tokenizer.chat_template
    try:
        entry["modelfile"] = template.get_ollama_modelfile(tokenizer)
    except Exception as err:
        entry["modelfile_error"] = f"{type(err).__name__}: {err}"
    out["templates"][name] = entry
export_model(json.loads(sys.argv[2]))
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"))
"""


def main() -> None:
    from engine.demo import ensure_demo_model

    with tempfile.TemporaryDirectory() as work:
        export_dir = Path(work) / "exported"
        args = {**EXPORT, "model_name_or_path": str(ensure_demo_model()), "export_dir": str(export_dir)}
        (Path(work) / "driver.py").write_text(THEIRS, encoding="utf-8")
        env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.argv[1], str(Path(work) / "driver.py"), str(REPO), json.dumps(args),
                        str(Path(work) / "out.json")], check=True, env=env)
        out = json.loads((Path(work) / "out.json").read_text(encoding="utf-8"))
        generation = json.loads((export_dir / "generation_config.json").read_text(encoding="utf-8"))
        tokenizer_config = json.loads((export_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        out["export"] = {
            "config": {key: value for key, value in args.items() if key not in ("model_name_or_path", "export_dir")},
            "files": sorted(p.name for p in export_dir.iterdir()),
            "generation_config": {k: v for k, v in generation.items() if k != "transformers_version"},
            "tokenizer": {key: tokenizer_config.get(key) for key in TOKENIZER_KEYS},
            "chat_template": (export_dir / "chat_template.jinja").read_text(encoding="utf-8"),
            "modelfile": (export_dir / "Modelfile").read_text(encoding="utf-8"),
        }
    PATH.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    sys.exit(main())
