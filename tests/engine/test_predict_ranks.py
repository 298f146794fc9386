"""Prediction shared by the processes of a multi-process run: each rank generates for its share of the batches and
rank 0 writes every reply (each rank had generated every reply). Under FSDP2 a round whose batches differ in media
borrows rows so that every rank runs the vision tower (without, gloo's collectives stopped pairing up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from engine.cli import main
from engine.evaluate.predict_ranks import rank_batches

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _rows(kinds: str) -> list[dict]:
    """One prediction row per letter: i (an image), v (a video), t (text alone)."""
    keys = {"i": {"pixel_values": 0, "image_grid_thw": 0}, "v": {"pixel_values_videos": 0, "video_grid_thw": 0},
            "t": {}}
    return [{"prompt_ids": [1], "mm_inputs": dict(keys[k])} for k in kinds]


def test_each_batch_is_one_ranks_own_once_and_every_rank_makes_the_same_calls():
    rows = _rows("t" * 11)
    batches = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10]]
    shares = {rank: rank_batches(batches, rows, rank, 4) for rank in range(4)}
    assert {len(share) for share in shares.values()} == {2}  # the same number of generate calls
    owned = [i for share in shares.values() for batch, own in share for i in batch[:own]]
    assert sorted(owned) == list(range(11))
    # ranks 2 and 3 have no batch in the second round: they generate the round's first batch again and drop it
    assert shares[2][1] == ([8, 9], 0) and shares[3][1] == ([8, 9], 0)
    assert rank_batches(batches, rows, 0, 1) == [(batch, len(batch)) for batch in batches]  # one process: as before


def test_a_batch_without_the_rounds_media_borrows_a_row_that_has_them():
    rows = _rows("iitvtt")
    batches = [[0, 1], [2, 4], [3, 5]]
    # round one: rank 0 has images, rank 1 text alone: rank 1 borrows an image row; round two: rank 0 alone
    assert rank_batches(batches, rows, 1, 2) == [([2, 4, 0], 2), ([3, 5], 0)]
    assert rank_batches(batches, rows, 0, 2) == [([0, 1], 2), ([3, 5], 2)]
    # three ranks: images, text, video: each batch borrows what it lacks, one row per kind
    assert rank_batches(batches, rows, 0, 3)[0] == ([0, 1, 3], 2)
    assert rank_batches(batches, rows, 1, 3)[0] == ([2, 4, 0, 3], 2)
    assert rank_batches(batches, rows, 2, 3)[0] == ([3, 5, 0], 2)


def test_without_a_sharded_model_each_rank_takes_its_own_batches_only():
    """DDP or whole copies: no forward gathers from another rank, so nothing is borrowed or generated again."""
    rows = _rows("iitvtt")
    batches = [[0, 1], [2, 4], [3, 5]]
    assert rank_batches(batches, rows, 0, 2, sharded=False) == [([0, 1], 2), ([3, 5], 2)]
    assert rank_batches(batches, rows, 1, 2, sharded=False) == [([2, 4], 2)]
    assert rank_batches(batches, rows, 3, 4, sharded=False) == []


def test_a_model_is_sharded_when_its_parameters_are_dtensors_or_zero3_partitions():
    import torch

    from engine.evaluate.predict_ranks import model_is_sharded

    plain = torch.nn.Linear(2, 2)
    assert not model_is_sharded(plain)
    plain.weight.ds_id = 0  # DeepSpeed ZeRO-3 marks its partitioned parameters so
    assert model_is_sharded(plain)


def test_fsdp2_prediction_over_image_and_text_rows_is_shared_and_equals_one_process(tmp_path, monkeypatch):
    """Train the demo VLM on 2 CPU ranks with FSDP2, then predict on image and text rows (rounds with and without
    images, and a last round with one batch); the predictions equal a one-process prediction with the saved
    adapter (made in this process, on one thread as each rank had: another interpreter only added its imports)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    common = ["eval_dataset=demo_vlm,demo_identity", "max_samples=9", "do_predict=true", "predict_with_generate=true",
              "per_device_eval_batch_size=2", "max_new_tokens=8", "do_sample=false", "save_strategy=no",
              f"dataset_dir={EXAMPLES / 'data'}"]
    shared = tmp_path / "shared"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(EXAMPLES / "sft_vlm_demo.yaml"), f"output_dir={shared}", "max_steps=2", "fsdp=full_shard auto_wrap",
           f"fsdp_config={EXAMPLES / 'fsdp' / 'fsdp2.json'}", *common]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((shared / "run.json").read_text())["parallel"]["sharded"] is True
    assert "Predicting 18 examples in 9 batches of up to 2, shared by 2 processes." in proc.stderr

    alone = tmp_path / "alone"
    monkeypatch.chdir(REPO)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # OMP_NUM_THREADS=1, as the ranks ran
    try:
        assert main(["train", str(EXAMPLES / "sft_vlm_demo.yaml"), f"output_dir={alone}",
                     f"adapter_name_or_path={shared}", "do_train=false", *common]) == 0
    finally:
        torch.set_num_threads(threads)
    lines = (shared / "generated_predictions.jsonl").read_text().splitlines()
    assert len(lines) == 18 and all(json.loads(line)["predict"] for line in lines)
    assert lines == (alone / "generated_predictions.jsonl").read_text().splitlines()
