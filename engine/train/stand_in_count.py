"""Tokens seen without the stand-in media of multi-process runs (engine.multimodal.stand_in): the media collator
gives each packed batch the number of stand-in tokens it added, and the trainer leaves them out of its count."""

from __future__ import annotations

STAND_IN_TOKENS = "stand_in_tokens"
"""The key of a packed batch's stand-in token count: packed batches carry no attention mask, so transformers would
count the stand-ins among the tokens seen (``num_input_tokens_seen``, the log's tokens/s); the trainer takes it out
before the model sees the batch."""


class StandInTokensMixin:
    """Put before ``transformers.Trainer`` in the bases: packed batches' stand-in tokens are not counted as tokens
    seen, and the count's key never reaches the model."""

    def _track_num_input_tokens(self, inputs):
        extra = inputs.get(STAND_IN_TOKENS) if isinstance(inputs, dict) else None
        if extra is None:
            return super()._track_num_input_tokens(inputs)
        inputs = {key: value for key, value in inputs.items() if key != STAND_IN_TOKENS}
        if self.args.include_num_input_tokens_seen != "non_padding" or "attention_mask" in inputs:
            return super()._track_num_input_tokens(inputs)
        import torch

        # transformers' count of a batch without a mask (the ids that are not the pad id), less the stand-ins; one
        # gather per step, as transformers' own count does, so every rank joins it whichever branch it takes
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        pad = getattr(tokenizer, "pad_token_id", None)
        ids = inputs["input_ids"]
        local = int((ids != pad).sum()) if pad is not None else ids.numel()
        local = torch.as_tensor(local - int(extra), device=self.args.device, dtype=torch.int64)
        self.state.num_input_tokens_seen += self.accelerator.gather(local).sum().item()

    def _prepare_inputs(self, inputs):
        if isinstance(inputs, dict) and STAND_IN_TOKENS in inputs:
            inputs = {key: value for key, value in inputs.items() if key != STAND_IN_TOKENS}
        return super()._prepare_inputs(inputs)
