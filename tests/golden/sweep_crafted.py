"""By hand: sweep_compat's row comparison on data crafted from LLaMA-Factory's demo files, to reach the converters'
corners that its own files never hit. Not part of the test suite.

    python -m tests.golden.sweep_crafted --incumbent /path/to/lf-venv/bin/python --data DIR [--only SUBSTR] [--list]

``--data`` is LLaMA-Factory's data folder (as for sweep_compat). Into a temporary folder beside links to its files go
(:func:`write_crafted`): alpaca rows with ``history`` and a ``system`` column (null, empty, text), alpaca rows with a
``tools`` column, sharegpt rows with a ``system`` column and with a leading system turn, sharegpt rows whose turns
are out of order (LLaMA-Factory drops them: a reply first, two prompts in a row, a system turn inside, an unknown
role, an empty conversation), alpaca rows with null or empty instruction/input/output, alpaca preference pairs and
KTO rows (one with a null chosen answer or label), sharegpt pairs with an extra turn, OpenAI-format rows with
single tool calls whose ``arguments`` are JSON text (``oai_one``) and with one or two calls whose ``arguments`` are
objects and tools as objects (``oai_multi``, also as JSON lines), sharegpt replies with thoughts (a thought, an empty
one, none; history and last turn) and a system column (``sg_think``), and their dataset_info.json entries. The cases
(:func:`cases`) run them through pt, sft (mask_history, packing, tool formats), rm, dpo and kto, alone and mixed
(interleaving, ``val_size``, ``num_samples``, ``split``, packing in several preprocessing batches and workers). LLaMA-Factory tokenizes them in one process, ours in
this one (sweep_compat's table).

Known differences, deliberate: pt on rows LLaMA-Factory drops, and pt mixing text with conversations (it stops with
IndexError / "The features can't be aligned"; ours trains the usable rows); ``oai_multi`` under glm4 (LLaMA-Factory:
"GLM-4 does not support parallel functions"; ours writes both calls); ``oai_one`` under the formats that write each
argument apart (glm4_moe, glm4_7, minimax2, seed_oss, aeva: LLaMA-Factory calls ``.items()`` on the arguments' JSON
text and fails; ours reads the text's object). Under the default, gemma and llama2 tool formats ``oai_multi`` fails
on both sides (the loader's null parameters; ours names them).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden import sweep_compat  # noqa: E402


def _turn(role: str, text: str) -> dict:
    return {"from": role, "value": text}


def write_crafted(data: Path, folder: Path) -> Path:
    """Links to ``data``'s files plus the crafted files, with their dataset_info.json, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for item in data.iterdir():
        if item.name != "dataset_info.json" and not (folder / item.name).exists():
            (folder / item.name).symlink_to(item.resolve())
    info = json.loads((data / "dataset_info.json").read_text(encoding="utf-8"))
    read = lambda name: json.loads((data / name).read_text(encoding="utf-8"))  # noqa: E731
    alpaca, glaive, pairs, kto = (read(f"{n}.json") for n in ("alpaca_en_demo", "glaive_toolcall_en_demo",
                                                             "dpo_en_demo", "kto_en_demo"))
    files: dict[str, tuple[list, dict]] = {}
    alpaca_columns = {"prompt": "instruction", "query": "input", "response": "output"}
    files["alp_hist"] = ([{**alpaca[i], "system": ["", "You are terse.", None][i % 3],
                           "history": ([[alpaca[j]["instruction"], alpaca[j]["output"]] for j in range(max(0, i - 2), i)]
                                       if i % 5 else None)} for i in range(40)],
                         {"columns": {**alpaca_columns, "history": "history", "system": "system"}})
    files["alp_tools"] = ([{"instruction": g["conversations"][0]["value"], "input": "",
                            "output": g["conversations"][1]["value"], "tools": g["tools"]} for g in glaive[:40]],
                          {"columns": {**alpaca_columns, "tools": "tools"}})
    sharegpt = {"formatting": "sharegpt", "columns": {"messages": "conversations", "tools": "tools"}}
    files["sg_syscol"] = ([{**g, "sys": ["Sys A.", "", None][i % 3]} for i, g in enumerate(glaive[:40])],
                          {**sharegpt, "columns": {**sharegpt["columns"], "system": "sys"}})
    with_system = copy.deepcopy(glaive[:40])
    for i, row in enumerate(with_system):
        if i % 2:
            row["conversations"].insert(0, _turn("system", f"Role system {i}."))
    files["sg_sysrole"] = (with_system, sharegpt)
    human, gpt = (lambda t: _turn("human", t)), (lambda t: _turn("gpt", t))
    call = _turn("function_call", '{"name": "f", "arguments": {"x": 1}}')
    odd = [[human("a"), gpt("b")], [gpt("x"), human("y")], [human("a"), human("b"), gpt("c")],
           [human("a"), gpt("b"), human("c")], [_turn("observation", "o"), gpt("r")], [human("q"), call], [],
           [human("a"), _turn("system", "mid"), gpt("b")], [_turn("system", "s"), _turn("system", "t"), human("a"),
                                                            gpt("b")],
           [human("a"), _turn("weird", "w")], [human(""), gpt("")], [human("a"), gpt("b"), _turn("observation", "o"),
                                                                   gpt("c")],
           [human("a"), call, _turn("observation", "o"), gpt("c")], [human("a"), gpt("b"), human("c"), gpt("d")],
           [_turn("system", "only")], [human("q"), gpt("a"), human("q2"), call, _turn("observation", "r"), gpt("f")]]
    files["sg_odd"] = ([{"conversations": c, "tools": ""} for c in odd], sharegpt)
    odd_alpaca = [dict(r) for r in alpaca[:30]]
    odd_alpaca[1]["instruction"], odd_alpaca[2]["input"], odd_alpaca[3]["output"] = "", None, None
    odd_alpaca[4]["output"], odd_alpaca[5]["instruction"] = "", None
    files["alp_odd"] = (odd_alpaca, {})
    rank = [{"instruction": p["conversations"][-1]["value"], "input": "", "chosen": p["chosen"]["value"],
             "rejected": p["rejected"]["value"]} for p in pairs[:40]]
    rank[3]["chosen"] = None
    files["alp_rank"] = (rank, {"ranking": True, "columns": {"prompt": "instruction", "query": "input",
                                                             "chosen": "chosen", "rejected": "rejected"}})
    labelled = [{"instruction": k["messages"][0]["content"], "input": "", "output": k["messages"][-1]["content"],
                 "kto": k["label"]} for k in kto[:40]]
    labelled[4]["kto"] = None
    files["alp_kto"] = (labelled, {"columns": {**alpaca_columns, "kto_tag": "kto"}})
    odd_pairs = copy.deepcopy(pairs[:20])
    odd_pairs[2]["conversations"].append(gpt("extra"))
    odd_pairs[3]["conversations"] = [human("a"), gpt("b"), human("c")]
    files["sg_rank_odd"] = (odd_pairs, {k: v for k, v in info["dpo_en_demo"].items() if k != "file_name"})
    openai = []
    for i, row in enumerate(glaive[:30]):
        systems = ("You help.", "detailed thinking on. help.")  # the third row of three has none
        messages = [{"role": "system", "content": systems[i % 3]}] if i % 3 < 2 else []
        for turn in row["conversations"]:
            if turn["from"] == "function_call":
                function = json.loads(turn["value"])
                function["arguments"] = json.dumps(function["arguments"])
                messages.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                                                   "function": function}]})
            else:
                role = {"human": "user", "gpt": "assistant", "observation": "tool"}[turn["from"]]
                messages.append({"role": role, "content": turn["value"]})
        openai.append({"messages": messages, "tools": row["tools"]})
    files["oai_one"] = (openai, {"formatting": "openai", "columns": {"messages": "messages", "tools": "tools"},
                                 "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                          "assistant_tag": "assistant", "observation_tag": "tool",
                                          "function_tag": "function_call", "system_tag": "system"}})
    files["oai_multi"] = (_openai_object_calls(glaive[:30]), dict(files["oai_one"][1]))
    thinking = []  # replies with a thought (history and last), an empty thought, none; a system column on some
    for i in range(30):
        think = ("<think>\nLet me see.\n</think>\n\n", "<think>\n\n</think>\n\n", "")
        turns = [human(alpaca[i]["instruction"]), gpt(think[i % 3] + "First answer."),
                 human("And then?"), gpt(think[(i + 1) % 3] + alpaca[i]["output"])]
        thinking.append({"conversations": turns[2:] if i % 4 == 3 else turns,
                         "sys": ["", "Think first.", None][i % 3]})
    files["sg_think"] = (thinking, {"formatting": "sharegpt", "columns": {"messages": "conversations",
                                                                         "system": "sys"}})
    for name, (rows, entry) in files.items():
        (folder / f"{name}.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        info[name] = {"file_name": f"{name}.json", **entry}
    (folder / "oai_multi_lines.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in files["oai_multi"][0]), encoding="utf-8")
    info["oai_multi_lines"] = {**info["oai_multi"], "file_name": "oai_multi_lines.jsonl"}
    info["alp_odd_ns"] = {"file_name": "alp_odd.json", "num_samples": 40}
    info["alp_odd_split"] = {"file_name": "alp_odd.json", "split": "train[5:25]"}
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return folder


def _openai_object_calls(glaive: list[dict]) -> list[dict]:
    """OpenAI rows from glaive's whose tool calls' ``arguments`` are JSON objects (the keys differ from call to call;
    every third reply makes two calls, with numbers whole in one call and fractional in another) and whose ``tools``
    are a list of objects: LLaMA-Factory's file loader (Arrow) gives every call and tool the keys of all of them."""
    rows = []
    for i, row in enumerate(glaive):
        messages = []
        for turn in row["conversations"]:
            if turn["from"] == "function_call":
                calls = [json.loads(turn["value"])]
                if i % 3 == 0:
                    calls.append({"name": "calc", "arguments": {"x": [1, 2], "n": 3, "note": None}})
                elif i % 3 == 1:
                    calls.append({"arguments": {"n": 2.5, "x": [0.5], "flag": True}, "name": "calc"})
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call_{i}_{k}", "type": "function", "function": call} for k, call in enumerate(calls)]})
            else:
                role = {"human": "user", "gpt": "assistant", "observation": "tool"}[turn["from"]]
                messages.append({"role": role, "content": turn["value"]})
        tools = json.loads(row["tools"]) if row["tools"] else []
        rows.append({"messages": messages, "tools": [{"type": "function", "function": tool} for tool in tools]})
    return rows


# LLaMA-Factory's text templates that are reasoning templates, and those with efficient_eos
REASONING = ("qwen3", "deepseekr1", "glm4_moe", "glm4_7", "glmz1", "gpt_oss", "mimo", "mimo_v2", "minimax2",
             "seed_oss", "youtu", "hy3", "aeva")
EFFICIENT_EOS = ("glm4", "gemma2", "falcon", "bailing_v2", "breeze", "index", "solar")


def cases(data: str, vlm_dir: str | None = None) -> dict[str, dict]:
    base = {"dataset_dir": data, "max_samples": 50, "preprocessing_num_workers": 1}
    out: dict[str, dict] = {}

    def add(name, template, stage, dataset, cutoff, **more):
        out[name] = {"template": template, "stage": stage, "dataset": dataset, "cutoff_len": cutoff, **base, **more}

    for t in ("qwen", "llama3", "qwen3", "glm4", "mistral", "gemma", "llama2", "default", "deepseek3", "gpt_oss"):
        add(f"{t}/sft/alp_hist", t, "sft", "alp_hist", 512)
        add(f"{t}/sft/alp_hist/mask_history", t, "sft", "alp_hist", 512, mask_history=True)
        add(f"{t}/sft/alp_tools", t, "sft", "alp_tools", 512)
        add(f"{t}/sft/sg_syscol", t, "sft", "sg_syscol", 512)
        add(f"{t}/sft/sg_sysrole/mask_history", t, "sft", "sg_sysrole", 512, mask_history=True)
        add(f"{t}/sft/sg_odd", t, "sft", "sg_odd", 512)
        add(f"{t}/sft/oai_one", t, "sft", "oai_one", 1024)
        add(f"{t}/sft/oai_multi", t, "sft", "oai_multi", 2048)
        add(f"{t}/sft/oai_multi_lines", t, "sft", "oai_multi_lines", 2048)
        add(f"{t}/sft/alp_odd", t, "sft", "alp_odd", 512)
        add(f"{t}/pt/alp_hist", t, "pt", "alp_hist", 64)
        add(f"{t}/rm/alp_rank", t, "rm", "alp_rank", 256)
        add(f"{t}/rm/sg_rank_odd", t, "rm", "sg_rank_odd", 256)
        add(f"{t}/dpo/alp_rank", t, "dpo", "alp_rank", 128)
        add(f"{t}/kto/alp_kto", t, "kto", "alp_kto", 128)
    for t in REASONING + EFFICIENT_EOS:  # thoughts in history and last replies, system column, masks, defaults
        add(f"{t}/sft/sg_think", t, "sft", "sg_think", 512)
        add(f"{t}/sft/sg_think/mask_history", t, "sft", "sg_think", 512, mask_history=True)
        add(f"{t}/sft/sg_think/enable_thinking_false", t, "sft", "sg_think", 512, enable_thinking=False)
        add(f"{t}/sft/sg_think/train_on_prompt_default_system", t, "sft", "sg_think", 512, train_on_prompt=True,
            default_system="Be brief.")
        add(f"{t}/sft/alp_hist/default_system_mask_history", t, "sft", "alp_hist", 512, default_system="Be brief.",
            mask_history=True)
        add(f"{t}/sft/oai_one/enable_thinking_false", t, "sft", "oai_one", 1024, enable_thinking=False)
    for t in ("qwen", "llama3"):
        for tool_format in ("glm4", "llama3", "mistral", "qwen", "default", "ling", "minimax1"):
            add(f"{t}/sft/oai_one/tool_format_{tool_format}", t, "sft", "oai_one", 1024, tool_format=tool_format)
        add(f"{t}/sft/mix/interleave_skips", t, "sft", "alp_odd,sg_odd", 128, mix_strategy="interleave_over",
            interleave_probs="0.3,0.7")
        add(f"{t}/rm/mix/interleave_skips", t, "rm", "alp_rank,dpo_en_demo", 128, mix_strategy="interleave_under",
            interleave_probs="0.3,0.7")
        add(f"{t}/sft/mix/val_skips", t, "sft", "alp_odd,sg_odd", 128, val_size=0.3, do_eval=True)
        add(f"{t}/sft/alp_odd/val_count", t, "sft", "alp_odd", 128, val_size=5, do_eval=True)
        add(f"{t}/sft/alp_odd/val_packing", t, "sft", "alp_odd", 256, val_size=0.2, do_eval=True, packing=True)
        add(f"{t}/rm/alp_rank/val", t, "rm", "alp_rank", 128, val_size=0.2, do_eval=True)
        add(f"{t}/kto/mix/val", t, "kto", "alp_kto,kto_en_demo", 128, val_size=0.2, do_eval=True,
            mix_strategy="interleave_under", max_samples=20)
        add(f"{t}/sft/mix/num_samples_val", t, "sft", "alp_odd_ns,sg_odd", 128, val_size=0.2, do_eval=True, seed=5)
        add(f"{t}/sft/mix/split_val", t, "sft", "alp_odd_split,sg_odd", 128, val_size=3, do_eval=True)
        add(f"{t}/sft/mix/neat_packing_mask_history", t, "sft", "alp_hist,glaive_toolcall_en_demo", 256,
            neat_packing=True, mask_history=True)
        add(f"{t}/sft/mix/packing_batches_skips", t, "sft", "alp_odd,sg_odd,glaive_toolcall_en_demo", 256,
            packing=True, preprocessing_batch_size=9)
        add(f"{t}/sft/mix/neat_packing_workers_skips", t, "sft", "alp_odd,sg_odd,glaive_toolcall_en_demo", 256,
            neat_packing=True, preprocessing_num_workers=2, val_size=0.2, do_eval=True)
        add(f"{t}/kto/mix/workers_batches", t, "kto", "alp_kto,kto_en_demo", 128, preprocessing_num_workers=3,
            preprocessing_batch_size=5)
    return out


def main() -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory 0.9.5")
    parser.add_argument("--data", required=True, help="LLaMA-Factory's data folder (dataset_info.json and demo files)")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    opts, _ = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as folder:
        crafted = write_crafted(Path(opts.data), Path(folder) / "data")
        sweep_compat.cases = cases
        sys.argv = [sys.argv[0], "--incumbent", opts.incumbent, "--data", str(crafted), "--only", opts.only] + (
            ["--list"] if opts.list else [])
        return sweep_compat.main()


if __name__ == "__main__":
    sys.exit(main())
