"""``eval_on_each_dataset``: each dataset of ``eval_dataset`` tokenized as an evaluation set of its own, so that the
Trainer evaluates them one by one (``eval_NAME_loss``, ...), as LLaMA-Factory does with the same key.

The rows are those of the combined evaluation set: dataset_info's ``num_samples`` draws come from one generator run
through the training datasets and then the evaluation datasets in order, as LLaMA-Factory's global one (an outside
check found other rows when each set drew from a fresh generator). These sets are tokenized per run, not cached.
KTO sets come paired (:func:`engine.data.kto_pairs.with_kl_pairs`), each over its own preprocessing batches as
LLaMA-Factory preprocesses each set apart, their skipped rows taking part as stand-ins (kl_stand_ins).
"""

from __future__ import annotations

from typing import Any


def _draws(data: Any, names: Any) -> bool:
    from engine.data.loader import split_names
    from engine.data.registry import resolve_dataset

    return any(resolve_dataset(name, data.dataset_dir).num_samples for name in split_names(names))


def eval_sets_by_name(cfg: Any, tokenizer: Any, template: Any, media: Any = None) -> dict[str, Any]:
    """Dataset name -> its tokenized evaluation rows, in ``eval_dataset``'s order."""
    import numpy as np

    from engine.data import (
        _tokenized,
        _without_media_model,
        configured_template,
        count_media,
        load_examples,
        tokenize_options,
    )
    from engine.data.loader import split_names

    data, stage, seed = cfg.data, cfg.finetuning.stage, cfg.train.seed
    rng = np.random.RandomState(seed)
    if data.dataset and _draws(data, data.dataset):  # the training datasets draw first, as in get_dataset
        load_examples(data, data.dataset, stage, seed, rng=rng)
    template = configured_template(cfg, template)
    opts = tokenize_options(data, stage)
    sets: dict[str, Any] = {}
    for name in split_names(data.eval_dataset):
        layout: dict[str, Any] = {}  # packed rows meet within LLaMA-Factory's batches, unusable rows included
        examples = load_examples(data, name, stage, seed, rng=rng, stand_ins=stage == "kto", layout=layout)
        if media is not None and count_media(examples):
            from engine.multimodal import refuse_unserved

            refuse_unserved(media)
        elif media is None:
            _without_media_model(stage, cfg.model.template, examples)
        sets[name], _ = _tokenized(examples, stage, tokenizer, template, opts, f"eval ({name})",
                                   media if media is not None and count_media(examples) else None,
                                   data.preprocessing_num_workers, data.preprocessing_batch_size, layout)
        if stage == "kto":
            from engine.data.kto_pairs import with_kl_pairs

            sets[name] = with_kl_pairs(sets[name], data, examples)
    return sets
