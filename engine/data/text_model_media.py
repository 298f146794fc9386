"""Rows with images, videos or audio for a model that takes text only: the refusal the data loader raises when the
rows load, and that ``lf-engine check`` (and the board's check before Start) gives before the run starts.

LLaMA-Factory 0.9.5's media plugin checks every conversation it formats, in sft, rm, dpo, kto and prediction (and
ppo): a text template refuses a row with media ("This model does not support image input. Please check whether the
correct `template` is used."), a media template on a text model refuses it for want of a processor. Pre-training reads
only the text of such rows, there and here; GRPO and RLOO (ours alone) read prompts as text.
"""

from __future__ import annotations

UNREFUSED_STAGES = ("pt", "grpo", "rloo")
"""Stages whose data path trains rows with media as text for a text-only model (pt with a warning; the RL stages
read the prompts' text)."""


def text_model_refusal(head: str, template: str | None) -> str:
    """The refusal of rows with media for a text-only model. ``head`` says which rows, up to the verb ("3 of 7 rows
    (mllm_demo) have"); ``template``: the config's ``template`` (empty: the tokenizer's chat template)."""
    used = f"template `{template}`" if template else "the tokenizer's chat template"
    return (f"{head} images, videos or audio, but this model takes text only ({used}, no image/video/audio "
            "processor); LLaMA-Factory refuses such rows too. Use a multimodal model with its template (e.g. a "
            "Qwen2-VL model with `template: qwen2_vl`), or a dataset without media.")
