"""The reward head as LLaMA-Factory 0.9.5 starts, trains and reads it, on transformers' ``*ForSequenceClassification``;
and LLaMA-Factory's own rm outputs (a value head beside a causal LM) read as it reads them.

LLaMA-Factory's rm stage wraps the causal LM (its adapters already made) in TRL's ``AutoModelForCausalLMWithValueHead``:
a ``ValueHead`` of dropout (p 0.1, active in training only) and ``nn.Linear(hidden, 1)`` with a bias, left at
PyTorch's default initialisation. Here the head is transformers' ``score`` (a ``Linear`` without bias, drawn from
``normal(0, initializer_range)`` while the checkpoint loads, before the adapters). With the same seed the two runs
then start from other head weights *and* other LoRA weights (the head's draw comes first here, so every LoRA ``A``
matrix is drawn from another point of the random stream), and LLaMA-Factory's dropout masks are missing: the losses
differ from the first step.

To start and train as it does, a new head's load draws nothing from the random stream (:func:`quiet_head_draw`),
and once the adapters are set up :func:`draw_lf_head` draws ``nn.Linear(hidden, 1)`` as TRL's ValueHead does
(weight, then bias: the same numbers from the same point of the stream) and puts its weight into ``score``;
:func:`add_head_dropout` applies the head's dropout in training. The bias is left out (``score`` has none, and the
folders every reader here loads keep transformers' layout): it adds the same constant to the chosen and the rejected
score, so the loss, its gradients and the accuracy are those without it; only the absolute scores differ by it.

Which token is scored: LLaMA-Factory takes each row's value at its last attended position (``attention_mask.sum(-1) -
1`` on its right-padded rows); transformers' pooling takes the last token that is not the pad token, which is the
token before a reply's closing EOS wherever the pad token is that EOS (a tokenizer without one gets EOS as PAD, and
Llama 3's rows end with it). :func:`score_last_attended` pools as LLaMA-Factory does.

An rm output of LLaMA-Factory holds the causal LM (a ``CAUSAL_LM`` LoRA adapter or a whole model) and the head in
``value_head.safetensors`` (``v_head.summary.weight`` and ``.bias``; ``value_head.bin`` without safetensors).
:class:`ValueHeadScorer` scores with them as its ``get_scores`` does: the last hidden state through the head (in
float32), at each row's last attended position.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

VALUE_HEAD_DROPOUT = 0.1
"""TRL's ValueHead dropout when the model config has no ``summary_dropout_prob`` (LLaMA-Factory sets none)."""

HEAD_NAME = "score"
VALUE_HEAD_FILES = ("value_head.safetensors", "value_head.bin")
VALUE_HEAD_KEYS = ("v_head.summary.weight", "v_head.summary.bias")


@contextmanager
def quiet_head_draw(active: bool) -> Iterator[None]:
    """While loading: the CPU random stream left as it was (transformers draws the new head's weights from it)."""
    if not active:
        yield
        return
    import torch

    state = torch.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(state)


def _head_linears(model: Any) -> list[Any]:
    """The ``score`` Linear layers (PEFT keeps the original and the trained copy of a ``modules_to_save`` head)."""
    import torch

    return [module for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and HEAD_NAME in name.split(".") and module.out_features == 1]


def draw_lf_head(model: Any, *, new: bool) -> bool:
    """Draw the head as TRL's ValueHead (``nn.Linear(hidden, 1)``, default init, float32 on the CPU) and, for a
    ``new`` head, copy its weight into every ``score`` Linear (LLaMA-Factory draws a head in any case and then loads
    a saved one over it); False when the model has no ``score``."""
    import torch

    heads = _head_linears(model)
    if not heads:
        return False
    fresh = torch.nn.Linear(heads[0].in_features, 1)  # weight, then bias: the draws TRL's ValueHead makes
    if not new:
        return True
    with torch.no_grad():
        for head in heads:
            if head.weight.shape != fresh.weight.shape:  # partitioned (DeepSpeed ZeRO-3): its own start stays
                continue
            head.weight.copy_(fresh.weight.to(device=head.weight.device, dtype=head.weight.dtype))
    return True


