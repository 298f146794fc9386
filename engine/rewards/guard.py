"""Call a reward function safely: check what it returns, and survive a reward that fails on some completions."""

from __future__ import annotations

import inspect
import logging
import math
import numbers
import os
from typing import Any

from engine.errors import UserError
from engine.rewards.user import RewardError, where_in

logger = logging.getLogger(__name__)

HOOKS = ("trainer_state", "log_extra", "log_metric")

_inside = 0  # how many reward calls of the user's code are under way (the training loop's thread)


def user_code_running() -> bool:
    """Whether a reward function is being called right now: a stop request (SIGTERM) cannot wait for it to return,
    since it may never return (see :meth:`engine.lifecycle.JobContext._on_signal`)."""
    return _inside > 0


LARGEST = 1e9
"""The largest reward magnitude taken: beyond it TRL's float32 mean and spread of a group overflow (a spread of
1e20-sized rewards is inf, every advantage then 0 or NaN), so the run would silently learn nothing."""


LARGEST_WEIGHT = 1e6
"""The largest ``reward_weights`` magnitude: a weighted reward stays within 1e15, whose square float32 still holds."""


class ProcessExit(SystemExit):
    """``os._exit`` called by user code in a run: refused (it would end the run with nothing recorded)."""

    def __str__(self) -> str:
        return f"os._exit({self.code}) is refused while rewards run: a run ends by returning, and records how it ended"


_real_exit = os._exit
_owner = 0


def _refused_exit(code: int = 0) -> None:
    """``os._exit`` (and ``posix._exit``) in a process running user rewards: raises :class:`ProcessExit` in the
    calling thread instead of ending the process with nothing recorded; a child process exits as asked."""
    if os.getpid() != _owner:
        _real_exit(code)
    raise ProcessExit(code)


def refuse_process_exit() -> None:
    """From now on, ``os._exit`` in this process raises instead (installed before any user reward file is imported,
    so `from os import _exit` binds this too; a thread the reward starts gets the exception, the run goes on)."""
    global _owner
    import posix

    _owner = os.getpid()
    os._exit = posix._exit = _refused_exit


def _masking(hook: Any) -> Any:
    """TRL's ``log_metric`` / ``log_extra`` with secret values masked in the text they are given (it lands in
    trainer_state.json and the checkpoints, which the log masking does not reach)."""
    from engine.credentials import redact

    def clean(value: Any) -> Any:
        if isinstance(value, list):
            return [clean(item) for item in value]
        return redact(value) if isinstance(value, str) else value

    def masked(*args: Any, **kwargs: Any) -> Any:
        return hook(*map(clean, args), **{key: clean(value) for key, value in kwargs.items()})

    return masked


def _call(func: Any, kwargs: dict[str, Any]) -> Any:
    global _inside
    _inside += 1
    refuse_process_exit()  # (a built-in reward imports no user file)
    try:
        return func(**kwargs)
    finally:
        _inside -= 1


