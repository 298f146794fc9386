"""Prediction shared by the processes of a multi-process run (torchrun, accelerate, DeepSpeed), as LLaMA-Factory's
``Seq2SeqTrainer.predict`` shares it: each rank generates for its share of the batches and rank 0 gathers the
replies, so N processes predict N times faster instead of each generating every reply.

Every rank makes the same number of ``generate`` calls, in rounds of one batch per rank: round ``j`` is batches
``j * world .. j * world + world - 1``, and a rank whose batch in the last round does not exist generates for the
round's first batch again and drops the replies. ``generate`` runs with ``synced_gpus`` so that a rank whose rows
have stopped keeps stepping with the others. Under FSDP and DeepSpeed ZeRO-3 each forward of a tower gathers its
sharded parameters from every rank, so in a round where some rank's batch has images (videos, audio) every rank's
batch must have them: a rank whose batch lacks media that another rank's batch of the round has borrows a row that
has them from that batch, generates for it too and drops its reply. (The borrowed row makes that batch wider; with
a ``repetition_penalty``, which counts left padding, its replies can then differ from a one-process run's.)
"""

from __future__ import annotations

from typing import Any


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes (0, 1 without an initialised process group)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def model_is_sharded(model: Any) -> bool:
    """Whether the model's forward gathers parameters from the other ranks (FSDP2 DTensors, FSDP1, DeepSpeed
    ZeRO-3), so that every rank must make the same forward calls through the same modules. True when unsure."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without distributed
        return True
    try:
        for param in model.parameters():
            if isinstance(param, DTensor) or hasattr(param, "ds_id"):
                return True
        for module in model.modules():
            name = type(module).__name__
            if name in ("FullyShardedDataParallel", "DistributedDataParallel") or name.startswith("FSDP"):
                return True
    except (AttributeError, TypeError):
        return True
    return False


def media_keys(row: dict[str, Any]) -> frozenset[str]:
    """The processed-media inputs of a prediction row (their names show which towers the row runs)."""
    return frozenset(row.get("mm_inputs") or {})


def rank_batches(batches: list[list[int]], rows: list[dict[str, Any]], rank: int,
                 world: int, sharded: bool = True) -> list[tuple[list[int], int]]:
    """This rank's batch in each round: (the row indices it generates for, how many of them are its own).

    The indices after the first ``own`` ones are borrowed (their replies are dropped): the round's first batch
    when this rank has none left, and rows carrying media that another batch of the round has and this one lacks.
    Without a sharded model (``sharded`` false: DDP, or whole copies) the ranks' forwards are independent: each rank
    takes its own batches only, none borrowed and none generated again.
    """
    if not sharded:
        return [(list(batch), len(batch)) for batch in batches[rank::world]]
    out = []
    for start in range(0, len(batches), world):
        round_batches = batches[start:start + world]
        mine = round_batches[rank] if rank < len(round_batches) else []
        indices = list(mine) if mine else list(round_batches[0])
        own = len(mine)
        need = frozenset().union(*(media_keys(rows[i]) for batch in round_batches for i in batch))
        have = frozenset().union(*(media_keys(rows[i]) for i in indices))
        for batch in round_batches:
            for i in batch:
                if need <= have:
                    break
                if media_keys(rows[i]) - have and i not in indices:
                    indices.append(i)
                    have |= media_keys(rows[i])
        out.append((indices, own))
    return out


def gather_replies(replies: dict[int, str], world: int) -> dict[int, str]:
    """Every rank's replies (row index -> text), merged on every rank."""
    if world <= 1:
        return replies
    import torch.distributed as dist

    parts: list[Any] = [None] * world
    dist.all_gather_object(parts, replies)
    merged: dict[int, str] = {}
    for part in parts:
        merged.update(part or {})
    return merged
