"""The row-sparse forward of PEFT's trainable-token layers: same logits and gradients as PEFT's own forward, and
the saved adapter stays a standard PEFT adapter."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from tinymodels import tiny_model_and_tokenizer

from engine.config.schema import FinetuningArgs, ModelArgs
from engine.models import adapters
from engine.models.token_rows import use_sparse_token_rows

NEW_TOKENS = ["<|new_a|>", "<|new_b|>", "<|new_c|>"]


def _resized_base():
    model, tokenizer = tiny_model_and_tokenizer()
    old = model.get_input_embeddings().weight.shape[0]
    tokenizer.add_special_tokens({"additional_special_tokens": NEW_TOKENS})
    torch.manual_seed(1)
    model.resize_token_embeddings(len(tokenizer))
    return model, tokenizer, list(range(old, len(tokenizer)))


def _peft(model, new_ids):
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                        trainable_token_indices={"embed_tokens": new_ids, "lm_head": new_ids})
    peft_model = get_peft_model(model, config)
    torch.manual_seed(2)
    for name, param in peft_model.named_parameters():
        if "trainable_tokens_delta" in name or "lora_B" in name:
            param.data.normal_(0, 0.5)  # trained-looking values, unlike the rows they replace
    return peft_model


def _batch(new_ids, vocab):
    torch.manual_seed(3)
    ids = torch.randint(0, vocab, (2, 12))
    ids[0, 2], ids[1, 5], ids[1, 7] = new_ids[0], new_ids[2], new_ids[1]
    return ids


def test_row_sparse_forward_matches_peft_in_logits_and_gradients():
    base, _, new_ids = _resized_base()
    plain = _peft(base, new_ids)
    sparse = copy.deepcopy(plain)
    assert use_sparse_token_rows(sparse) == 2
    assert use_sparse_token_rows(sparse) == 0  # applied once
    ids = _batch(new_ids, len(new_ids) + new_ids[0])
    plain.train(), sparse.train()
    out_plain, out_sparse = plain(input_ids=ids).logits, sparse(input_ids=ids).logits
    torch.testing.assert_close(out_sparse, out_plain, rtol=1e-5, atol=1e-5)
    (out_plain.square().mean()).backward()
    (out_sparse.square().mean()).backward()
    grads_plain = {n: p.grad for n, p in plain.named_parameters() if p.requires_grad}
    grads_sparse = {n: p.grad for n, p in sparse.named_parameters() if p.requires_grad}
    assert grads_plain.keys() == grads_sparse.keys()
    assert any("trainable_tokens_delta" in n for n in grads_sparse)
    for name, grad in grads_plain.items():
        torch.testing.assert_close(grads_sparse[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    # the frozen matrices get no gradient and the delta rows the only update
    assert base.get_input_embeddings().token_adapter.base_layer.weight.grad is None


def test_saved_adapter_loads_in_plain_peft_with_the_same_logits(tmp_path):
    base, _, new_ids = _resized_base()
    sparse = _peft(base, new_ids)
    use_sparse_token_rows(sparse)
    sparse.eval()
    ids = _batch(new_ids, new_ids[-1] + 1)
    with torch.no_grad():
        expected = sparse(input_ids=ids).logits
    sparse.save_pretrained(tmp_path / "adapter")
    fresh, _, _ = _resized_base()
    loaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    with torch.no_grad():
        got = loaded(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # merged (export) gives the same logits too
    with torch.no_grad():
        merged = loaded.merge_and_unload()(input_ids=ids).logits
    torch.testing.assert_close(merged, expected, rtol=1e-5, atol=1e-5)


def test_disabled_adapter_falls_back_to_the_base_rows():
    base, _, new_ids = _resized_base()
    plain = _peft(base, new_ids)
    sparse = copy.deepcopy(plain)
    use_sparse_token_rows(sparse)
    ids = _batch(new_ids, new_ids[-1] + 1)
    with torch.no_grad(), plain.disable_adapter(), sparse.disable_adapter():
        torch.testing.assert_close(sparse(input_ids=ids).logits, plain(input_ids=ids).logits)


def test_setup_lora_uses_the_row_sparse_forward_for_added_tokens():
    base, _, new_ids = _resized_base()
    base._lf_new_token_ids = new_ids
    model = adapters.setup_lora(base, ModelArgs(resize_vocab=True), FinetuningArgs(lora_target="q_proj,v_proj"),
                                is_trainable=True)
    flagged = [m for m in model.modules() if getattr(m, "_lf_sparse_token_rows", False)]
    assert len(flagged) == 2
    trainable = [n for n, p in model.named_parameters() if p.requires_grad and "trainable_tokens" in n]
    assert trainable and all(p.shape[0] == len(new_ids) for n, p in model.named_parameters() if n in trainable)


@pytest.mark.parametrize("bias", [True])
def test_a_head_with_bias_keeps_pefts_forward(bias):
    base, _, new_ids = _resized_base()
    head = base.lm_head
    base.lm_head = torch.nn.Linear(head.in_features, head.out_features, bias=bias)
    model = _peft(base, new_ids)
    assert use_sparse_token_rows(model) == 1  # the embedding only