class GuardedReward:
    """A reward function that TRL calls as ``f(prompts, completions, **kwargs)``.

    - The result must hold one number (or None: not applicable) per completion; anything else is a
      :class:`RewardError` naming the function, since training on it would be wrong.
    - When the call raises, the completions are scored one at a time: each one that raises gets 0.0, is counted
      (``errors``, and the metric ``rewards/NAME/errors`` per step) and logged. When every completion raises the
      function itself is broken: a :class:`RewardError` with the exception and its line stops the run.
    """

    def __init__(self, func: Any, name: str, origin: str):
        self.func = func
        self.__name__ = name
        self.origin = origin
        self.errors = 0
        self.calls = 0
        self.trial = False  # scoring samples for "try it" (no run to resume)
        try:
            params = inspect.signature(func).parameters.values()
            self.accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
            self.accepted = {p.name for p in inspect.signature(func).parameters.values()}
        except (TypeError, ValueError):
            self.accepts_all, self.accepted = True, set()

    def _kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = {**kwargs, **{name: _masking(kwargs[name]) for name in ("log_metric", "log_extra")
                               if callable(kwargs.get(name))}}
        return kwargs if self.accepts_all else {k: v for k, v in kwargs.items() if k in self.accepted}

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list:
        size = len(completions)
        self.calls += 1
        try:
            result = _call(self.func, self._kwargs({"prompts": prompts, "completions": completions, **kwargs}))
        except UserError:
            raise
        except SystemExit as err:
            raise self._exited(err) from None
        except KeyboardInterrupt as err:
            raise self._interrupted(err) from None
        except Exception as err:  # the user's code: score one completion at a time to find the culprits
            logger.debug("Reward %s raised on a batch (%s); scoring one completion at a time.", self.__name__, err)
            result = self._one_by_one(prompts, completions, kwargs, size)
        return self._checked(result, size)

    def _one_by_one(self, prompts: list, completions: list, kwargs: dict[str, Any], size: int) -> list:
        out: list[float | None] = []
        failures: list[tuple[int, BaseException]] = []
        for i in range(size):
            row = {k: (v[i:i + 1] if isinstance(v, (list, tuple)) and len(v) == size and k not in HOOKS else v)
                   for k, v in kwargs.items()}
            try:
                value = self._checked(_call(self.func, self._kwargs(
                    {"prompts": prompts[i:i + 1], "completions": completions[i:i + 1], **row})), 1)[0]
            except UserError:
                raise
            except SystemExit as err:
                raise self._exited(err) from None
            except KeyboardInterrupt as err:
                raise self._interrupted(err) from None
            except Exception as err:
                failures.append((i, err))
                value = 0.0
            out.append(value)
        if not failures:  # it failed on the batch only (a batch limit, a flaky service): the single scores stand
            logger.warning("Reward %s raised on a batch of %d but on none of its completions alone; they were scored "
                           "one at a time.", self.__name__, size)
            return out
        if len(failures) == size:
            err = failures[0][1]
            raise RewardError(f"Reward `{self.origin}` raised on every completion: {type(err).__name__}: {err}"
                              f"{where_in(err)}. {self._advice()}")
        self.errors += len(failures)
        i, err = failures[0]
        logger.warning("Reward %s raised on %d of %d completions (scored 0.0; %d so far), e.g. %s: %s%s on %r",
                       self.__name__, len(failures), size, self.errors, type(err).__name__, err, where_in(err),
                       str(completions[i])[:80])
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"rewards/{self.__name__}/errors", float(len(failures)))
        return out

    def _advice(self) -> str:
        """What to do about a reward that failed on a whole batch."""
        if ":" not in self.origin:
            return ("This built-in reward should never fail: please report it with the completion that made it "
                    "fail; meanwhile remove it from reward_funcs.")
        text = "Fix the function"
        if not self.trial:
            text += " (call it on a few strings first, or use `lf-engine rewards CONFIG` / the board's \"try it\")"
        if self.calls > 1 and not self.trial:  # it had worked on earlier batches: there may be a checkpoint
            text += ", then resume the run from its last checkpoint (`resume_from_checkpoint: true`)"
        return text + "."

    def _interrupted(self, err: KeyboardInterrupt) -> BaseException:
        """A KeyboardInterrupt out of the reward: the user's Ctrl+C where Python's own SIGINT handler is in place
        (raised again), else raised by the reward itself (a run's SIGINT handler stops it with AbortRequested)."""
        import signal

        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            return err
        return RewardError(f"Reward `{self.origin}` raised KeyboardInterrupt{where_in(err)}; a reward returns its "
                           "scores (Abort or Ctrl+C stop a run).")

    def _exited(self, err: SystemExit) -> RewardError:
        call = "os._exit" if isinstance(err, ProcessExit) else "sys.exit"
        where = where_in(err)
        if isinstance(err, ProcessExit):  # the line that called it, not this module's stand-in
            import traceback

            frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename != __file__]
            where = f" ({os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
        return RewardError(f"Reward `{self.origin}` called {call}({err.code!r}){where}; a reward returns its "
                           "scores and never exits the process.")

    def _checked(self, result: Any, size: int) -> list:
        if hasattr(result, "tolist") and not isinstance(result, (list, tuple)):
            result = result.tolist()
        if isinstance(result, (str, bytes, dict)) or not isinstance(result, (list, tuple)):
            raise RewardError(f"Reward `{self.origin}` returned a {type(result).__name__}; return a list with one "
                              f"number (or None) per completion ({size} here).")
        if len(result) != size:
            raise RewardError(f"Reward `{self.origin}` returned {len(result)} values for {size} completions; return "
                              "exactly one number (or None) per completion, in order.")
        out: list[float | None] = []
        for value in result:
            if value is None:
                out.append(None)
            elif isinstance(value, numbers.Real):
                try:
                    value = float(value)
                except OverflowError:  # an int beyond any float
                    raise RewardError(f"Reward `{self.origin}` returned an integer of {len(str(abs(int(value))))} "
                                      f"digits for a completion; rewards beyond +-{LARGEST:g} overflow the float32 "
                                      "statistics of a group. Scale the reward down, e.g. to [-10, 10].") from None
                if math.isinf(value):
                    raise RewardError(f"Reward `{self.origin}` returned {value} for a completion; return finite numbers "
                                      "(None, or NaN, for a completion the reward does not apply to).")
                if abs(value) > LARGEST:
                    raise RewardError(f"Reward `{self.origin}` returned {value:g} for a completion; rewards beyond "
                                      f"+-{LARGEST:g} overflow the float32 statistics of a group (every advantage "
                                      "becomes 0, so nothing is learned). Scale the reward down, e.g. to [-10, 10].")
                out.append(None if math.isnan(value) else value)
            else:
                raise RewardError(f"Reward `{self.origin}` returned {value!r} ({type(value).__name__}) for a "
                                  "completion; each value must be a number or None.")
        return out
