"""The Evaluate and Export forms as a browser tab last started them come back with a reload (app.page_forms)."""

from __future__ import annotations

import gradio as gr

from app import page_forms, page_memory
from app.tabs import evaluate, export

PAGE = "c" * 32


def forms(board):
    with gr.Blocks():
        return page_forms.tab_forms(evaluate.build(board), export.build(board))


def test_a_started_form_comes_back_and_what_a_widget_cannot_take_is_left(board):
    widgets = forms(board)["evaluate"][1]
    dataset = evaluate.dataset_choices(str(board.workspace.default_dataset_dir()))[0][0][1]
    values = {key: gr.skip() for key in widgets}
    values.update(mode="eval", dataset=[dataset], max_samples=7, cutoff_len=-5, do_sample=True, temperature=0.4)
    page_forms.save_form(board, "evaluate", PAGE, list(widgets), tuple(values.values()))
    back = dict(zip(widgets, page_forms.restore_form(board, "evaluate", PAGE, widgets), strict=True))
    assert (back["mode"], back["dataset"], back["max_samples"], back["do_sample"], back["temperature"]) == (
        "eval", [dataset], 7, True, 0.4)
    skip = gr.skip()
    assert back["cutoff_len"] == skip  # out of range
    assert back["dataset_dir"] == skip  # never kept (a skip was sent)
    # another tab, and this one's other form, keep their own
    assert all(v == skip for v in page_forms.restore_form(board, "evaluate", "d" * 32, widgets))
    export_widgets = forms(board)["export"][1]
    assert all(v == skip for v in page_forms.restore_form(board, "export", PAGE, export_widgets))
    page_forms.save_form(board, "export", PAGE, list(export_widgets), ("/tmp/out", 2, "cpu", "bfloat16", True))
    assert page_forms.restore_form(board, "export", PAGE, export_widgets)[:2] == ("/tmp/out", 2)
    assert page_memory.memory(board).read(PAGE)["form_evaluate"]["mode"] == "eval"  # beside, not instead


def test_what_a_widget_can_take():
    usable = page_forms.usable
    picker = gr.Dropdown(choices=[("A", "a"), ("B", "b")], multiselect=True)
    assert usable(picker, ["a"]) and not usable(picker, ["gone"]) and not usable(picker, "a")
    assert usable(gr.Dropdown(choices=["x"], allow_custom_value=True), "/my/folder")
    assert usable(gr.Radio(choices=[("Eval", "eval")]), "eval") and not usable(gr.Radio(choices=["eval"]), "other")
    assert usable(gr.Checkbox(), False) and not usable(gr.Checkbox(), "yes")
    assert usable(gr.Slider(0, 2), 1.5) and not usable(gr.Slider(0, 2), 3) and not usable(gr.Number(), True)
    assert not usable(gr.Number(), float("nan")) and usable(gr.Textbox(), "") and not usable(gr.Textbox(), 3)


def test_each_start_keeps_its_form_and_the_page_load_sets_it(board):
    from app.ui import build_ui

    demo = build_ui(board)
    page_id = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-id")
    keepers = [fn for fn in demo.fns.values() if fn.inputs and fn.inputs[0] is page_id and not fn.outputs
               and {n for _, n in fn.targets} == {"click"}]
    assert len(keepers) == 2
    origin = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-origin")
    setters = [fn for fn in demo.fns.values() if fn.inputs == [page_id, origin]
               and {n for _, n in fn.targets} == {"change"}]
    assert len(setters) == 1 and len(setters[0].outputs) == sum(len(fn.inputs) - 1 for fn in keepers)  # both forms


def test_a_dataset_registered_after_the_board_started_comes_back_as_picked(board):
    import json

    from app.ui import build_ui

    demo = build_ui(board)  # the page as the board built it: the folder had no "late" dataset
    page_id = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-id")
    picker = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-eval-dataset")
    setter = next(fn for fn in demo.fns.values() if fn.inputs and fn.inputs[0] is page_id and picker in fn.outputs)
    folder = board.workspace.datasets_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "late.json").write_text(json.dumps([{"instruction": "hi", "input": "", "output": "yo"}]))
    (folder / "dataset_info.json").write_text(json.dumps({"late": {"file_name": "late.json"}}))
    page_forms.save_form(board, "evaluate", PAGE, ["dataset_dir", "dataset"], (str(folder), ["late"]))
    back = dict(zip(setter.outputs, setter.fn(PAGE, ""), strict=True))
    assert back[picker]["value"] == ["late"] and "late" in page_forms.choice_values(gr.Dropdown(
        choices=back[picker]["choices"]))
    (folder / "dataset_info.json").write_text("{}")  # gone by the reload: left at the page's own
    assert dict(zip(setter.outputs, setter.fn(PAGE, ""), strict=True))[picker] == gr.skip()
