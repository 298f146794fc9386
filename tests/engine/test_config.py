"""The typed config: LLaMA-Factory keys, coercion, every problem reported together, nearest-key hints."""

import pytest
import yaml

from engine.config import ConfigError, build_config, load_config, parse_overrides
from engine.config.loader import all_keys


def test_llamafactory_style_config_loads_unchanged(tmp_path):
    text = """
model_name_or_path: Qwen/Qwen3-0.6B
trust_remote_code: true
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
dataset: identity,alpaca_en_demo
template: qwen3_nothink
cutoff_len: 2048
max_samples: 1000
overwrite_cache: true
preprocessing_num_workers: 16
dataloader_num_workers: 4
output_dir: saves/qwen3-0.6b/lora/sft
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
save_only_model: false
report_to: none
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
resume_from_checkpoint: null
"""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    cfg = load_config(path)
    assert cfg.model.model_name_or_path == "Qwen/Qwen3-0.6B"
    assert cfg.model.trust_remote_code is True
    assert cfg.finetuning.lora_alpha == 16  # filled from the rank
    assert cfg.train.learning_rate == pytest.approx(1e-4)
    assert cfg.train.warmup_ratio == pytest.approx(0.1)
    assert cfg.extra == {"save_only_model": False}  # a Hugging Face key passed through
    assert cfg.data.preprocessing_num_workers == 16


def test_every_problem_is_reported_at_once_with_hints():
    with pytest.raises(ConfigError) as info:
        build_config({"lerning_rate": 1e-4, "stage": "sftt", "lora_rank": "eight", "cutoff_len": 0})
    problems = info.value.problems
    assert len(problems) == 4
    text = "\n".join(problems)
    assert "Did you mean `learning_rate`" in text
    assert "'pt', 'sft', 'rm', 'dpo', 'kto'" in text and "Did you mean 'sft'" in text
    assert "`lora_rank: 'eight'` must be a whole number" in text
    assert "`cutoff_len: 0` is below the minimum 1" in text


def test_media_bounds_are_checked_before_any_media_is_read():
    """A negative pixel bound crashed in a square root, `video_maxlen: 0` with an IndexError and `video_fps: 0` went
    through; each is now a config problem naming its floor."""
    with pytest.raises(ConfigError) as info:
        build_config({"image_max_pixels": -5, "video_max_pixels": 0, "video_maxlen": 0, "video_fps": 0,
                      "audio_sampling_rate": 0})
    text = "\n".join(info.value.problems)
    for key, value, floor in (("image_max_pixels", -5, 1), ("video_max_pixels", 0, 1), ("video_maxlen", 0, 1),
                              ("video_fps", 0.0, 0.01), ("audio_sampling_rate", 0, 1)):
        assert f"`{key}: {value}` is below the minimum {floor}" in text
    assert build_config({"image_min_pixels": 0, "video_min_pixels": 0}).data.image_min_pixels == 0


def test_strings_from_yaml_and_cli_are_coerced():
    cfg = build_config({"learning_rate": "1e-4", "bf16": "true", "num_train_epochs": "2", "max_samples": "null"})
    assert cfg.train.learning_rate == pytest.approx(1e-4)
    assert cfg.train.bf16 is True
    assert cfg.train.num_train_epochs == 2.0
    assert cfg.data.max_samples is None
    with pytest.raises(ConfigError, match="whole number, not a fraction"):
        build_config({"lora_rank": 2.5})


def test_cross_field_checks():
    with pytest.raises(ConfigError, match="choose one"):
        build_config({"bf16": True, "fp16": True})
    with pytest.raises(ConfigError, match="applies to `stage: dpo` only"):
        build_config({"pref_loss": "orpo", "stage": "kto"})
    with pytest.raises(ConfigError, match="needs evaluation data"):
        build_config({"eval_strategy": "steps"})


