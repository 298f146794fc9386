"""Rewards for the RL stages (grpo, rloo): built-ins, user functions ``file.py:function``, and their guard.

``build_rewards(settings, template)`` turns ``reward_funcs`` into TRL reward callables (each a
:class:`GuardedReward`); ``check_rewards(settings)`` finds problems without importing any user code.
"""

from __future__ import annotations

from typing import Any

from engine.rewards.builtin import BUILTIN_REWARDS
from engine.rewards.guard import GuardedReward
from engine.rewards.user import RewardError, check_user_reward, is_user_spec, load_user_reward, split_spec
from engine.wording import counted


def reward_names(settings: Any) -> list[str]:
    """The entries of ``reward_funcs`` (comma separated text or a list), stripped, empty ones dropped."""
    raw = getattr(settings, "reward_funcs", None) or ""
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def reward_weights(settings: Any, count: int) -> list[float] | None:
    """``reward_weights`` as floats (None: every reward weighs 1); RewardError when they do not fit ``count``."""
    raw = getattr(settings, "reward_weights", None)
    if raw in (None, "", []):
        return None
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    try:
        weights = [float(str(w).strip()) for w in items if str(w).strip()]
    except ValueError:
        raise RewardError(f"`reward_weights: {raw}` must be numbers separated by commas, e.g. `1.0, 0.5`.") from None
    if len(weights) != count:
        raise RewardError(f"`reward_weights` has {counted(len(weights), 'value')} but there {'is' if count == 1 else 'are'} {counted(count, 'reward')} "
                          "(reward_funcs, then reward_model); give one weight per reward.")
    import math

    from engine.rewards.guard import LARGEST_WEIGHT

    wrong = [w for w in weights if not math.isfinite(w) or abs(w) > LARGEST_WEIGHT]
    if wrong:
        raise RewardError(f"`reward_weights` holds {wrong[0]:g}; weights beyond +-{LARGEST_WEIGHT:g} overflow the "
                          "float32 statistics of a group as rewards beyond 1e9 do. Use weights like 0.5 or 2.")
    return weights


def check_rewards(settings: Any) -> list[str]:
    """Problems in ``reward_funcs``/``reward_weights`` (unknown names, user files read as text; nothing imported)."""
    import re

    problems: list[str] = []
    names = reward_names(settings)
    for name in names:
        if is_user_spec(name):
            problems += check_user_reward(name)
        elif name not in BUILTIN_REWARDS:
            import difflib

            close = difflib.get_close_matches(name, list(BUILTIN_REWARDS), n=1)
            hint = f" Did you mean `{close[0]}`?" if close else ""
            problems.append(f"Unknown reward `{name}` in `reward_funcs`; use one of {', '.join(BUILTIN_REWARDS)}, "
                            f"or `path/to/file.py:function`.{hint}")
    if len(set(names)) != len(names):
        problems.append("`reward_funcs` names a reward twice; list each once (use reward_weights to weigh it more).")
    else:
        shown = [split_spec(name)[1] if is_user_spec(name) and not check_user_reward(name) else name for name in names]
        twice = sorted({name for name in shown if shown.count(name) > 1})
        if twice:
            problems.append(f"Two rewards in `reward_funcs` are both called `{twice[0]}`: their scores would be "
                            "logged and summed as one. Rename one of the functions.")
    if "format" in names:
        try:
            re.compile(getattr(settings, "reward_format", "") or "")
        except re.error as err:
            problems.append(f"`reward_format` is not a valid regular expression: {err}.")
    if getattr(settings, "reward_min_tokens", 0) > getattr(settings, "reward_max_tokens", 1):
        problems.append("`reward_min_tokens` is above `reward_max_tokens`; swap them.")
    try:
        reward_weights(settings, len(names) + bool(getattr(settings, "reward_model", None)))
    except RewardError as err:
        problems.append(str(err))
    return problems


def build_rewards(settings: Any, template: Any = None) -> list[GuardedReward]:
    """The reward callables of ``reward_funcs``, in order; imports user files (training subprocess only)."""
    out = []
    for name in reward_names(settings):
        if is_user_spec(name):
            func = load_user_reward(name)
            out.append(GuardedReward(func, split_spec(name)[1], name))
        elif name in BUILTIN_REWARDS:
            out.append(GuardedReward(BUILTIN_REWARDS[name](settings, template), name, name))
        else:
            raise RewardError(check_rewards(settings)[0])
    return out


__all__ = ["BUILTIN_REWARDS", "GuardedReward", "RewardError", "build_rewards", "check_rewards", "check_user_reward",
           "load_user_reward", "reward_names", "reward_weights"]
