"""Batch prediction: generate a reply for every evaluation prompt and score it against the label.

Writes ``generated_predictions.jsonl`` (one ``{"prompt", "predict", "label"}`` object per line, in the input
order) and ``predict_results.json`` (BLEU-4, ROUGE-1/2/L and timing) into the output folder.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from engine.config import RunConfig
from engine.evaluate.metrics import compute_generation_metrics
from engine.evaluate.predict_ranks import gather_replies, model_is_sharded, rank_and_world, rank_batches
from engine.infer.generation import generation_kwargs, stop_token_ids
from engine.runs import EventWriter, read_json, write_text_atomic

logger = logging.getLogger(__name__)

PREDICTIONS_FILE = "generated_predictions.jsonl"
RESULTS_FILE = "predict_results.json"


def save_split_metrics(out: Path, split: str, metrics: dict[str, Any]) -> None:
    """``{split}_results.json`` and the merged ``all_results.json``, as transformers' ``Trainer.save_metrics`` writes
    them (indent 4, sorted keys), each file replaced whole."""
    write_text_atomic(out / f"{split}_results.json", json.dumps(metrics, indent=4, sort_keys=True))
    merged = read_json(out / "all_results.json")  # {} when absent, damaged, not a regular file or past 4 MB
    merged.update(metrics)
    write_text_atomic(out / "all_results.json", json.dumps(merged, indent=4, sort_keys=True))


def _row_fields(row: dict[str, Any], index: int) -> tuple[list[int], str, str]:
    ids = row.get("prompt_ids", row.get("input_ids"))
    if not ids:
        raise ValueError(f"Prediction row {index} has no prompt_ids; the evaluation data produced an empty prompt.")
    return [int(i) for i in ids], str(row.get("prompt", "")), str(row.get("label", ""))


def _cut_at_stop(ids: list[int], stop_ids: set[int], pad_id: int | None) -> list[int]:
    for position, token in enumerate(ids):
        if token in stop_ids:
            return ids[:position]
    while ids and pad_id is not None and ids[-1] == pad_id:
        ids = ids[:-1]
    return ids


def _left_pad(batch: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, ids in enumerate(batch):
        input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
        mask[row, width - len(ids):] = 1
    return input_ids.to(device), mask.to(device)


def _media_inputs(rows: list[dict[str, Any]], width: int, model: Any, device: torch.device) -> dict[str, Any]:
    """The processed images, videos and audio of a batch's rows (rows from a multimodal model's data)."""
    if not any(row.get("mm_inputs") for row in rows):
        return {}
    from engine.multimodal.predict import batch_media_inputs

    dtype = next(model.parameters()).dtype
    return batch_media_inputs(rows, width, device, dtype)


def _device_of(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


def run_predict(cfg: RunConfig, model: Any, tokenizer: Any, template: Any, rows: list[dict[str, Any]],
                out_dir: str | Path, event_writer: EventWriter | None = None, prefix: str = "predict",
                write: bool = True) -> dict[str, Any]:
    """Generate for every row in left-padded batches, write the predictions and return the metrics.

    Prompts are batched by length (``per_device_eval_batch_size`` at a time) to keep padding small, or in order
    with a ``repetition_penalty`` (it counts padding tokens too); the output keeps the input order. Decoding
    follows the ``generation`` section (greedy when ``do_sample`` is false).

    Args:
        cfg: The run config (``generation`` settings, ``per_device_eval_batch_size``, ``seed``).
        model: The model to generate with (on its device).
        tokenizer: Its tokenizer.
        template: The prompt template (its stop words end each reply).
        rows: Prediction rows: ``prompt_ids`` (the encoded prompt with the generation prompt), ``prompt``
            (its text) and ``label`` (the expected reply); rows with media also carry ``mm_inputs`` (see
            ``engine.multimodal.predict``), which reach ``generate`` with their batch.
        out_dir: Where the two files are written.
        event_writer: Receives ``{"event": "progress", "stage": "predict", "fraction"}`` after each batch.
        prefix: The metrics' prefix: ``predict``, or ``eval`` for an evaluation that generates
            (``predict_with_generate`` with ``do_eval``, as LLaMA-Factory scores it).
        write: Write the predictions file and ``{prefix}_results.json`` (an evaluation during training does not).

    Returns:
        ``{prefix}_bleu-4``, ``{prefix}_rouge-1``, ``{prefix}_rouge-2``, ``{prefix}_rouge-l`` (percentages),
        ``{prefix}_runtime`` (seconds), ``{prefix}_samples_per_second`` and ``{prefix}_steps_per_second``.
    """
    from transformers import set_seed

    out = Path(out_dir)
    if write:
        out.mkdir(parents=True, exist_ok=True)
    fields = [_row_fields(row, index) for index, row in enumerate(rows)]
    stop_ids = stop_token_ids(template, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop_ids[0] if stop_ids else 0)
    kwargs = generation_kwargs(cfg.generation, stop_ids, pad_id)
    batch_size = max(1, cfg.train.per_device_eval_batch_size)
    device = _device_of(model)
    order = list(range(len(fields)))
    if cfg.generation.repetition_penalty == 1.0:  # padding cannot change a reply: batch rows of like length
        order.sort(key=lambda i: len(fields[i][0]), reverse=True)
    # else a repetition penalty also counts the left padding's tokens, so rows are batched in order, as
    # LLaMA-Factory batches them: the same padding, the same replies
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    rank, world = rank_and_world()
    # a sharded model's forwards gather parameters from every rank: the ranks step together (a whole copy need not)
    sharded = world > 1 and (bool(getattr(cfg.parallel, "use_hyper_parallel", False)) or model_is_sharded(model))
    rounds = rank_batches(batches, rows, rank, world, sharded)  # one batch per rank and round (all on one process)
    if sharded:  # a rank whose rows have stopped keeps stepping with the others (their sharded layers gather)
        kwargs["synced_gpus"] = True
    replies: dict[int, str] = {}
    was_training = getattr(model, "training", False)
    model.eval()
    set_seed(cfg.train.seed)
    started = time.perf_counter()
    logger.info("Predicting %d examples in %d batches of up to %d%s.", len(fields), len(batches), batch_size,
                f", shared by {world} processes" if world > 1 else "")
    try:
        for done, (batch, own) in enumerate(rounds, start=1):
            input_ids, attention_mask = _left_pad([fields[i][0] for i in batch], pad_id, device)
            extra = _media_inputs([rows[i] for i in batch], input_ids.shape[1], model, device)
            with torch.inference_mode():
                output = model.generate(input_ids=input_ids, attention_mask=attention_mask, **extra, **kwargs)
            new_tokens = output[:own, input_ids.shape[1]:].tolist()  # borrowed rows' replies are dropped
            for index, ids in zip(batch, new_tokens):
                ids = _cut_at_stop(ids, set(stop_ids), pad_id)
                # as LLaMA-Factory decodes it (not stripped)
                replies[index] = tokenizer.decode(ids, skip_special_tokens=cfg.generation.skip_special_tokens)
            if event_writer is not None:
                event_writer.write({"event": "progress", "stage": "predict", "fraction": round(done / len(rounds), 4),
                                    "done": min(done * world * batch_size, len(fields)), "total": len(fields)})
    finally:
        if was_training:
            model.train()
    replies = gather_replies(replies, world)
    predictions = [replies[index] for index in range(len(fields))]
    runtime = time.perf_counter() - started
    writer = write and rank == 0  # the other ranks return the same metrics

    if writer:  # whole or not at all: a full disk leaves the predictions of an earlier run as they were
        write_text_atomic(out / PREDICTIONS_FILE, "".join(
            json.dumps({"prompt": prompt, "predict": predict, "label": label}, ensure_ascii=False) + "\n"
            for (_, prompt, label), predict in zip(fields, predictions)))
    scored = compute_generation_metrics(predictions, [label for _, _, label in fields])
    metrics: dict[str, Any] = {f"{prefix}_{name.removeprefix('predict_')}": value for name, value in scored.items()}
    metrics.update({
        f"{prefix}_runtime": round(runtime, 4),
        f"{prefix}_samples_per_second": round(len(fields) / runtime, 3) if runtime > 0 else 0.0,
        f"{prefix}_steps_per_second": round(len(rounds) / runtime, 3) if runtime > 0 else 0.0,
    })
    scores = ", ".join(f"{name}={value:.4f}" for name, value in metrics.items()  # (the files keep every digit)
                       if "bleu" in name or "rouge" in name)
    if writer:
        save_split_metrics(out, prefix, metrics)
        logger.info("Predictions written to %s: %s", out / PREDICTIONS_FILE, scores)
    elif not write:  # an evaluation that generates (the other ranks of a prediction say nothing)
        logger.info("Generated on %d evaluation rows: %s", len(fields), scores)
    return metrics
