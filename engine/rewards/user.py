"""User reward functions named ``path/to/file.py:function``.

:func:`check_user_reward` reads the file as text (``ast``) and never runs it: the board and the pre-flight checks
use it. :func:`load_user_reward` imports the file, which only the training (or "try it") subprocess does.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

from engine.errors import UserError

SIGNATURE = "def NAME(prompts, completions, **kwargs) -> list[float]"
PASSED = {"prompts", "completions", "completion_ids", "answer", "system", "tools", "trainer_state", "log_extra",
          "log_metric"}
"""Keyword arguments a reward receives (dataset columns answer/system/tools, TRL's completion_ids and hooks)."""


class RewardError(UserError):
    """A reward function that cannot be used as given: the message names the file, the function and the fix."""


def is_user_spec(name: str) -> bool:
    return ":" in name and name.split(":", 1)[0].endswith(".py")


def split_spec(spec: str) -> tuple[Path, str]:
    path, _, func = spec.strip().rpartition(":")
    if not path.endswith(".py") or not func.isidentifier():
        raise RewardError(f"Reward `{spec}` must look like `path/to/file.py:function_name`.")
    return Path(path).expanduser(), func


MAX_REWARD_FILE_BYTES = 16 << 20
"""The largest reward file read (bytes); a reward function's file is a few KB. A larger one (a sparse file of
gigabytes) was read whole by the check, in the board's process too."""


def read_reward_text(path: Path) -> str:
    """A reward file's text, read only as a regular file of at most :data:`MAX_REWARD_FILE_BYTES`.

    Raises:
        OSError: missing, unreadable or not a regular file.
        ValueError: larger than the bound (naming its size); UnicodeDecodeError: not UTF-8.
    """
    from engine.small_json import read_small

    return read_small(path, MAX_REWARD_FILE_BYTES).decode("utf-8")


def check_user_reward(spec: str) -> list[str]:
    """Problems found by reading the file (missing, syntax error, no such function, wrong signature); no import."""
    try:
        path, func = split_spec(spec)
    except RewardError as err:
        return [str(err)]
    if not path.is_file():
        if path.exists():
            return [f"Reward file `{path}` (in `reward_funcs: {spec}`) is not a regular file (a folder, pipe or "
                    "device); name the Python file that defines the function."]
        return [f"Reward file `{path}` (in `reward_funcs: {spec}`) does not exist; check the path (relative paths "
                f"start at `{Path.cwd()}`)."]
    try:
        tree = ast.parse(read_reward_text(path), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as err:
        line = getattr(err, "lineno", None)
        return [f"Reward file `{path}` does not parse{f' (line {line})' if line else ''}: "
                f"{getattr(err, 'msg', err)}. Fix the Python syntax."]
    except (MemoryError, RecursionError):  # Python's parser on an expression nested some 100,000 deep
        return [f"Reward file `{path}` does not parse: it nests an expression deeper than Python's parser goes. Fix "
                "the Python code."]
    except (OSError, ValueError) as err:  # no longer a regular file; larger than a reward file can be
        return [f"Reward file `{path}` cannot be read ({getattr(err, 'strerror', None) or err}); name the Python "
                "file that defines the function."]
    defined = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update({t.id: None for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom):
            defined.update({a.asname or a.name: None for a in node.names})
        elif isinstance(node, ast.Import):  # `import x` binds a module, never a function
            defined.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    if isinstance(defined.get(func), ast.Import):
        return [f"`{func}` in reward file `{path}` is a module it imports, not a function; write "
                f"`{SIGNATURE.replace('NAME', func)}` (the file was not run)."]
    if func not in defined:
        found = [name for name, node in defined.items() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return [f"Reward file `{path}` defines no function `{func}`"
                + (f" (it defines: {', '.join(found)})" if found else "") + f"; write `{SIGNATURE.replace('NAME', func)}`."]
    node = defined[func]
    if isinstance(node, ast.AsyncFunctionDef):
        return [f"Reward `{spec}` is `async def`; write a plain `def` (rewards are called synchronously here)."]
    if isinstance(node, ast.FunctionDef):
        problem = _signature_problem(spec, _ast_params(node.args))
        return [problem] if problem else []
    return []


def _ast_params(args: ast.arguments) -> list[tuple[str, str, bool]]:
    """(name, kind, has_default) per parameter, like inspect's kinds."""
    out = [(a.arg, "POSITIONAL_ONLY", False) for a in args.posonlyargs]
    out += [(a.arg, "POSITIONAL_OR_KEYWORD", False) for a in args.args]
    for i in range(len(args.defaults)):  # defaults belong to the last positional parameters
        name, kind, _ = out[len(out) - len(args.defaults) + i]
        out[len(out) - len(args.defaults) + i] = (name, kind, True)
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", True))
    out += [(a.arg, "KEYWORD_ONLY", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", True))
    return out


def _signature_problem(spec: str, params: list[tuple[str, str, bool]]) -> str | None:
    names = {name for name, kind, _ in params if kind not in ("VAR_POSITIONAL", "VAR_KEYWORD")}
    has_kwargs = any(kind == "VAR_KEYWORD" for _, kind, _ in params)
    fix = f"write `{SIGNATURE.replace('NAME', split_spec(spec)[1])}` (dataset columns arrive in kwargs)."
    for name, kind, has_default in params:
        if kind == "POSITIONAL_ONLY" and not has_default:
            return f"Reward `{spec}` has a positional-only parameter `{name}`, but rewards are called by keyword; {fix}"
        if kind in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY") and not has_default and name not in PASSED:
            return f"Reward `{spec}` needs a parameter `{name}` that is never passed; {fix}"
    if "completions" not in names and not has_kwargs:
        return f"Reward `{spec}` takes no `completions`, so it cannot see what it scores; {fix}"
    return None


def _params(func: Any) -> list[tuple[str, str, bool]]:
    sig = inspect.signature(func)
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty or p.kind.name.startswith("VAR"))
            for p in sig.parameters.values()]


def load_user_reward(spec: str) -> Any:
    """Import ``path/to/file.py`` and return its ``function``, checked for TRL's reward signature.

    Raises:
        RewardError: the file is missing or fails to import, the function is missing, not callable, async, or
            has a signature rewards cannot be called with.
    """
    path, func_name = split_spec(spec)
    if not path.is_file():
        raise RewardError(check_user_reward(spec)[0])
    from engine.rewards.guard import refuse_process_exit

    refuse_process_exit()  # before the file runs: an os._exit it binds or calls is refused too
    module_name = f"lf_user_reward_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as err:  # a user file can raise anything at import time, SystemExit included
        sys.modules.pop(module_name, None)
        if isinstance(err, KeyboardInterrupt):
            raise
        raise RewardError(f"Reward file `{path}` does not import: {type(err).__name__}: {err}"
                          f"{where_in(err, path)}. Fix the file (run `python {path}` to see the full error).") from None
    func = getattr(module, func_name, None)
    if func is None:
        found = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == module_name)
        raise RewardError(f"Reward file `{path}` defines no function `{func_name}`"
                          + (f" (it defines: {', '.join(found)})" if found else "")
                          + f"; write `{SIGNATURE.replace('NAME', func_name)}`.")
    if not callable(func):
        raise RewardError(f"`{spec}` is a {type(func).__name__}, not a function; "
                          f"write `{SIGNATURE.replace('NAME', func_name)}`.")
    if inspect.iscoroutinefunction(func):
        raise RewardError(f"Reward `{spec}` is `async def`; write a plain `def` (rewards are called synchronously).")
    try:
        problem = _signature_problem(spec, _params(func))
    except (TypeError, ValueError):
        problem = None  # builtins without a signature: called as they are
    if problem:
        raise RewardError(problem)
    return func


def where_in(err: BaseException, path: Path | None = None) -> str:
    """`` (file.py, line N)`` of the deepest frame of ``err`` in ``path`` (or the last frame), else ""."""
    frames = traceback.extract_tb(err.__traceback__)
    if isinstance(err, SyntaxError) and err.lineno:
        return f" ({Path(err.filename or '?').name}, line {err.lineno})"
    chosen = [f for f in frames if path is not None and Path(f.filename).resolve() == path.resolve()] or frames[-1:]
    return f" ({Path(chosen[-1].filename).name}, line {chosen[-1].lineno})" if chosen else ""


def keep_reward_code(specs: list[str], run_dir: str | Path) -> list[Path]:
    """Copy the files of the user rewards in ``specs`` into ``run_dir/reward_code/`` as ``STEM-SHA256[:12].py``
    (each written whole), so that the run keeps the code it trained with even after the file is edited (a resumed
    run adds the file again if it changed). Failures are logged, never fatal."""
    import hashlib
    import logging

    from engine.runs import REWARD_CODE, write_text_atomic

    kept = []
    folder = Path(run_dir) / REWARD_CODE
    for spec in specs:
        if not is_user_spec(spec):
            continue
        path = split_spec(spec)[0]
        try:
            text = read_reward_text(path)
            folder.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
            target = folder / f"{path.stem}-{digest}.py"
            write_text_atomic(target, text)
            kept.append(target)
        except (OSError, ValueError) as err:  # ValueError: outsized, not UTF-8
            logging.getLogger(__name__).warning("Could not keep a copy of reward file %s in the run folder: %s",
                                                path, err)
    return kept