def test_overrides_parse_yaml_scalars():
    assert parse_overrides(["learning_rate=1e-3", "bf16=true", "dataset=a,b", "max_samples=10"]) == {
        "learning_rate": 1e-3, "bf16": True, "dataset": "a,b", "max_samples": 10,
    }
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["oops"])


def test_yaml_round_trip_keeps_values(tmp_path):
    cfg = build_config({"model_name_or_path": "demo", "lora_rank": 4, "dataset": "x", "dataloader_drop_last": True})
    again = build_config(yaml.safe_load(cfg.to_yaml(minimal=False)))
    assert again.to_dict() == cfg.to_dict()
    minimal = yaml.safe_load(cfg.to_yaml())
    assert minimal["lora_rank"] == 4 and "learning_rate" not in minimal


def test_broken_yaml_names_the_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("stage: sft\n  lora_rank: [8\n")
    with pytest.raises(ConfigError, match="bad.yaml` is not valid YAML at line"):
        load_config(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("text", "words"), [
    # PyYAML finds a key without its colon only on the next line (here past the file's end): the line is quoted
    ("model_name_or_path: demo\nstage sft\n", ("at line 3", "in what begins at line 2: `stage sft`")),
    ("model_name_or_path: demo\n\tstage: sft\n", ("at line 2", "spaces, never tabs")),
])
def test_broken_yaml_quotes_the_line_to_fix(tmp_path, text, words):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    for word in words:
        assert word in str(info.value)


def test_keys_yaml_reads_as_no_name_are_named_as_written(tmp_path):
    """`null:`, `true:`, `3:` and a date as keys: the problem names them as YAML writes them (`null`, not None)."""
    p = tmp_path / "keys.yaml"
    p.write_text("model_name_or_path: demo\ndataset: x\nnull: 1\ntrue: 2\n3: x\n2024-01-01: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(p)
    text = str(info.value)
    for key, kind in (("null", "no value"), ("true", "a yes/no value"), ("3", "a number"), ("2024-01-01", "a date")):
        assert f"Unknown key `{key}` (YAML reads it as {kind}, not as a name)" in text
    assert "`None`" not in text and "`True`" not in text


def test_every_field_is_documented():
    for key, (_, f) in all_keys().items():
        assert f.metadata.get("help"), f"{key} has no help text"


def test_llamafactory_keys_without_an_effect_here_are_refused_when_set():
    """No key is accepted and then ignored: each works, passes through to transformers, or is refused (at
    LLaMA-Factory's own default, where it changes nothing there either, it is accepted: tests/engine/test_lf_keys.py)."""
    for key, value in [("vllm_gpu_util", 0.9), ("image_resolution", 512), ("print_param_status", True),
                       ("ppo_epochs", 2), ("reward_model_type", "full"), ("logging_dir", "logs")]:
        with pytest.raises(ConfigError, match=rf"`{key}: "):
            build_config({key: value})
    assert build_config({"ddp_find_unused_parameters": False}).extra == {"ddp_find_unused_parameters": False}
    assert build_config({"disable_gradient_checkpointing": False}).train.gradient_checkpointing is True
    assert build_config({"disable_gradient_checkpointing": True}).train.gradient_checkpointing is False
    explicit = {"disable_gradient_checkpointing": False, "gradient_checkpointing": False}
    assert build_config(explicit).train.gradient_checkpointing is False


@pytest.mark.parametrize(("key", "value", "message"), [
    ("adam_beta1", "nan", "must be a number"),
    ("torch_compile", "maybe", "must be true or false"),
    ("optim_args", 1, "must be text or null"),
    ("adam_epsilon", -1, "must be at least 0"),
    ("label_smoothing_factor", 1.5, "below 1"),
])
def test_passed_through_training_arguments_are_type_checked(key, value, message):
    """A TrainingArguments key a LLaMA-Factory config passes through had reached transformers unchecked and failed
    after the model loaded (or, like `torch_compile: maybe`, switched a feature on). Found by an outside review."""
    with pytest.raises(ConfigError) as info:
        build_config({"model_name_or_path": "demo", "dataset": "demo_identity", key: value})
    assert f"`{key}:" in str(info.value) and message in str(info.value)
    fine = {"adam_beta1": 0.8, "torch_compile": False, "optim_args": "x=1",
            "adam_epsilon": 1e-6, "label_smoothing_factor": 0.1}[key]
    assert build_config({"model_name_or_path": "demo", "dataset": "demo_identity", key: fine}).extra[key] == fine


def test_training_defaults_are_llamafactorys_where_they_change_the_result():
    """A LLaMA-Factory config that leaves these out trains with transformers' TrainingArguments defaults (checked
    against LLaMA-Factory 0.9.5's get_train_args: batch 8, eval batch 8, accumulation 1, linear schedule); ours
    were 1, 1, 8 and cosine. Found by an outside review."""
    import dataclasses

    from transformers import Seq2SeqTrainingArguments

    theirs = {f.name: f.default for f in dataclasses.fields(Seq2SeqTrainingArguments)}
    ours = build_config({"model_name_or_path": "demo"}).train
    for key in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                "learning_rate", "num_train_epochs", "weight_decay", "max_grad_norm", "seed", "adam_beta1",
                "adam_beta2", "adam_epsilon", "max_steps", "warmup_steps"):
        if hasattr(ours, key):
            assert getattr(ours, key) == theirs[key], key
    assert str(ours.lr_scheduler_type) == getattr(theirs["lr_scheduler_type"], "value", theirs["lr_scheduler_type"])


