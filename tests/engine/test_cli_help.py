"""`lf-engine --help` and each subcommand's --help: every option says what it does (a newcomer reads these first)."""

from __future__ import annotations

import argparse

import pytest

from engine.cli import build_parser, main


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_option_has_a_help_text():
    commands = _subparsers(build_parser())
    assert {"train", "eval", "chat", "export", "api", "check", "data", "env", "cache", "demo"} <= set(commands)
    silent = [f"lf-engine {name} {action.option_strings[0]}"
              for name, sub in commands.items() for action in sub._actions
              if action.option_strings and not action.help]
    assert not silent, silent


def test_the_api_help_names_its_defaults():
    text = _subparsers(build_parser())["api"].format_help()
    assert "127.0.0.1" in text and "8000" in text


def test_the_readme_command_list_matches_the_cli():
    """Each `lf-engine COMMAND` line of the README's command-line block is a subcommand, and the `--for` choices it
    names for `check` are the parser's."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("## The command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = _subparsers(build_parser())
    named = re.findall(r"^lf-engine (\w+)", block, re.M)
    assert named and set(named) <= set(commands), set(named) - set(commands)
    check = commands["check"]
    purposes = next(a for a in check._actions if "--for" in a.option_strings).choices
    assert f"--for {'|'.join(purposes)}" in block


def test_a_missing_config_names_only_the_config(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: config" in err and "key=value" not in err.splitlines()[-1]


@pytest.mark.parametrize(("argv", "hint"), [
    (["check", "c.yaml", "--learning_rate", "1e-4"], "config keys follow the config file as key=value, e.g. `learning_rate=...`"),
    (["train", "c.yaml", "--lora_rank=8"], "e.g. `lora_rank=...`"),
    (["check", "c.yaml", "--fro", "export"], "(`lf-engine check --help` lists the options)"),
])
def test_a_key_written_as_an_option_is_answered_with_the_key_value_form(capsys, argv, hint):
    """transformers' and LLaMA-Factory's `--learning_rate 1e-4` style is how many newcomers write an override."""
    with pytest.raises(SystemExit):
        main(argv)
    assert hint in capsys.readouterr().err


def test_a_config_from_standard_input_is_named_as_such(capsys, monkeypatch, tmp_path):
    """The board's "Command and YAML" box runs `lf-engine train - <<'EOF' ...`: its messages name no file `-`."""
    import io
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "examples" / "data"
    text = (f"model_name_or_path: demo\ntemplate: chatml\nstage: sft\ndataset: demo_identity\ndataset_dir: {data}\n"
            f"output_dir: {tmp_path}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["check", "-"]) == 0
    assert capsys.readouterr().out.startswith("OK: the config from standard input is valid for `train`")
    monkeypatch.setattr("sys.stdin", io.StringIO("a: [1\n"))
    assert main(["check", "-"]) == 2
    assert "The config from standard input is not valid YAML" in capsys.readouterr().err


def test_each_commands_override_example_is_a_key_that_command_uses():
    """`lf-engine chat --help` suggested `learning_rate=1e-4`, a key chat never reads: each command's key=value
    example is one of the keys it acts on."""
    import dataclasses

    from engine.config import schema

    groups = {"train": schema.TrainArgs, "check": schema.TrainArgs, "eval": schema.DataArgs,
              "data": schema.DataArgs, "chat": schema.GenerationArgs, "api": schema.GenerationArgs,
              "export": schema.ExportArgs, "rewards": schema.FinetuningArgs}
    commands = _subparsers(build_parser())
    for name, group in groups.items():
        action = next(a for a in commands[name]._actions if a.dest == "overrides")
        key = action.help.rsplit("e.g. ", 1)[1].split("=", 1)[0]
        assert key in {f.name for f in dataclasses.fields(group)}, (name, key)


def test_expand_names_its_arguments_as_its_description_does():
    text = _subparsers(build_parser())["expand"].format_help()
    assert "MODEL OUTPUT" in text.split("\n\n", 1)[0] and "to OUTPUT" in text


def test_chat_media_options_name_the_models_that_take_them():
    text = " ".join(_subparsers(build_parser())["chat"].format_help().split())
    assert "(repeatable; models that take audio)" in text and "vision-language" not in text
    assert "(repeatable; models that take images)" in text  # it read "models that take image"