def _dropout(module: Any, args: tuple) -> tuple:
    import torch.nn.functional as F

    return (F.dropout(args[0], VALUE_HEAD_DROPOUT, module.training), *args[1:])


def add_head_dropout(model: Any) -> Any:
    """Dropout on the head's input in training (the value head's); a hook, so the saved weights are unchanged.
    Returns the hook's handle (None when the model has no ``score``)."""
    for name, module in model.named_modules():
        if name.split(".")[-1] == HEAD_NAME:  # the outermost (PEFT's wrapper when the head is a modules_to_save)
            return module.register_forward_pre_hook(_dropout)
    return None


def last_attended(mask: Any) -> Any:
    """Each row's last position with ``attention_mask`` 1 (``mask.sum(-1) - 1`` for right padding; also right for
    left padding)."""
    import torch

    positions = torch.arange(mask.shape[-1], device=mask.device)
    return (positions * (mask != 0)).argmax(-1)


def score_last_attended(model: Any) -> list[Any]:
    """Make a ``*ForSequenceClassification`` (PEFT-wrapped or not) return each row's score at its last attended
    position; returns the hooks' handles (none when the model has no ``score``)."""
    import torch

    head = next((module for name, module in model.named_modules() if name.split(".")[-1] == HEAD_NAME), None)
    classifier = next((module for module in model.modules()
                       if type(module).__name__.endswith("ForSequenceClassification")), None)
    if head is None or classifier is None:
        return []
    kept: dict[str, Any] = {}

    def keep(module: Any, args: tuple, output: Any) -> None:
        kept["logits"] = output

    def pool(module: Any, args: tuple, kwargs: dict, output: Any) -> Any:
        logits, mask = kept.pop("logits", None), kwargs.get("attention_mask")
        if mask is None and len(args) > 1:
            mask = args[1]
        if logits is None or mask is None or logits.dim() != 3:
            return output
        rows = torch.arange(logits.shape[0], device=logits.device)
        output["logits"] = logits[rows, last_attended(mask).to(logits.device)]
        return output

    return [head.register_forward_hook(keep), classifier.register_forward_hook(pool, with_kwargs=True)]


def value_head_file(folder: Any) -> Any:
    """The LLaMA-Factory value-head file in ``folder`` (a Path), or None."""
    from pathlib import Path

    for name in VALUE_HEAD_FILES:
        path = Path(folder).expanduser() / name
        if path.is_file():
            return path
    return None


def _head_problem(path: Any, held: dict[str, tuple[int, ...]]) -> str | None:
    """Why tensors of these shapes are not LLaMA-Factory's value head (None: they are)."""
    weight, bias = (held.get(key) for key in VALUE_HEAD_KEYS)
    if weight is not None and bias is not None and len(weight) == 2 and weight[0] == 1 and weight[1] > 0 \
            and all(size == 1 for size in bias):  # one number ([1], or [] / [1, 1] as other writers keep it)
        return None
    shown = ", ".join(f"{key} {shape}" for key, shape in list(held.items())[:8])
    return (f"The value head {path} holds {shown or 'nothing'}, not LLaMA-Factory's {' and '.join(VALUE_HEAD_KEYS)} "
            "(shapes [1, hidden] and [1]); give the output_dir of an rm run of LLaMA-Factory as it saved it.")


