"""engine.models.loader with a tiny Llama (2 layers, hidden 32) built from a config."""

from __future__ import annotations

import pytest
import torch
from tinymodels import graph_node_names

from engine.config import build_config
from engine.models import count_parameters, load_model, load_tokenizer, resolve_model_path

BLOCK_LINEARS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(["hello world, a tiny model for tests", "the quick brown fox"], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>")  # no pad token on purpose


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = _tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _cfg(path, **overrides):
    return build_config({"model_name_or_path": path, "finetuning_type": "lora", **overrides})


def _load(path, trainable=True, **overrides):
    cfg = _cfg(path, **overrides)
    return load_model(cfg.model, cfg.finetuning, is_trainable=trainable, train_args=cfg.train), cfg


def _logits(model):
    ids = torch.tensor([[1, 5, 9, 12, 3]])
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_tokenizer_pads_right_with_eos_as_pad(tiny_llama):
    tokenizer = load_tokenizer(_cfg(tiny_llama).model)
    assert tokenizer.padding_side == "right"
    assert tokenizer.pad_token == tokenizer.eos_token == "<|endoftext|>"
    assert load_tokenizer(_cfg(tiny_llama).model, padding_side="left").padding_side == "left"


def test_lora_all_targets_exactly_the_block_linears(tiny_llama):
    model, _ = _load(tiny_llama)
    config = model.peft_config["default"]
    assert set(config.target_modules) == BLOCK_LINEARS
    assert (config.r, config.lora_alpha, config.use_rslora, config.use_dora) == (8, 16, False, False)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert not any("lm_head" in n or "embed_tokens" in n for n in trainable)
    assert len(trainable) == 2 * 7 * 2  # A and B, 7 linears, 2 layers
    assert all(p.dtype == torch.float32 for p in model.parameters())
    n_trainable, total = count_parameters(model)
    assert n_trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert total == sum(p.numel() for p in model.parameters())
    assert model.training


def test_lora_options_reach_peft(tiny_llama):
    model, _ = _load(tiny_llama, lora_rank=4, lora_alpha=32, lora_dropout=0.1, use_rslora=True, use_dora=True,
                     lora_target="q_proj, v_proj", additional_target="embed_tokens")
    config = model.peft_config["default"]
    assert set(config.target_modules) == {"q_proj", "v_proj"}
    assert (config.r, config.lora_alpha, config.lora_dropout) == (4, 32, 0.1)
    assert config.use_rslora and config.use_dora
    assert list(config.modules_to_save) == ["embed_tokens"]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert any("embed_tokens.modules_to_save" in n for n in trainable)
    assert any("lora_magnitude_vector" in n for n in trainable)  # DoRA


def test_unknown_lora_target_is_a_clear_error(tiny_llama):
    with pytest.raises(ValueError, match="`lora_target` names modules this model does not have: qkv_proj"):
        _load(tiny_llama, lora_target="q_proj,qkv_proj")


@pytest.mark.parametrize(("layers", "modules", "expected"), [
    (1, "all", {"model.layers.1."}),
    (-1, "all", {"model.layers.0."}),
    (2, "all", {"model.layers.0.", "model.layers.1."}),
    (1, "mlp", {"model.layers.1.mlp."}),
    (1, "q_proj,input_layernorm", {"model.layers.1.self_attn.q_proj.", "model.layers.1.input_layernorm."}),
])
def test_freeze_trains_only_the_chosen_layers(tiny_llama, layers, modules, expected):
    model, _ = _load(tiny_llama, finetuning_type="freeze", freeze_trainable_layers=layers,
                     freeze_trainable_modules=modules)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable
    assert all(n.startswith(tuple(expected)) for n in trainable)
    for prefix in expected:
        assert any(n.startswith(prefix) for n in trainable)


def test_freeze_extra_modules_and_errors(tiny_llama):
    model, _ = _load(tiny_llama, finetuning_type="freeze", freeze_trainable_layers=1, freeze_extra_modules="norm")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert "model.norm.weight" in trainable
    assert "model.layers.0.input_layernorm.weight" not in trainable
    with pytest.raises(ValueError, match="Available: .*mlp.*self_attn"):
        _load(tiny_llama, finetuning_type="freeze", freeze_trainable_modules="attention")
    with pytest.raises(ValueError, match="between -2 and 2"):
        _load(tiny_llama, finetuning_type="freeze", freeze_trainable_layers=3)


def test_full_trains_everything(tiny_llama):
    model, _ = _load(tiny_llama, finetuning_type="full")
    assert all(p.requires_grad for p in model.parameters())
    assert count_parameters(model)[0] == count_parameters(model)[1]


def test_inference_model_is_frozen(tiny_llama):
    model, _ = _load(tiny_llama, trainable=False)
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())
    assert not hasattr(model, "peft_config")


