"""`stage: rm` with `do_predict` ended in `AttributeError: 'LlamaForSequenceClassification' object has no attribute
'generate'` (a traceback, after the model had loaded); it is a config problem named before anything loads."""

from pathlib import Path

from engine.cli import EXIT_USER_ERROR, main

REPO = Path(__file__).resolve().parents[2]


def test_predict_with_a_reward_model_is_a_config_problem(tmp_path, capsys):
    code = main(["check", "--for", "eval", str(REPO / "examples" / "predict_demo.yaml"), "stage=rm",
                 "eval_dataset=demo_dpo", "adapter_name_or_path=null", f"dataset_dir={REPO / 'examples' / 'data'}",
                 f"output_dir={tmp_path / 'out'}", "predict_with_generate=false"])
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and "Traceback" not in err
    assert "`do_predict: true` with `stage: rm`" in err and "Use `do_eval: true`" in err, err
