"""The GRPO/RLOO part of the Train tab: rewards (built-ins, weights, a reward written in a code box), "try it",
and the live reward, KL and completion-length charts with a table of recent completions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from app import reward_view
from app.context import Board
from app.i18n import L, t
from app.markup import SafeMarkdown
from app.widgets import make_widget
from engine.rewards.builtin import BUILTIN_REWARDS

RL_KEYS = [
    "reward_funcs", "reward_weights", "reward_model", "num_generations", "max_completion_length", "temperature",
    "beta", "loss_type", "reward_min_tokens", "reward_max_tokens", "reward_format", "log_completions_steps",
]
PER_ROW = 4


@dataclass
class RewardsSection:
    """The reward settings (their config widgets live in the Train tab's ``fields``)."""

    box: gr.Accordion
    builtins: gr.CheckboxGroup
    code: gr.Code
    save_btn: gr.Button
    try_btn: gr.Button
    stop_btn: gr.Button
    message: gr.Markdown
    try_table: gr.Dataframe


@dataclass
class RewardsLive:
    """Charts and the completions table shown while an RL run is watched."""

    box: gr.Group
    reward_plot: gr.LinePlot
    kl_plot: gr.LinePlot
    length_plot: gr.LinePlot
    completions: gr.Dataframe
    seen: gr.State
    timer: gr.Timer


def is_rl(stage: Any) -> bool:
    return stage in reward_view.RL_STAGES


def chosen_builtins(reward_funcs: str | None) -> list[str]:
    items = [x.strip() for x in (reward_funcs or "").split(",")]
    return [name for name in BUILTIN_REWARDS if name in items]


def build_section(start: dict[str, Any], fields: dict[str, Any]) -> RewardsSection:
    """The reward settings accordion; its config widgets are added to ``fields``."""
    with gr.Accordion(L("train_rl"), open=True, visible=is_rl(start.get("stage"))) as box:
        builtins = gr.CheckboxGroup(
            choices=list(BUILTIN_REWARDS), value=chosen_builtins(start.get("reward_funcs")),
            label=L("rl_builtins"), info=L("rl_builtins_info"), elem_id="lf-rl-builtins",
        )
        for begin in range(0, len(RL_KEYS), PER_ROW):
            with gr.Row():
                for key in RL_KEYS[begin:begin + PER_ROW]:
                    fields[key] = make_widget(key, start.get(key))
        with gr.Accordion(L("rl_code"), open=False):
            code = gr.Code(reward_view.REWARD_CODE, language="python", lines=10, label=L("rl_code_label"),
                           elem_id="lf-rl-code")
            save_btn = gr.Button(L("rl_save_btn"), size="sm")
        with gr.Row():
            try_btn = gr.Button(L("rl_try_btn"), elem_id="lf-rl-try", scale=4)
            stop_btn = gr.Button(L("rl_try_stop"), variant="stop", visible=False, elem_id="lf-rl-try-stop", scale=1)
        message = SafeMarkdown(elem_id="lf-rl-message")
        try_table = gr.Dataframe(label=L("rl_try_table"), interactive=False, wrap=True, max_height=320,
                                 visible=False, elem_id="lf-rl-try-table")
    return RewardsSection(box=box, builtins=builtins, code=code, save_btn=save_btn, try_btn=try_btn,
                          stop_btn=stop_btn, message=message, try_table=try_table)


def build_live() -> RewardsLive:
    with gr.Group(visible=False) as box:
        with gr.Row():
            reward_plot = gr.LinePlot(None, x="step", y="reward", color="series", color_title=" ",
                                      label=L("rl_reward_chart"), height=300, elem_id="lf-rl-reward-plot",
                                      elem_classes=["lf-plot"])
            kl_plot = gr.LinePlot(None, x="step", y="kl", label=L("rl_kl_chart"), height=300,
                                  elem_classes=["lf-plot"])
            length_plot = gr.LinePlot(None, x="step", y="tokens", label=L("rl_length_chart"), height=300,
                                      elem_classes=["lf-plot"])
        completions = gr.Dataframe(label=L("rl_completions"), interactive=False, wrap=True, max_height=360,
                                   elem_id="lf-rl-completions")
    return RewardsLive(box=box, reward_plot=reward_plot, kl_plot=kl_plot, length_plot=length_plot,
                       completions=completions, seen=gr.State(None), timer=gr.Timer(2.0))


# -- pure handlers (tested without a browser) ------------------------------------------------------------------
def save_code(board: Board, code: str, reward_funcs: str | None, lang: str) -> tuple[str, str | None]:
    """(message, new reward_funcs text or None) after writing the code box as a reward file."""
    spec, problems = reward_view.save_reward_code(board.workspace.root / "rewards", code or "")
    if spec is None:
        return t(lang, "rl_code_problem", problems="; ".join(problems)), None
    return t(lang, "rl_saved", spec=spec), reward_view.add_reward(reward_funcs, spec)


def try_it(board: Board, mapping: dict[str, Any], lang: str, session: str = "") -> tuple[str, Any]:
    """(message, table) after scoring a few sampled completions in a child process (``session``'s: Stop ends
    it)."""
    if not is_rl(mapping.get("stage")):
        return t(lang, "rl_try_stage"), None
    if not mapping.get("dataset"):
        return t(lang, "preview_no_dataset"), None
    try:
        result = reward_view.run_try(board, mapping, session=session)
    except reward_view.TryStopped:
        return t(lang, "rl_try_stopped"), None
    except reward_view.TryError as err:
        return t(lang, "rl_try_failed", error=err), None
    means, errors = reward_view.try_summary(result)
    message = t(lang, "rl_try_done", n=len(result.get("rows") or []), summary=means)
    if errors:
        message += " " + t(lang, "rl_try_errors", errors=errors)
    return message, reward_view.try_frame(result)


def live_update(board: Board, run_id: str | None, seen: Any, lang: str) -> tuple[Any, ...]:
    """(box, reward plot, KL plot, length plot, completions, seen) for the watched run; skips when unchanged."""
    view = reward_view.live_view(board, run_id, t(lang, "rl_total"))
    if view is None:
        marker = [run_id, None, lang]
        if seen == marker:
            return (gr.skip(),) * 6
        return gr.update(visible=False), None, None, None, None, marker
    marker = [run_id, view["version"], lang]
    if seen == marker:
        return (gr.skip(),) * 6
    if not seen or seen[0] != run_id or seen[2] != lang:  # another run: clear first (gradio keeps the colours)
        return gr.update(visible=True), None, None, None, view["completions"], [run_id, -1, lang]
    return gr.update(visible=True), view["reward"], view["kl"], view["length"], view["completions"], marker


# -- events ---------------------------------------------------------------------------------------------------
def wire(section: RewardsSection, live: RewardsLive, tab: Any, top: Any, board: Board, mapping_of: Any) -> None:
    """Events of the reward settings and the live view; ``tab`` is the Train tab, ``mapping_of`` its form reader."""
    private = {"api_visibility": "private"}
    reward_funcs = tab.fields["reward_funcs"]
    tab.stage.change(lambda s: gr.update(visible=is_rl(s)), tab.stage, section.box, **private)
    builtin_names = list(BUILTIN_REWARDS)
    section.builtins.input(
        lambda chosen, current: reward_view.with_builtins(current, chosen or [], builtin_names),
        [section.builtins, reward_funcs], reward_funcs, **private,
    )
    reward_funcs.input(lambda text: chosen_builtins(text), reward_funcs, section.builtins, **private)

    def on_save(code, current, lang):
        message, updated = save_code(board, code, current, lang)
        return message, (gr.skip() if updated is None else updated)

    section.save_btn.click(on_save, [section.code, reward_funcs, top.lang], [section.message, reward_funcs],
                           **private)
    form = tab.form(top)

    def on_try(request: gr.Request, *values):
        *values, lang = values
        message, frame = try_it(board, mapping_of(tab.keys, list(values)), lang, session=_session(request))
        table = gr.update(visible=False) if frame is None else gr.update(value=frame, visible=True)
        return message, table, gr.update(visible=False)

    def on_stop(request: gr.Request):
        reward_view.stop_try(board, _session(request), before_start=True)  # the "try it" event says it stopped

    def on_begin(request: gr.Request):
        reward_view.forget_stop(board, _session(request))
        return gr.update(value="…"), gr.update(visible=True)

    section.try_btn.click(on_begin, None, [section.message, section.stop_btn], **private).then(
        on_try, [*form, top.lang], [section.message, section.try_table, section.stop_btn], **private)
    section.stop_btn.click(on_stop, None, None, **private)
    live.timer.tick(
        lambda run_id, seen, lang: live_update(board, run_id, seen, lang),
        [tab.watched, live.seen, top.lang],
        [live.box, live.reward_plot, live.kl_plot, live.length_plot, live.completions, live.seen],
        show_progress="hidden", concurrency_limit=None, **private,
    )


def _session(request: Any) -> str:
    """The browser session a request belongs to ("" outside one: the API, tests)."""
    return str(getattr(request, "session_hash", None) or "")
