"""The SFT trainer's label-position loss equals the model's own loss, value and gradients."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments

from engine.train.sft import LabelPositionsTrainer, split_causal_lm


def tiny_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    return LlamaForCausalLM(cfg)


def batch():
    torch.manual_seed(1)
    ids = torch.randint(3, 97, (3, 12))
    labels = ids.clone()
    labels[:, :5] = -100
    labels[2, 9:] = -100
    mask = torch.ones_like(ids)
    mask[2, 10:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def test_same_loss_and_gradients_as_the_model(tmp_path):
    model = tiny_model()
    inputs = batch()
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    trainer = LabelPositionsTrainer(model=model, args=args)
    assert split_causal_lm(model) is not None
    ours = trainer.compute_loss(model, inputs)
    ours.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    reference = model(**inputs).loss
    reference.backward()
    assert torch.allclose(ours, reference, atol=1e-6)
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    n = int((inputs["labels"][:, 1:] != -100).sum())
    scaled = trainer.compute_loss(model, inputs, num_items_in_batch=torch.tensor(2 * n))
    assert torch.allclose(scaled, reference / 2, atol=1e-6)
