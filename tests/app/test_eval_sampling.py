"""Evaluate's Predict decodes greedily unless "Sample" is ticked, and greedy decoding ignores temperature, top-p and
top-k: their sliders looked live while they changed nothing. They can be set while "Sample" is ticked."""

from __future__ import annotations


def test_the_sampling_sliders_follow_the_sample_box(board):
    from app.ui import build_ui

    demo = build_ui(board)
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    sliders = [by_id[f"cfg-eval-{key}"] for key in ("temperature", "top_p", "top_k")]
    sample = by_id["cfg-eval-do_sample"]
    assert sample.value is False and all(s.interactive is False for s in sliders)
    assert by_id["cfg-eval-max_new_tokens"].interactive is not False  # greedy decoding reads it
    (fn,) = [f for f in demo.fns.values() if (sample._id, "change") in f.targets]
    assert fn.outputs == sliders and fn.queue is False and fn.show_progress == "hidden"
    assert [u["interactive"] for u in fn.fn(True)] == [True] * 3
    assert [u["interactive"] for u in fn.fn(False)] == [False] * 3
