"""Regenerate tests/golden/lf_chat.json: LLaMA-Factory 0.9.5's chat (its ChatModel, huggingface engine, greedy).

    python -m tests.golden.generate_chat /path/to/llamafactory-venv/bin/python

On the built-in demo model (``lf-engine demo`` builds it, deterministically), for each template of TEMPLATES and each
conversation of CASES (multi-turn with a system prompt, no system, tools, a tool call and its result), records the
prompt ids its chat engine builds (``encode_oneturn`` of the conversation plus an empty reply, as that engine builds
them), the ids ``generate`` returns after them and the reply text. tests/engine/test_chat_lf.py compares ours.
Templates that add tokens to the demo tokenizer (llama3, glm4) are left out: LLaMA-Factory's chat does not resize
the embeddings, and its generation fails on the new ids. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

PATH = Path(__file__).with_name("lf_chat.json")
TEMPLATES = ("qwen", "mistral", "qwen3", "default")
MAX_NEW_TOKENS = 24
TOOLS = json.dumps([{"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}])
CASES = [
    {"system": "You are a terse assistant.", "tools": None, "messages": [
        {"role": "user", "content": "Give three tips for staying healthy."},
        {"role": "assistant", "content": "Eat well, sleep, move."},
        {"role": "user", "content": "What is the capital of France?"}]},
    {"system": None, "tools": None, "messages": [{"role": "user", "content": "Who are you?"}]},
    {"system": "Use tools when needed.", "tools": TOOLS, "messages": [
        {"role": "user", "content": "What is the weather in Paris?"}]},
    {"system": None, "tools": TOOLS, "messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "function", "content": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})},
        {"role": "observation", "content": "{\"temperature\": 21}"}]},
]

THEIRS = HIDE_MEDIA_LIBS + r"""
import json
from llamafactory.chat import ChatModel

args, cases = json.loads(sys.argv[1]), json.loads(sys.argv[2])
chat_model = ChatModel(args)
engine = chat_model.engine
returned = []
generate = engine.model.generate


def recording_generate(*a, **k):
    output = generate(*a, **k)
    returned.append(output[0, k["inputs"].shape[1]:].tolist())
    return output


engine.model.generate = recording_generate
out = []
for case in cases:
    prompt_ids, _ = engine.template.encode_oneturn(
        engine.tokenizer, case["messages"] + [{"role": "assistant", "content": ""}], case["system"], case["tools"])
    reply = chat_model.chat(case["messages"], case["system"], case["tools"])[0]
    out.append({"prompt_ids": prompt_ids, "generated_ids": returned[-1], "text": reply.response_text,
                "finish_reason": reply.finish_reason})
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"))
"""


def main() -> None:
    from engine.demo import ensure_demo_model

    golden: dict = {"max_new_tokens": MAX_NEW_TOKENS, "cases": CASES, "templates": {}}
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "driver.py").write_text(THEIRS, encoding="utf-8")
        for template in TEMPLATES:
            args = {"model_name_or_path": str(ensure_demo_model()), "template": template, "infer_backend": "huggingface",
                    "do_sample": False, "max_new_tokens": MAX_NEW_TOKENS}
            subprocess.run([sys.argv[1], str(Path(work) / "driver.py"), json.dumps(args), json.dumps(CASES),
                            str(Path(work) / "out.json")], check=True, env=env)
            golden["templates"][template] = json.loads((Path(work) / "out.json").read_text(encoding="utf-8"))
    PATH.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    sys.exit(main())
