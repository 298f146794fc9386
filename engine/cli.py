"""`lf-engine`: train, evaluate, chat, export and serve from one YAML config (LLaMA-Factory keys).

User errors (a bad key, a missing file, a dataset that does not fit the stage) print one clear message and exit
with status 2, without a Python traceback; set LF_DEBUG=1 or pass --debug to see tracebacks.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import time
from pathlib import Path

from engine import __version__, collector
from engine.cli_args import check_rewards_args, demo_target, lead_key
from engine.errors import AbortRequested, UserError
from engine.log_setup import quiet_transformers_logs, setup_logging
from engine.terminal_text import shown

EXIT_USER_ERROR = 2
EXIT_ABORTED = 130

logger = logging.getLogger("engine")


def _config_arg(p: argparse.ArgumentParser, example: str) -> None:
    """The config argument and its key=value overrides; ``example``: an override this command makes use of."""
    p.add_argument("config", help="YAML config file with LLaMA-Factory keys (- reads it from standard input)")
    p.add_argument("overrides", nargs="*", default=[], metavar="key=value",
                   help=f"override config keys, e.g. {example}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lf-engine",
        description="Fine-tune, evaluate, chat with and export language models from one YAML config.",
        epilog="Examples:\n  lf-engine train examples/sft_lora_demo.yaml\n"
        "  lf-engine chat examples/chat_demo.yaml --query 'Who are you?'\n  lf-engine export examples/export_demo.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lf-engine {__version__}")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for every error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train as the config says (stages pt, sft, rm, dpo, kto, grpo, rloo)",
                       description="Train a model. Outputs (adapter or model, checkpoints, events.jsonl, run.json, "
                       "loss.png) go to output_dir.")
    _config_arg(p, "learning_rate=1e-4")

    p = sub.add_parser("eval", help="evaluate (loss, perplexity) or predict (BLEU/ROUGE) without training",
                       description="Evaluate: do_eval gives eval loss and perplexity; do_predict with "
                       "predict_with_generate writes generated_predictions.jsonl and BLEU/ROUGE scores.")
    _config_arg(p, "max_samples=50")

    p = sub.add_parser("chat", help="chat in the terminal, or answer one --query and exit",
                       description="Load the model (and adapters) and chat, streaming the reply. With --query the "
                       "reply alone is printed on stdout.")
    _config_arg(p, "max_new_tokens=256")
    p.add_argument("--query", help="answer this one message, print the reply and exit")
    p.add_argument("--system", help="system prompt")
    for kind, taken in (("image", "images"), ("video", "video"), ("audio", "audio")):
        p.add_argument(f"--{kind}", action="append", default=[], metavar="PATH",
                       help=f"{kind} file for --query (repeatable; models that take {taken})")

    p = sub.add_parser("export", help="merge adapters into a standalone model in export_dir",
                       description="Merge LoRA adapters into the base model and save it (sharded by export_size) "
                       "with the tokenizer and the template as its chat template; then reload it to verify.")
    _config_arg(p, "export_dir=merged")

    p = sub.add_parser("api", help="serve an OpenAI-compatible chat API",
                       description="Serve POST /v1/chat/completions (streaming or not), GET /v1/models, GET /health.")
    _config_arg(p, "max_new_tokens=256")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on, IPv4 or IPv6 (default: 127.0.0.1, this machine only; "
                   "another address without --api-key logs a warning)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free port, written to "
                   "run.json)")
    p.add_argument("--run-dir", help="run folder for run.json/events.jsonl (default: the config's folder if it "
                   "holds run.json)")
    p.add_argument("--api-key", help="require `Authorization: Bearer KEY` on every route but /health (default: "
                   "$LF_ENGINE_API_KEY or $API_KEY; prefer the variable, a command line is visible to other users)")
    p.add_argument("--board-lock", help="stop once no process has held this lock file for --board-grace seconds "
                   "(lf-board passes its workspace's .board.lock, so its chat workers end when it is closed for good)")
    p.add_argument("--board-grace", type=float, default=600.0,
                   help="seconds without a board before --board-lock stops the server (default 600)")

    p = sub.add_parser("rewards", help="score a few sampled completions with the config's GRPO/RLOO rewards",
                       description="Sample completions of the model on the first dataset prompts and score them "
                       "with reward_funcs / reward_model, without training (the board's \"try it\").")
    _config_arg(p, "num_generations=4")
    p.add_argument("--prompts", type=int, default=3, help="dataset prompts to sample from (default 3)")
    p.add_argument("--samples", type=int, help="completions per prompt, 1-64 (default num_generations, at most 8)")
    p.add_argument("--out", help="also write the result as JSON to this file")

    p = sub.add_parser("data", help="tokenize the config's datasets as training will, without the model, and report",
                       description="Tokenize the datasets of a training config as `train` would (into the "
                       "tokenized-data cache, or tokenized_path when set), without loading the model, and report rows "
                       "kept, cut and dropped and tokens trained on. `train` with the same config then loads the "
                       "result instead of tokenizing; asking again about data already tokenized takes a moment. A "
                       "`streaming: true` config has nothing to tokenize ahead: its rows are tokenized while training.")
    _config_arg(p, "cutoff_len=1024")

    p = sub.add_parser("check", help="validate a config and its files without running anything heavy",
                       description="Report every problem in a config (keys, values, paths, datasets, memory).")
    _config_arg(p, "learning_rate=1e-4")
    p.add_argument("--for", dest="purpose", default=None, choices=["train", "eval", "export", "chat", "api"],
                   help="what the config is for (default: read from it: `export_dir` -> export, `do_eval` or "
                        "`do_predict` without `do_train: true` -> eval, `infer_backend` without `dataset` -> chat, "
                        "else train)")

    sub.add_parser("env", help="show versions, devices and memory", description="Print the environment report.")

    p = sub.add_parser("cache", help="list the tokenized-data cache, or prune / clear it",
                       description="List the tokenized-data cache ($LF_ENGINE_CACHE/tokenized): size, last use and "
                       "the data, tokenizer and template of each entry. It is kept under $LF_ENGINE_CACHE_MAX_GB "
                       "(default 20; 0 or off: no cap) by evicting the least recently used entries after each "
                       "write. Entries a running process uses are never removed.")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--prune", action="store_true", help="evict least recently used entries down to the cap now")
    action.add_argument("--clear", action="store_true", help="remove every entry no running process uses")
    p.add_argument("--max-gb", help="with --prune: cap for this prune in GB (default $LF_ENGINE_CACHE_MAX_GB)")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")

    p = sub.add_parser("expand", help="LLaMA Pro: add zero-output decoder blocks to a model (for use_llama_pro)",
                       description="Write MODEL with --num-expand extra blocks (copies whose output projections are "
                                   "zero) to OUTPUT, as LLaMA-Factory's scripts/llama_pro.py; then train it with "
                                   "`finetuning_type: freeze`, `use_llama_pro: true`, `freeze_trainable_layers: N`.")
    p.add_argument("model", metavar="MODEL", help="a model folder or hub id")
    p.add_argument("output", metavar="OUTPUT", help="a new folder for the expanded model")
    p.add_argument("--num-expand", type=int, required=True, help="blocks to add (a divisor of the layer count)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code")

    p = sub.add_parser("demo", help="build the built-in demo model (offline, deterministic)",
                       description="Build the tiny demo model used by `model_name_or_path: demo`.")
    p.add_argument("--target", help="folder to build into (default: the cache used by `demo`)")
    return parser


def _load(args: argparse.Namespace, purpose: str):
    from engine.config import ConfigError, load_config
    from engine.preflight import check

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as err:
        if err.partial is None or any(problem.startswith("`stage:") for problem in err.problems):
            raise  # (without a valid stage the checks would judge the config as the default stage's)
        named = {lead_key(problem) for problem in err.problems} - {None}
        # a key whose value was refused is at its default in the partial config: what the checks say of that default
        # (`model_name_or_path` is empty, after "must be text, not a mapping") would only repeat the problem, wrongly
        later = [problem for problem in check(err.partial, purpose) if lead_key(problem) not in named]
        raise ConfigError(err.problems + later) from None  # every problem, in one message
    from engine.import_guard import skip_bitsandbytes_unless_needed

    skip_bitsandbytes_unless_needed(cfg)  # before the checks import PEFT
    from engine.credentials import export_secrets

    export_secrets(cfg.secrets)  # the hub libraries read them from the environment
    for note in cfg.notes:
        logger.info(note)
    from engine.data.hub import choose_hubs

    choose_hubs(cfg.methods)  # before the dataset checks read hub entries
    problems = check(cfg, purpose)
    if problems:
        raise ConfigError(problems)
    return cfg


def _run_dir_of(args: argparse.Namespace, kind: str) -> Path | None:
    """The run folder a ``kind`` job records itself in: ``--run-dir``, or the config's folder when it is a run
    folder of that kind (the board's). A config taken from another job's run folder (a training run's config.yaml
    given to export) records nothing there: that run's run.json and events stay its own."""
    if getattr(args, "run_dir", None):
        return Path(args.run_dir)
    if args.config == "-":  # read from stdin: no folder to infer
        return None
    parent = Path(args.config).resolve().parent
    if not (parent / "run.json").is_file():
        return None
    from engine.train.output_dir import recorded_kind

    recorded = recorded_kind(parent)
    if recorded is not None and recorded[0] != kind:
        logger.info("%s is the folder of a %s run; this %s job keeps no run record there.", parent, recorded[0], kind)
        return None
    return parent


def cmd_train(args: argparse.Namespace, kind: str = "train") -> int:
    cfg = _load(args, "train" if kind == "train" else "eval")  # first: it decides what may be imported
    from engine.lifecycle import JobContext
    from engine.train.workflow import run_eval, run_train

    collector.settle()  # after the imports (a Ray driver, too, lives as long as the run)
    if kind == "eval" and cfg.train.do_predict:
        kind = "predict"
    if kind == "train":
        from engine.train.parallel import ray as ray_launcher

        if ray_launcher.use_ray(cfg):  # this process becomes the Ray driver; the workers run the job
            return ray_launcher.launch(cfg)
    from engine.train.output_dir import resumes, trained_outputs

    recorded = kind  # LLaMA-Factory evaluates with `train` and do_train false: a job that trains nothing is no
    if kind == "train" and not cfg.train.do_train:  # new training run (it must not empty a run's events.jsonl)
        recorded = "predict" if cfg.train.do_predict else "eval"
    fresh = recorded == "train" and not resumes(cfg)
    if fresh and trained_outputs(cfg.train.output_dir):  # an earlier run there, which this one replaces (overwrite)
        from engine.models.loader import resolve_model_path

        # the model first (the hub cache, or a download): one that cannot be had (a hub id with no network) stops
        # the job before it replaces that run's records and checkpoints; elsewhere the run records the error itself
        resolve_model_path(cfg.model.model_name_or_path, cfg.model.cache_dir, cfg.model.model_revision)
    with JobContext(cfg.train.output_dir, recorded, cfg.to_yaml(minimal=False), fresh=fresh) as ctx:
        metrics = (run_train if kind == "train" else run_eval)(cfg, ctx)
    if ctx.status == "aborted":
        logger.warning("Stopped on request; a checkpoint was saved in %s.", cfg.train.output_dir)
        return EXIT_ABORTED
    if os.environ.get("RANK", "0") != "0":  # rank 0 reports for the run
        return 0
    shown = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
    if shown:
        logger.info("Results: %s", ", ".join(f"{k}={v:.4g}" for k, v in shown.items()))
    logger.info("Done. Outputs in %s", cfg.train.output_dir)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    cfg = _load(args, "chat")
    from engine.infer.cli_chat import interactive_chat, single_query

    collector.settle()
    media = {"images": args.image, "videos": args.video, "audios": args.audio}
    if any(media.values()) and args.query is None:
        raise UserError("--image, --video and --audio go with --query TEXT (one question about the files).")
    if args.query is not None and not args.query.strip() and not any(media.values()):
        raise UserError("--query is empty; give the message to answer, e.g. --query 'Who are you?' (or leave --query "
                        "out to chat in the terminal).")
    if any(media.values()):
        from engine.multimodal.chat import refuse_before_loading

        refuse_before_loading(cfg, media)  # not after the model's load
    if args.query is not None:
        reply = single_query(cfg, args.query, system=args.system, media=media if any(media.values()) else None)
        print(shown(reply) if sys.stdout.isatty() else reply)  # a reply's escapes must not drive the terminal
        return 0
    interactive_chat(cfg, system=args.system)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    cfg = _load(args, "export")
    from engine.export import run_export
    from engine.lifecycle import JobContext

    collector.settle()  # with the collector on, the merged model's garbage is freed before the reload check
    run_dir = _run_dir_of(args, "export")
    if run_dir is None:  # (a run folder's JobContext says the same for a board's export)
        from engine.diskfull import storage_error

        try:
            result = run_export(cfg)
        except Exception as err:  # torch's and safetensors' write failures are not all OSErrors
            storage = storage_error(err, cfg.export.export_dir, then="export again")
            if storage is None:
                raise
            raise storage from err
    else:
        with JobContext(run_dir, "export") as ctx:
            result = run_export(cfg, run_dir=str(run_dir))
            ctx.metrics.update({k: v for k, v in result.items() if isinstance(v, (int, float, str, bool))})
    from engine.export import summary_lines

    for line in summary_lines(result):
        print(line, flush=True)
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    if not args.board_grace > 0:
        raise UserError(f"--board-grace {args.board_grace:g} must be a positive number of seconds.")
    if not 0 <= args.port <= 65535:  # before the model loads (socket.bind raised an OverflowError after it)
        raise UserError(f"--port {args.port} is not a TCP port; give 1 to 65535 (0 picks a free one).")
    from engine.infer.server import bind_server, serve

    bound = bind_server(args.host, args.port)  # a taken port is refused now, not after the checks and the load
    try:
        cfg = _load(args, "api")
        collector.settle()
        run_dir = _run_dir_of(args, "chat")
    except BaseException:
        bound.server_close()
        raise
    serve(cfg, args.host, args.port, run_dir=str(run_dir) if run_dir else None, api_key=args.api_key or None,
          board_lock=args.board_lock or None, board_grace=args.board_grace, bound=bound)
    return 0


def cmd_rewards(args: argparse.Namespace) -> int:
    import json

    from engine.config import ConfigError

    check_rewards_args(args)  # before the model loads and the sampling: both take a while
    cfg = _load(args, "chat")
    from engine.rewards.trial import format_table, try_rewards
    from engine.train.rl_checks import check_rl

    collector.settle()
    problems = check_rl(cfg)
    if problems:
        raise ConfigError(problems)
    result = try_rewards(cfg, prompts=args.prompts, samples=args.samples)
    if args.out:
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    print(format_table(result))
    return 0


def _check_purpose(args: argparse.Namespace) -> str:
    """``--for``, or what the config's own keys say it is for (as the command LLaMA-Factory users would run it with:
    a merge config names `export_dir`, an evaluation or prediction config sets `do_eval`/`do_predict` and no
    `do_train`)."""
    if args.purpose:
        return args.purpose
    from engine.config import ConfigError, parse_overrides, read_yaml

    text = None
    if str(args.config) == "-":  # standard input can be read once: keep its text for the check that follows
        import io

        text = sys.stdin.read()
        sys.stdin = io.StringIO(text)
    try:
        mapping = {**read_yaml(args.config, warn=False), **parse_overrides(args.overrides or [])}
    except ConfigError:
        return "train"  # the check itself reports the problem (an alias bomb among them, before any value is read)
    finally:
        if text is not None:
            sys.stdin = io.StringIO(text)

    def on(key: str) -> bool:
        return str(mapping.get(key)).strip().lower() in ("true", "1", "yes", "on")

    if mapping.get("export_dir") and not on("do_train"):
        return "export"
    if (on("do_eval") or on("do_predict")) and not on("do_train"):
        return "eval"
    if mapping.get("infer_backend") and not mapping.get("dataset"):
        return "chat"  # LLaMA-Factory's inference configs
    return "train"


def cmd_check(args: argparse.Namespace) -> int:
    from engine.config import ConfigError

    chosen = bool(args.purpose)
    args.purpose = _check_purpose(args)
    try:
        cfg = _load(args, args.purpose)
    except ConfigError as err:
        if chosen or not (str(args.config) == "-" or Path(args.config).is_file()):  # no keys suggested a purpose
            raise
        note = (f"(Checked for `{args.purpose}`, as the config's keys suggest; add `--for train`, `eval`, `export`, "
                "`chat` or `api` to check it for another command.)")
        raise ConfigError([*err.problems[:-1], f"{err.problems[-1]} {note}" if err.problems else note]) from None
    if args.purpose in ("train", "eval"):
        what = f"stage {cfg.finetuning.stage}, {cfg.finetuning.finetuning_type}, model {cfg.model.model_name_or_path}"
    else:  # chat, export, api: no stage or method, but the model and its adapters
        adapters = cfg.model.adapter_name_or_path
        what = f"model {cfg.model.model_name_or_path}" + (f", adapters {adapters}" if adapters else "")
    name = "the config from standard input" if args.config == "-" else args.config
    print(shown(f"OK: {name} is valid for `{args.purpose}` ({what}); `--for` checks it for another command."))
    if args.purpose == "train":
        from engine.train.output_dir import describe_resume

        resume = describe_resume(cfg)
        if resume:
            print(shown(resume))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from engine.config import ConfigError, load_config
    from engine.prepare_data import prepare, quick_report

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError:
        cfg = None  # the full load below reports every problem, pre-flight checks included
    if cfg is not None and not cfg.data.overwrite_cache:
        lines = quick_report(cfg)  # from the files alone: no tokenizer, no torch
        if lines:
            print(shown("\n".join(lines)))
            return 0
    quiet_transformers_logs()
    cfg = _load(args, "data")
    print(shown("\n".join(prepare(cfg))))
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    from engine.devices import environment_report, format_environment_report

    print(format_environment_report(environment_report()))
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from engine.data.cache import cache_root
    from engine.data.cache_prune import run_command

    if args.max_gb is not None and not args.prune:
        raise UserError("--max-gb goes with --prune (e.g. `lf-engine cache --prune --max-gb 5`).")
    action = "prune" if args.prune else "clear" if args.clear else "list"
    print(run_command(cache_root(), action, max_gb=args.max_gb, as_json=args.json))
    return 0


def cmd_expand(args: argparse.Namespace) -> int:
    from engine.models.block_expansion import expand_blocks

    collector.settle()
    path = expand_blocks(args.model, args.output, args.num_expand, args.trust_remote_code)
    print(f"{path}\nTrain it with: model_name_or_path: {path}, finetuning_type: freeze, use_llama_pro: true, "
          f"freeze_trainable_layers: {args.num_expand}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from engine.demo import build_demo_model, ensure_demo_model

    if not args.target:
        print(ensure_demo_model())
        return 0
    target = demo_target(args.target)  # before the build's half a minute, not after it
    try:
        path = build_demo_model(target)
    except OSError as exc:
        from engine.write_denied import write_error

        raise (write_error(exc, target) or exc) from None
    print(path)
    return 0


COMMANDS = {
    "train": cmd_train,
    "eval": lambda a: cmd_train(a, kind="eval"),
    "chat": cmd_chat,
    "export": cmd_export,
    "api": cmd_api,
    "rewards": cmd_rewards,
    "check": cmd_check,
    "data": cmd_data,
    "env": cmd_env,
    "cache": cmd_cache,
    "expand": cmd_expand,
    "demo": cmd_demo,
}


def _key_hint(args: argparse.Namespace, stray: list[str]) -> str:
    """For `--learning_rate 1e-4` (transformers' and LLaMA-Factory's command-line style): how config keys are given
    here."""
    dashed = [item[2:].split("=", 1)[0] for item in stray if item.startswith("--") and len(item) > 2]
    if not dashed or not hasattr(args, "overrides"):
        return ""
    from engine.config.loader import all_keys

    options = f"`lf-engine {args.command} --help` lists the options"
    key = next((name for name in dashed if name in all_keys()), None)
    if key is None:
        return f" ({options})"
    return f" (config keys follow the config file as key=value, e.g. `{key}=...`; {options})"


def main(argv: list[str] | None = None) -> int:
    # Before torch loads: put large CPU tensors on page-aligned blocks (on the reference workload ~12 % less peak
    # RSS), without transparent huge pages (their compaction stalled the first step 2-3 s),
    # and keep freed memory in the process, so every step does not page-fault its tensors in again (~30 % of a
    # long step on the reference workload; see engine.allocator)
    from engine.allocator import align_large_blocks, keep_freed_memory

    align_large_blocks()
    keep_freed_memory()
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    stray = [item for item in unknown if item.startswith("-") or "=" not in item]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}{_key_hint(args, stray)}")
    if unknown:  # key=value overrides written after an option (`check CONFIG --for export key=value`)
        if not hasattr(args, "overrides"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.overrides = list(args.overrides) + unknown
    if not args.command:
        parser.print_help()
        return EXIT_USER_ERROR
    debug = args.debug or os.environ.get("LF_DEBUG", "") not in ("", "0")
    setup_logging(debug, quiet_transformers=args.command != "data")  # `data` may need no transformers at all
    try:
        return COMMANDS[args.command](args)
    except UserError as err:
        if debug:
            raise
        _print_error(err)
        return getattr(err, "exit_code", EXIT_USER_ERROR)
    except (AbortRequested, KeyboardInterrupt):
        print("stopped.", file=sys.stderr)
        return EXIT_ABORTED
    except OSError as err:
        if err.errno != errno.ENAMETOOLONG or debug:
            raise
        name = str(err.filename or "")
        shown = name if len(name) <= 120 else f"{name[:60]}…{name[-40:]} ({len(name)} characters)"
        _print_error(UserError(f"A file or folder name is too long for this system: {shown}. Shorten the path in "
                               "the config or the dataset (each name at most 255 bytes, a path at most 4096)."))
        return EXIT_USER_ERROR


PEER_REPORT_WAIT = 30.0
"""Seconds a torchrun process other than its node's first waits before printing a config's problems itself."""


def _print_error(err: Exception) -> None:
    """``error: ...`` on stderr. In a multi-process run (torchrun) a config's problems, the same in every process,
    are printed by each node's first process; the others wait (torchrun ends them once that one has exited with
    the error) and print them only if they are still running after :data:`PEER_REPORT_WAIT` seconds. Another
    process's own error names its rank."""
    from engine.config import ConfigError
    from engine.ranks import world_size

    rank = os.environ.get("RANK", "0")
    if rank != "0" and world_size() > 1:
        if isinstance(err, ConfigError) and os.environ.get("LOCAL_RANK", rank) == "0":
            print(f"error: {shown(str(err))}", file=sys.stderr)
            return
        if isinstance(err, ConfigError):
            time.sleep(PEER_REPORT_WAIT)
        print(f"error (rank {rank}): {shown(str(err))}", file=sys.stderr)
        return
    print(f"error: {shown(str(err))}", file=sys.stderr)


def entry() -> int:
    """The ``lf-engine`` and ``python -m engine`` entry point: :func:`main` with Python's cyclic collector paused
    while the command imports its libraries (``engine.collector``; the command settles it once its long-lived
    objects exist) and finished at its end, so that shutdown does not scan the whole heap again."""
    return collector.run_command(main)


if __name__ == "__main__":
    raise SystemExit(entry())