def test_refused_as_llamafactory_refuses_them():
    """Two settings LLaMA-Factory refuses while it reads the config, which had passed `lf-engine check` here."""
    with pytest.raises(ConfigError, match="cannot be combined with `train_on_prompt: true`"):
        build_config({"model_name_or_path": "demo", "mask_history": True, "train_on_prompt": True})
    with pytest.raises(ConfigError, match="`interleave_probs: xval` must be comma-separated numbers"):
        build_config({"model_name_or_path": "demo", "mix_strategy": "interleave_under", "interleave_probs": "xval"})
    assert build_config({"model_name_or_path": "demo", "mix_strategy": "interleave_under", "interleave_probs": "0.3,0.7",
                         "mask_history": True})


@pytest.mark.parametrize(("key", "example"), [("learning_rate", "1.0e-4"), ("num_train_epochs", "3 or 0.5")])
def test_a_number_that_is_not_one_gets_an_example_of_its_kind(key, example):
    """`num_train_epochs: x` had been told to look like 1.0e-4: the example fits the key."""
    with pytest.raises(ConfigError) as info:
        build_config({key: "x"})
    assert f"must be a number (e.g. {example})" in str(info.value)


def test_evaluating_during_training_also_evaluates_at_the_end():
    """Hugging Face's TrainingArguments (so LLaMA-Factory) turn do_eval on with any eval_strategy but `no`: the run
    ends with an evaluation and eval_results.json, as there."""
    from engine.config import build_config

    assert build_config({"eval_strategy": "steps", "eval_steps": 2, "dataset": "a", "val_size": 0.1}).train.do_eval is True
    assert build_config({"dataset": "a", "val_size": 0.1}).train.do_eval is False


def test_a_seed_numpy_refuses_is_refused_before_the_run():
    """set_seed (numpy) raises for seeds of 2**32 and more, after the model has loaded: the config says it first."""
    from engine.config import ConfigError, build_config

    assert build_config({"seed": 2**32 - 1}).train.seed == 2**32 - 1
    with pytest.raises(ConfigError, match=r"`seed: 4294967296` is above the maximum 4294967295"):
        build_config({"seed": 2**32})