def test_half_precision_training_upcasts_trainable_params(tiny_llama):
    model, _ = _load(tiny_llama, bf16=True)
    dtypes = {("lora_" in n): p.dtype for n, p in model.named_parameters()}
    assert dtypes == {True: torch.float32, False: torch.bfloat16}
    model, _ = _load(tiny_llama, pure_bf16=True)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_gradient_checkpointing(tiny_llama):
    model, _ = _load(tiny_llama, gradient_checkpointing=True)
    assert model.base_model.model.model.gradient_checkpointing  # set on the decoder by either API name
    assert model.config.use_cache is False


def test_adapter_save_and_reload_gives_identical_logits(tiny_llama, tmp_path):
    model, _ = _load(tiny_llama)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)  # make the adapter change the output
    model.eval()
    expected = _logits(model)
    model.save_pretrained(tmp_path / "adapter")
    base, _ = _load(tiny_llama, trainable=False)
    assert not torch.allclose(_logits(base), expected, atol=1e-3)

    merged, _ = _load(tiny_llama, trainable=False, adapter_name_or_path=str(tmp_path / "adapter"))
    assert not hasattr(merged, "peft_config")
    torch.testing.assert_close(_logits(merged), expected, atol=1e-5, rtol=1e-5)

    cfg = _cfg(tiny_llama, adapter_name_or_path=str(tmp_path / "adapter"))
    kept = load_model(cfg.model, cfg.finetuning, is_trainable=False, merge_adapters=False)
    assert hasattr(kept, "peft_config")
    torch.testing.assert_close(_logits(kept), expected, atol=1e-5, rtol=1e-5)

    resumed, _ = _load(tiny_llama, adapter_name_or_path=str(tmp_path / "adapter"))
    assert any(p.requires_grad for n, p in resumed.named_parameters() if "lora_" in n)
    resumed.eval()
    torch.testing.assert_close(_logits(resumed), expected, atol=1e-5, rtol=1e-5)

    stacked, _ = _load(tiny_llama, adapter_name_or_path=str(tmp_path / "adapter"), create_new_adapter=True)
    stacked.eval()  # the old adapter is merged; the new one starts at zero
    torch.testing.assert_close(_logits(stacked), expected, atol=1e-5, rtol=1e-5)
    assert list(stacked.peft_config) == ["default"]


def test_reward_task_gets_a_scalar_head(tiny_llama):
    cfg = _cfg(tiny_llama, stage="rm")
    tokenizer = load_tokenizer(cfg.model)
    model = load_model(cfg.model, cfg.finetuning, tokenizer, is_trainable=True, train_args=cfg.train)
    assert type(model.base_model.model).__name__ == "LlamaForSequenceClassification"
    assert "score" in model.peft_config["default"].modules_to_save
    assert "score" not in model.peft_config["default"].target_modules
    assert model.config.pad_token_id == tokenizer.pad_token_id
    with torch.no_grad():
        assert model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape == (1, 1)


