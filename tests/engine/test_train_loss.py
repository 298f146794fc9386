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


def test_trained_token_rows_take_the_chunked_head_with_the_models_loss_and_gradients(tmp_path, monkeypatch):
    """With a template's added tokens (PEFT trainable-token rows on the head), the loss is the chunked one and
    equals PEFT's own model loss, with the same gradients for LoRA and the token rows."""
    import copy

    from peft import LoraConfig, get_peft_model

    from engine.models.token_rows import use_sparse_token_rows
    from engine.train import head_loss

    new = [94, 95, 96]
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                        trainable_token_indices={"embed_tokens": new, "lm_head": new})
    reference = get_peft_model(tiny_model(), config)
    torch.manual_seed(2)
    for name, param in reference.named_parameters():
        if "trainable_tokens_delta" in name or "lora_B" in name:
            param.data.normal_(0, 0.5)
    model = copy.deepcopy(reference)
    assert use_sparse_token_rows(model) == 2
    calls = []
    original = head_loss.HeadCrossEntropySum.apply
    monkeypatch.setattr(head_loss.HeadCrossEntropySum, "apply",
                        lambda *args: calls.append(args[3] is not None) or original(*args))
    inputs = batch()
    inputs["input_ids"][0, 6] = inputs["labels"][0, 6] = 95  # a trained new token
    trainer = LabelPositionsTrainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[],
                                                                        use_cpu=True))
    ours = trainer.compute_loss(model, inputs)
    assert calls == [True]
    ours.backward()
    theirs = reference(**inputs).loss
    theirs.backward()
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    grads = {n: p.grad for n, p in reference.named_parameters() if p.requires_grad}
    assert any("trainable_tokens_delta" in n for n in grads)
    for name, param in model.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_mixed_precision_runs_the_parts_under_the_models_autocast(tmp_path):
    """With bf16 mixed precision, accelerate wraps the model's forward in autocast; the parts called past it run
    under the same context. Freeze tuning upcasts its trained layers to float32 beside frozen bfloat16 ones (the
    head among them): without the context the head met float32 states and the first step failed on the dtypes."""
    model = tiny_model().to(torch.bfloat16)
    for param in model.parameters():
        param.requires_grad_(False)
    for param in model.model.layers[-1].parameters():
        param.data = param.data.float()
        param.requires_grad_(True)
    inputs = batch()
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=True)
    trainer = LabelPositionsTrainer(model=model, args=args)
    ours = trainer.compute_loss(model, inputs)
    ours.backward()
    grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reference = model(**inputs).loss
    reference.backward()
    torch.testing.assert_close(ours, reference.float(), rtol=1e-3, atol=1e-3)
    for g, p in zip(grads, [p for p in model.parameters() if p.requires_grad]):
        torch.testing.assert_close(g, p.grad, rtol=2e-2, atol=1e-3)


def test_a_step_with_nothing_to_train_is_a_zero_loss_with_a_warning(tmp_path, caplog):
    """Every label masked (rows whose replies cutoff_len cut away): LLaMA-Factory's loss is 0/0, NaN; here the
    label-position loss is 0 with a zero gradient, and a warning names the step and the cause, once per step. The
    model's own loss path (label smoothing) stays NaN, as LLaMA-Factory's, with the same warning."""
    import math

    model = tiny_model()
    inputs = batch()
    inputs["labels"][:] = -100
    trainer = LabelPositionsTrainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[],
                                                                        use_cpu=True))
    with caplog.at_level("WARNING", logger="engine.train.sft"):
        for count in (torch.tensor(0), None):
            loss = trainer.compute_loss(model, inputs, num_items_in_batch=count)
            loss.backward()
            assert float(loss.detach()) == 0.0
            assert all(p.grad is None or not p.grad.any() for p in model.parameters())
    assert caplog.text.count("Step 1: none of its rows has a token to train on") == 1
    assert "rows whose replies cutoff_len cut away" in caplog.text and "Raise cutoff_len" in caplog.text
    caplog.clear()
    smoothing = LabelPositionsTrainer(model=model, args=TrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, label_smoothing_factor=0.1))
    with caplog.at_level("WARNING", logger="engine.train.sft"):
        loss = smoothing.compute_loss(model, inputs, num_items_in_batch=torch.tensor(0))
    assert math.isnan(float(loss.detach())) and "Its loss is NaN" in caplog.text
