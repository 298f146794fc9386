"""Tiny offline models for the engine tests: a 2-layer Llama (hidden 32) and a byte-level BPE tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch

CHATML_SPECIALS = ("<pad>", "</s>", "<|im_start|>", "<|im_end|>")
CORPUS = ("Hello, how are you? The cat sat on the mat.", "你好，世界。")


def tiny_model_and_tokenizer(specials: tuple[str, ...] = CHATML_SPECIALS, extra_text: tuple[str, ...] = (),
                             max_positions: int = 256):
    """(model in eval mode, tokenizer); special tokens take the first ids in the order given."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(CORPUS + tuple(extra_text)) * 4, trainer)
    additional = [t for t in specials if t not in ("<pad>", "</s>")]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="</s>", pad_token="<pad>",
                                        additional_special_tokens=additional)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config).eval(), tokenizer


def build_tiny_model(folder: str | Path, **kwargs) -> Path:
    """Save a tiny model and its tokenizer to ``folder`` (keyword arguments as for tiny_model_and_tokenizer)."""
    model, tokenizer = tiny_model_and_tokenizer(**kwargs)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def graph_node_names(tensor) -> list[str]:
    """The class names of the autograd nodes behind ``tensor``, from its own node down."""
    seen, stack, names = set(), [tensor.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names
