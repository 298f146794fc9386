"""A user's reward file (`reward_funcs: path/to/file.py:name`) is read by the check (in the board's process too) and
copied into the run folder only as a regular file of at most 16 MB, and an expression nested past Python's parser is
named: a sparse file of hundreds of MB was read whole (and copied whole into the run folder), a parser MemoryError
ended the check with a traceback, and a folder of that name was called missing."""

from __future__ import annotations

from engine.rewards.user import check_user_reward, keep_reward_code
from tests.peak_memory import traced_peak


def test_an_outsized_file_is_named_without_being_read_whole(tmp_path):
    path = tmp_path / "big.py"
    with open(path, "wb") as fh:
        fh.truncate(256 << 20)  # sparse: no disk taken
    problems, peak = traced_peak(lambda: check_user_reward(f"{path}:score"))
    assert peak < 40 << 20, f"{peak:,} bytes held"
    assert len(problems) == 1 and f"is {256 << 20:,} bytes, more than the" in problems[0]
    kept, peak = traced_peak(lambda: keep_reward_code([f"{path}:score"], tmp_path / "run"))
    assert peak < 40 << 20, f"{peak:,} bytes held"
    assert kept == [] and not list((tmp_path / "run").rglob("*.py"))


def test_an_expression_nested_past_the_parser_is_named(tmp_path):
    path = tmp_path / "deep.py"
    path.write_text("x = " + "-" * 1_000_000 + "1\n", encoding="utf-8")
    problems = check_user_reward(f"{path}:score")
    assert len(problems) == 1 and "nests an expression deeper than Python's parser goes" in problems[0]


def test_a_folder_of_that_name_is_named_as_such(tmp_path):
    (tmp_path / "rewards.py").mkdir()
    problems = check_user_reward(f"{tmp_path / 'rewards.py'}:score")
    assert len(problems) == 1 and "is not a regular file" in problems[0]