def value_head_inputs(path: Any) -> tuple[int | None, str | None]:
    """Without torch (a pre-flight check): the hidden size a ``value_head.safetensors`` takes, from its header, or
    why the file is not a value head. ``(None, None)`` for a ``.bin`` (a pickle: read when the run loads it)."""
    import json
    import struct

    if not str(path).endswith(".safetensors"):
        return None, None
    unreadable = (f"The value head {path} is not a safetensors file ({{}}); it should be the value_head.safetensors "
                  "an rm run of LLaMA-Factory saved: copy it again from that run's output_dir.")
    try:
        with open(path, "rb") as handle:
            size = struct.unpack("<Q", handle.read(8))[0]
            if size > 1 << 24:
                return None, unreadable.format(f"a header of {size:,} bytes")
            header = json.loads(handle.read(size).decode("utf-8"))
    except (OSError, struct.error, UnicodeDecodeError, ValueError, RecursionError) as err:
        why = ("shorter than its header" if isinstance(err, struct.error)
               else "its header is nested too deeply" if isinstance(err, RecursionError) else type(err).__name__)
        return None, unreadable.format(why)
    if not isinstance(header, dict):
        return None, unreadable.format("its header is not a table of tensors")
    held = {key: tuple(info.get("shape") or ()) for key, info in header.items()
            if key != "__metadata__" and isinstance(info, dict) and isinstance(info.get("shape"), list)}
    problem = _head_problem(path, held)
    return (None, problem) if problem else (held[VALUE_HEAD_KEYS[0]][1], None)


def read_value_head(path: Any) -> dict[str, Any]:
    """``v_head.summary.weight`` ([1, hidden]) and ``v_head.summary.bias`` ([1]) from a value-head file; a file
    without them, with other shapes or with values that are not numbers (NaN, inf) is refused naming what it
    holds."""
    import torch

    from engine.errors import ModelError

    try:
        if str(path).endswith(".safetensors"):
            from safetensors.torch import load_file

            tensors = load_file(str(path))
        else:  # weights_only: a pickle that would run code is refused, not run
            tensors = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a damaged or foreign file: say which
        reason = (str(err).strip().splitlines() or [""])[0][:300]
        raise ModelError(f"The value head {path} cannot be read ({type(err).__name__}: {reason}); it should be the "
                         "value_head.safetensors an rm run of LLaMA-Factory saved: copy it again from that run's "
                         "output_dir.") from None
    tensors = tensors if isinstance(tensors, dict) else {}
    problem = _head_problem(path, {str(key): tuple(value.shape) for key, value in tensors.items()
                                   if isinstance(value, torch.Tensor)}) if tensors else None
    if problem or not tensors:
        raise ModelError(problem or _head_problem(path, {}))
    weight, bias = (tensors[key].float() for key in VALUE_HEAD_KEYS)
    if not (torch.isfinite(weight).all() and torch.isfinite(bias).all()):
        raise ModelError(f"The value head {path} holds values that are not numbers (NaN or inf): the rm run that "
                         "saved it diverged or the file is damaged. Train the reward model again (a lower "
                         "learning_rate), or give another rm run's output_dir.")
    return {"weight": weight, "bias": bias.reshape(1)}


class ValueHeadScorer:
    """A causal LM and LLaMA-Factory's value head: scores a right-padded batch as its ``get_scores`` does."""

    def __init__(self, model: Any, head: dict[str, Any]) -> None:
        import torch

        from engine.errors import ModelError

        self.model = model
        causal = model.get_base_model() if hasattr(model, "get_base_model") else model  # under a PEFT wrapper
        self.body = getattr(causal, "base_model", causal)  # the decoder without its LM head (no vocabulary logits)
        hidden = model.get_input_embeddings().weight.shape[-1]
        if head["weight"].shape[-1] != hidden:
            raise ModelError(f"The value head has {head['weight'].shape[-1]} inputs and the model's hidden size is "
                             f"{hidden}: it was trained on another model. Give the model it was trained with.")
        device = next(model.parameters()).device
        self.head = torch.nn.Linear(hidden, 1).to(device)
        with torch.no_grad():
            self.head.weight.copy_(head["weight"])
            self.head.bias.copy_(head["bias"])
        self.head.requires_grad_(False)

    def parameters(self) -> Any:
        return self.model.parameters()

    def __call__(self, input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
        """Scores, shape [batch, 1] (as a ``*ForSequenceClassification``'s logits)."""
        import torch

        out = self.body(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                        use_cache=False, return_dict=True)
        hidden = out.hidden_states[-1].to(self.head.weight.device, torch.float32)
        values = self.head(hidden).squeeze(-1)
        rows = torch.arange(values.shape[0], device=values.device)
        return values[rows, last_attended(attention_mask).to(values.device)].unsqueeze(-1)