@pytest.mark.parametrize("key", ["dataloader_num_workers", "preprocessing_num_workers"])
def test_a_worker_count_no_machine_has_is_refused_before_anything_forks(key):
    """torch's DataLoader starts every worker it is given (and the tokenizer pool one per shard of rows): a config from
    elsewhere with `dataloader_num_workers: 100000` passed every check and would have forked 100,000 processes."""
    from engine.config import ConfigError, build_config

    assert getattr(build_config({key: 64}).train if key.startswith("dataloader") else build_config({key: 64}).data,
                   key) == 64
    with pytest.raises(ConfigError, match=rf"`{key}: 100000` is above the maximum 2048"):
        build_config({key: 100_000})


@pytest.mark.parametrize("key", ["image_min_pixels", "video_min_pixels"])
def test_a_minimum_size_past_what_an_image_may_have_is_refused_before_anything_is_scaled_up(key):
    """Every smaller image or frame is scaled up to the minimum: `image_min_pixels: 100000000000` took one 32x32 demo
    image past 19 GB (the process was killed) and 10**18 ended in a MemoryError traceback. The bound is the most pixels
    an image may have anyway (Pillow's decompression-bomb limit)."""
    from PIL import Image

    from engine.config import ConfigError, build_config
    from engine.config.schema import MAX_MEDIA_PIXELS

    assert MAX_MEDIA_PIXELS == 2 * Image.MAX_IMAGE_PIXELS
    assert getattr(build_config({key: MAX_MEDIA_PIXELS}).data, key) == MAX_MEDIA_PIXELS
    with pytest.raises(ConfigError, match=rf"`{key}: 100000000000` is above the maximum {MAX_MEDIA_PIXELS}"):
        build_config({key: 100_000_000_000})


def test_a_video_maxlen_past_hours_of_frames_is_refused_before_frame_numbers_are_listed():
    """A video stream that states no frame count is read for its first video_maxlen frames: `video_maxlen:
    1000000000000` listed a trillion frame numbers (MemoryError under a 4 GB limit, the machine's memory without)."""
    from engine.config import ConfigError, build_config
    from engine.config.schema import MAX_VIDEO_FRAMES

    assert build_config({"video_maxlen": MAX_VIDEO_FRAMES}).data.video_maxlen == MAX_VIDEO_FRAMES == 16384
    with pytest.raises(ConfigError, match=r"`video_maxlen: 1000000000000` is above the maximum 16384"):
        build_config({"video_maxlen": 10**12})


@pytest.mark.parametrize("loss", ["hinge", "ipo"])
def test_dpo_hinge_and_ipo_say_that_llamafactory_trains_sigmoid_for_them(loss):
    # LLaMA-Factory 0.9.5 calls TRL 0.24's dpo_loss without loss_type: both train TRL's default, sigmoid
    cfg = build_config({"model_name_or_path": "demo", "stage": "dpo", "dataset": "demo_dpo",
                        "dataset_dir": "examples/data", "pref_loss": loss})
    note = next(n for n in cfg.notes if n.startswith(f"`pref_loss: {loss}`"))
    assert "LLaMA-Factory 0.9.5 trains the sigmoid loss" in note
    plain = build_config({"model_name_or_path": "demo", "stage": "dpo", "dataset": "demo_dpo",
                          "dataset_dir": "examples/data", "pref_loss": "sigmoid"})
    assert not any("pref_loss" in n for n in plain.notes)