def test_clear_errors(tiny_llama, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="Model path `/no/such/model` does not exist"):
        resolve_model_path("/no/such/model")
    with pytest.raises(ValueError, match="`model_name_or_path` is empty"):
        resolve_model_path("")
    (tmp_path / "weights.bin").write_bytes(b"0")
    with pytest.raises(ValueError, match="is a file"):
        resolve_model_path(str(tmp_path / "weights.bin"))
    with pytest.raises(ValueError, match="has no config.json"):
        resolve_model_path(str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="not found locally and no network: download it with .*set model_name_or_path"):
        resolve_model_path("some-org/some-model")
    assert resolve_model_path(tiny_llama) == tiny_llama
    with pytest.raises(ValueError, match="Adapter `.*missing` does not exist"):
        _load(tiny_llama, trainable=False, adapter_name_or_path=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="needs `finetuning_type: lora`"):
        _load(tiny_llama, trainable=False, finetuning_type="full", adapter_name_or_path=str(tmp_path))
    with pytest.raises(ValueError, match="needs a GPU"):
        _load(tiny_llama, quantization_bit=4)
    with pytest.raises(ValueError, match="float16 training is not supported on the CPU"):
        _load(tiny_llama, fp16=True)


def test_training_models_run_their_rmsnorms_as_one_node(tiny_llama):
    model, _ = _load(tiny_llama)
    flagged = [m for m in model.modules() if type(m).__name__ == "LlamaRMSNorm"]
    assert flagged and all(getattr(m, "_lf_rms_norm_node", False) for m in flagged)
    ids = torch.tensor([[1, 5, 9, 12, 3]])
    for _ in range(2):  # as loaded, and after the Trainer's eval()/train() switch around an evaluation
        nodes = graph_node_names(model(input_ids=ids).logits)
        assert "RmsNormNodeBackward" in nodes  # transformers' kernelize on train() once put the class forward back
        model.eval()
        model.train()


def test_a_model_without_sdpa_loads_with_eager_under_auto_and_explains_under_sdpa(tmp_path):
    """GPT-OSS has no SDPA: `auto` (the default) must not end in transformers' traceback."""
    from transformers import GptOssConfig, GptOssForCausalLM

    from engine.errors import ModelError
    from engine.models.loader import _from_pretrained

    config = GptOssConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, intermediate_size=32, num_local_experts=2,
                          num_experts_per_tok=1)
    GptOssForCausalLM(config).save_pretrained(tmp_path)
    kwargs = {"config": config, "attn_implementation": "sdpa"}
    model = _from_pretrained(GptOssForCausalLM, str(tmp_path), config, kwargs, auto_attention=True)
    assert model.config._attn_implementation == "eager"
    with pytest.raises(ModelError, match=r"does not support `sdpa` attention; set `flash_attn: eager`"):
        _from_pretrained(GptOssForCausalLM, str(tmp_path), config, kwargs, auto_attention=False)


def test_frozen_models_of_a_training_job_load_in_its_precision():
    """A reference model (DPO/KTO `ref_model`, ASFT's frozen copy) or an evaluation-only run loads in the training
    precision, the policy's (bf16 / fp16 win over infer_dtype; LLaMA-Factory loads both in the checkpoint's dtype,
    which for released checkpoints is that precision); chat and export (no training arguments) keep infer_dtype."""
    from engine.config import build_config
    from engine.models.loader import _requested_dtype

    cfg = build_config({"bf16": True})
    assert _requested_dtype(cfg.model, cfg.train, is_trainable=False) == "bfloat16"
    assert _requested_dtype(cfg.model, cfg.train, is_trainable=True) == "bfloat16"
    assert _requested_dtype(cfg.model, None, is_trainable=False) == "auto"
    chosen = build_config({"bf16": True, "infer_dtype": "float32"})
    assert _requested_dtype(chosen.model, chosen.train, is_trainable=False) == "bfloat16"
    plain = build_config({"infer_dtype": "float16"})  # no mixed precision: a frozen model takes infer_dtype
    assert _requested_dtype(plain.model, plain.train, is_trainable=False) == "float16"