def test_a_whole_number_past_pythons_digit_limit_is_named_with_its_place(tmp_path):
    """PyYAML reads a whole number with int(), which refuses more than 4,300 digits by default: the ValueError
    stopped `lf-engine check`, the board's /submit_run and its config import with a traceback."""
    from engine.config.loader import load_yaml_text

    path = tmp_path / "long.yaml"
    path.write_text("stage: sft\ncutoff_len: 1" + "0" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line 2, column 13: a whole number of 5,001 digits"):
        load_config(path)
    with pytest.raises(yaml.YAMLError):
        load_yaml_text("x: 0x" + "f" * 4100)
    assert load_yaml_text("x: 1_000\ny: 0x1f\nz: " + "9" * 4000) == {"x": 1000, "y": 31, "z": int("9" * 4000)}


def test_a_flow_nested_past_what_can_be_read_is_refused_where_that_depth_is_reached(monkeypatch):
    """5,000 `[` on a line: the scanner looked ahead past every open level (1,024 characters a level), against every
    level still open, before composing ended in a RecursionError: 9 s (a board read its last-used config so, and
    /submit_run a config). Refused at the depth no text can be read at (two frames a level), with the same message;
    what could be read before still is."""
    import sys

    from engine.config.loader import load_yaml_text

    opened = []
    real = yaml.scanner.Scanner.fetch_flow_collection_start
    monkeypatch.setattr(yaml.scanner.Scanner, "fetch_flow_collection_start",
                        lambda self, token: opened.append(self.flow_level) or real(self, token))
    with pytest.raises(ConfigError, match="nests lists or mappings too deeply to be read"):
        load_yaml_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert len(opened) <= sys.getrecursionlimit() // 2  # it scanned 1,500 levels before
    deep = load_yaml_text("a: " + "[" * 300 + "7" + "]" * 300 + "\n")["a"]
    for _ in range(299):
        deep = deep[0]
    assert deep == [7]


def test_a_config_file_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """An 11 MB YAML took 54 s to be read (and then refused for its values) in the board's config loader and the
    CLI; a file over 1,000,000 bytes (what /submit_run takes) is refused from its size, without being read."""
    import io
    import sys

    from engine.config.limits import MAX_CONFIG_BYTES

    path = tmp_path / "big.yaml"
    path.write_text("stage: sft\n" + "# " + "x" * MAX_CONFIG_BYTES + "\n")
    read = []
    monkeypatch.setattr(type(path), "read_text", lambda self, *a, **k: read.append(self) or "")
    with pytest.raises(ConfigError, match=r"`\S+big.yaml` is larger than 1,000,000 bytes, the most a config may be"):
        load_config(path)
    assert read == []
    monkeypatch.undo()
    monkeypatch.setattr(sys, "stdin", io.StringIO(path.read_text()))
    with pytest.raises(ConfigError, match="The config from standard input is larger than 1,000,000 bytes"):
        load_config("-")
    path.write_text("stage: sft\n" + "# " + "x" * (MAX_CONFIG_BYTES - 100) + "\n")
    assert load_config(path).finetuning.stage == "sft"


@pytest.mark.parametrize("key, value, code", [
    ("run_name", "ok\nINFO step 9 loss 0.0", "U+000A"),
    ("run_name", "report\u202egnp.exe", "U+202E"),
    ("run_name", "same\u200bname", "U+200B"),
    ("output_dir", "saves/run\x1b]0;title\x07", "U+001B"),
    ("hub_model_id", "me/model\r", "U+000D"),
    ("model_name_or_path", "models/a\nb", "U+000A"),
    ("dataset", ["alpaca_en_demo", "rows\u2066x"], "U+2066"),
])
def test_names_with_control_or_reordering_characters_are_refused(key, value, code):
    with pytest.raises(ConfigError) as err:
        build_config({"model_name_or_path": "demo", "dataset": "d", **{key: value}})
    found = [p for p in err.value.problems if p.code == "hidden_chars"]
    assert len(found) == 1 and f"`{key}`" in found[0] and code in found[0] and "without them" in found[0]
    assert "\n" not in found[0] and "\u202e" not in found[0]  # the message itself forges nothing


def test_existing_paths_may_hold_joiners_of_their_script():
    """A folder someone else named (an emoji with a joiner) is not refused; a new run name with one is."""
    cfg = build_config({"model_name_or_path": "models/\U0001f469\u200d\U0001f4bb", "dataset": "d"})
    assert cfg.model.model_name_or_path.endswith("\U0001f4bb")
    with pytest.raises(ConfigError, match="U\\+200D"):
        build_config({"model_name_or_path": "demo", "dataset": "d", "run_name": "\U0001f469\u200d\U0001f4bb"})
