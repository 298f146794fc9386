"""Tiny random vision-language models of the real transformers classes, built from configs (no download).

``build_tiny_vlm(family)`` returns ``(model, processor)`` for each of :data:`FAMILIES`: a byte-level BPE tokenizer
carrying the family's special tokens, the family's PIL image processor (no torchvision needed), the real processor
class, and a 1-2 layer model whose token ids match the tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = ("Hello, who are they? They are playing soccer on the field.", "What is in the picture? A red square.",
          "Describe the video and the sound.")
FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "glm4v", "gemma3", "gemma4", "llava", "llava_next",
            "intern_vl", "qwen2_5_omni", "llava_next_video", "video_llava", "minicpmv4_6")


def _tokenizer(specials: list[str], *, eos: str, pad: str, bos: str | None = None, named: dict | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=360, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(CORPUS) * 4, trainer)
    kwargs = {"bos_token": bos} if bos else {}
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=pad, extra_special_tokens=named or {},
                                   **kwargs)


def _qwen_text(tokenizer, **extra):
    return {"vocab_size": len(tokenizer) + 8, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096,
            "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id, **extra}


def _qwen(family: str):
    from transformers import Qwen2VLImageProcessorPil

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|image_pad|>", "<|video_pad|>"]
    tokenizer = _tokenizer(specials, eos="<|im_end|>", pad="<|endoftext|>")
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    image_processor = Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56 * 4)
    if family == "qwen2_vl":
        from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

        config = Qwen2VLConfig(
            text_config=_qwen_text(tokenizer, rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                               "rope_theta": 10000.0}),
            vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                           "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
            **ids)
        model_cls, processor_cls = Qwen2VLForConditionalGeneration, Qwen2VLProcessor
    else:
        from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

        image_processor = Qwen2VLImageProcessorPil(min_pixels=32 * 32, max_pixels=64 * 64 * 4, patch_size=16)
        config = Qwen3VLConfig(
            text_config=_qwen_text(tokenizer, head_dim=8, rope_parameters={
                "rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0, "mrope_interleaved": True}),
            vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                           "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
                           "num_position_embeddings": 64, "deepstack_visual_indexes": [0]},
            **ids)
        model_cls, processor_cls = Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    return model_cls, config, processor_cls, {"image_processor": image_processor, "tokenizer": tokenizer}


def _qwen2_5_vl():
    """Qwen2.5-VL: Qwen2-VL's tokens and image processor, window attention in the vision tower, video time scale."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor

    _, qwen2, _, parts = _qwen("qwen2_vl")
    ids = {key: getattr(qwen2, key) for key in ("image_token_id", "video_token_id", "vision_start_token_id",
                                                 "vision_end_token_id")}
    config = Qwen2_5_VLConfig(
        text_config=_qwen_text(parts["tokenizer"], rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                                    "rope_theta": 10000.0}),
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
                       "window_size": 56, "fullatt_block_indexes": [1], "tokens_per_second": 2},
        **ids)
    return Qwen2_5_VLForConditionalGeneration, config, Qwen2_5_VLProcessor, parts


def _qwen3_5():
    """Qwen3.5: a hybrid (linear + full attention) language model with Qwen3-VL's processor and vision tokens."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3VLProcessor

    _, qwen3, _, parts = _qwen("qwen3_vl")
    ids = {key: getattr(qwen3, key) for key in ("image_token_id", "video_token_id", "vision_start_token_id",
                                                 "vision_end_token_id")}
    config = Qwen3_5Config(
        text_config=_qwen_text(parts["tokenizer"], head_dim=8, layer_types=["linear_attention", "full_attention"],
                               linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
                               linear_num_value_heads=4,
                               rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                "rope_theta": 10000.0, "mrope_interleaved": True,
                                                "partial_rotary_factor": 0.5}),
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                       "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
                       "num_position_embeddings": 64},
        **ids)
    return Qwen3_5ForConditionalGeneration, config, Qwen3VLProcessor, parts


def _glm4v():
    from transformers import Glm4vConfig, Glm4vForConditionalGeneration, Glm4vImageProcessorPil, Glm4vProcessor

    specials = ["<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|system|>", "<|observation|>",
                "<|begin_of_image|>", "<|end_of_image|>", "<|image|>", "<|begin_of_video|>", "<|end_of_video|>",
                "<|video|>", "</answer>"]
    tokenizer = _tokenizer(specials, eos="<|endoftext|>", pad="<|endoftext|>")
    tid = tokenizer.convert_tokens_to_ids
    config = Glm4vConfig(
        text_config={"vocab_size": len(tokenizer) + 8, "hidden_size": 64, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 4096, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id,
                     "rope_parameters": {"rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0,
                                         "partial_rotary_factor": 0.5}},
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                       "image_size": 56, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "out_hidden_size": 64},
        image_token_id=tid("<|image|>"), video_token_id=tid("<|video|>"),
        image_start_token_id=tid("<|begin_of_image|>"), image_end_token_id=tid("<|end_of_image|>"),
        video_start_token_id=tid("<|begin_of_video|>"), video_end_token_id=tid("<|end_of_video|>"))
    image_processor = Glm4vImageProcessorPil(size={"shortest_edge": 28 * 28, "longest_edge": 56 * 56 * 4})
    return Glm4vForConditionalGeneration, config, Glm4vProcessor, {"image_processor": image_processor,
                                                                   "tokenizer": tokenizer}


def _gemma3():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil, Gemma3Processor

    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    specials = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", *named.values()]
    tokenizer = _tokenizer(specials, eos="<eos>", pad="<pad>", bos="<bos>", named=named)
    config = Gemma3Config(
        text_config={"vocab_size": len(tokenizer) + 8, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                     "sliding_window": 64, "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
                     "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 56, "patch_size": 14},
        mm_tokens_per_image=4, boi_token_index=tokenizer.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tokenizer.convert_tokens_to_ids("<end_of_image>"),
        image_token_index=tokenizer.convert_tokens_to_ids("<image_soft_token>"))
    image_processor = Gemma3ImageProcessorPil(size={"height": 56, "width": 56})
    return Gemma3ForConditionalGeneration, config, Gemma3Processor, {
        "image_processor": image_processor, "tokenizer": tokenizer, "image_seq_length": 4}


def _gemma4(audio: bool = False):
    from transformers import (
        Gemma4AudioFeatureExtractor,
        Gemma4Config,
        Gemma4ForConditionalGeneration,
        Gemma4ImageProcessorPil,
        Gemma4Processor,
    )

    named = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>", "boa_token": "<|audio>",
             "eoa_token": "<audio|>", "audio_token": "<|audio|>"}
    specials = ["<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|video|>", *named.values()]
    tokenizer = _tokenizer(specials, eos="<eos>", pad="<pad>", bos="<bos>", named=named)
    tid = tokenizer.convert_tokens_to_ids
    config = Gemma4Config(
        text_config={"vocab_size": len(tokenizer) + 8, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                     "global_head_dim": 8, "sliding_window": 64, "layer_types": ["sliding_attention", "full_attention"],
                     "vocab_size_per_layer_input": len(tokenizer) + 8, "hidden_size_per_layer_input": 8,
                     "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
                     "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "num_key_value_heads": 2, "head_dim": 16, "patch_size": 16, "pooling_kernel_size": 2,
                       "position_embedding_size": 64},
        audio_config=({"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                       # the first channel count must equal the feature extractor's 128 mel bins (transformers sizes
                       # the projection after the two stride-2 convs from it)
                       "subsampling_conv_channels": [128, 4], "output_proj_dims": 32} if audio else None),
        boi_token_id=tid("<|image>"), eoi_token_id=tid("<image|>"), image_token_id=tid("<|image|>"),
        video_token_id=tid("<|video|>"), boa_token_id=tid("<|audio>"), eoa_token_index=tid("<audio|>"),
        audio_token_id=tid("<|audio|>"))
    parts = {"image_processor": Gemma4ImageProcessorPil(patch_size=16, max_soft_tokens=70, pooling_kernel_size=2),
             "tokenizer": tokenizer, "feature_extractor": Gemma4AudioFeatureExtractor(), "image_seq_length": 70}
    return Gemma4ForConditionalGeneration, config, Gemma4Processor, parts


def _llava():
    from transformers import CLIPImageProcessorPil, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = _tokenizer(["<pad>", "</s>", "<s>", "<image>"], eos="</s>", pad="<pad>", bos="<s>",
                           named={"image_token": "<image>"})
    config = LlavaConfig(
        text_config={"model_type": "llama", "vocab_size": len(tokenizer) + 8, "hidden_size": 32,
                     "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
                     "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id},
        vision_config={"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                       "projection_dim": 32},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_layer=-1)
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    return LlavaForConditionalGeneration, config, LlavaProcessor, {
        "image_processor": image_processor, "tokenizer": tokenizer, "patch_size": 14,
        "vision_feature_select_strategy": "default", "num_additional_image_tokens": 1}


def _llava_next():
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessorPil,
        LlavaNextProcessor,
    )

    _, llava, _, parts = _llava()
    config = LlavaNextConfig(text_config=llava.text_config.to_dict(), vision_config=llava.vision_config.to_dict(),
                             image_token_index=llava.image_token_index, vision_feature_layer=-1,
                             image_grid_pinpoints=[[28, 28], [28, 56], [56, 28], [56, 56]])
    parts["image_processor"] = LlavaNextImageProcessorPil(
        size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28},
        image_grid_pinpoints=[[28, 28], [28, 56], [56, 28], [56, 56]])
    return LlavaNextForConditionalGeneration, config, LlavaNextProcessor, parts


def _qwen2_audio():
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
    tokenizer = _tokenizer(specials, eos="<|im_end|>", pad="<|endoftext|>")
    config = Qwen2AudioConfig(
        text_config={"model_type": "qwen2", **_qwen_text(tokenizer)},
        audio_config={"model_type": "qwen2_audio_encoder", "num_mel_bins": 16, "encoder_layers": 1,
                      "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "d_model": 16, "max_source_positions": 1500},
        audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"))
    extractor = WhisperFeatureExtractor(feature_size=16, sampling_rate=16000)
    return Qwen2AudioForConditionalGeneration, config, Qwen2AudioProcessor, {
        "feature_extractor": extractor, "tokenizer": tokenizer}


def _intern_vl():
    from transformers import (
        GotOcr2ImageProcessorPil,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
    )

    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
             "video_token": "<video>"}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", *named.values()]
    tokenizer = _tokenizer(specials, eos="<|im_end|>", pad="<|endoftext|>", bos="<s>", named=named)
    config = InternVLConfig(
        vision_config={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                       "image_size": [56, 56], "patch_size": [14, 14]},
        text_config={"model_type": "qwen2", **_qwen_text(tokenizer)},
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"), image_seq_length=4, downsample_ratio=0.5,
        tie_word_embeddings=False)
    image_processor = GotOcr2ImageProcessorPil(size={"height": 56, "width": 56}, crop_to_patches=True, min_patches=1,
                                               max_patches=4)
    return InternVLForConditionalGeneration, config, InternVLProcessor, {
        "image_processor": image_processor, "tokenizer": tokenizer, "image_seq_length": 4}


def _paligemma():
    from transformers import (
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipImageProcessorPil,
    )

    tokenizer = _tokenizer(["<pad>", "<eos>", "<bos>", "<image>"], eos="<eos>", pad="<pad>", bos="<bos>",
                           named={"image_token": "<image>"})
    image_processor = SiglipImageProcessorPil(size={"height": 28, "width": 28})
    image_processor.image_seq_length = 4  # (28 / 14) ** 2
    processor_parts = {"image_processor": image_processor, "tokenizer": tokenizer}
    size = len(tokenizer) + 1152 + 8  # the processor adds PaliGemma's <loc> and <seg> tokens
    config = PaliGemmaConfig(
        text_config={"model_type": "gemma", "vocab_size": size, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                     "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
                     "bos_token_id": tokenizer.bos_token_id},
        vision_config={"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                       "projection_dim": 32},
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"), projection_dim=32)
    return PaliGemmaForConditionalGeneration, config, PaliGemmaProcessor, processor_parts


def _mistral3(llava: bool = False):
    """Mistral 3 (Mistral Small 3.x / Ministral 3) with a Pixtral vision tower; ``llava``: Pixtral 12B's layout, a
    LLaVA model with the same tower and no patch merger."""
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    from engine.multimodal.processor import processor_class

    named = {"image_token": "[IMG]", "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]"}
    specials = ["<unk>", "<s>", "</s>", "<pad>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", *named.values()]
    tokenizer = _tokenizer(specials, eos="</s>", pad="<pad>", bos="<s>", named=named)
    text = {"model_type": "mistral", "vocab_size": len(tokenizer) + 8, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
            "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id}
    vision = {"model_type": "pixtral", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 2, "head_dim": 16, "image_size": 56, "patch_size": 14}
    image_token = tokenizer.convert_tokens_to_ids("[IMG]")
    merge = 1 if llava else 2
    parts = {"image_processor": PixtralImageProcessorPil(size={"longest_edge": 56}, patch_size=14),
             "tokenizer": tokenizer, "patch_size": 14, "spatial_merge_size": merge}
    if llava:
        from transformers import LlavaConfig, LlavaForConditionalGeneration

        config = LlavaConfig(text_config=text, vision_config=vision, image_token_index=image_token,
                             vision_feature_layer=-1, vision_feature_select_strategy="full")
        return LlavaForConditionalGeneration, config, processor_class("PixtralProcessor"), parts
    config = Mistral3Config(text_config=text, vision_config=vision, image_token_index=image_token,
                            spatial_merge_size=merge, vision_feature_layer=-1)
    return Mistral3ForConditionalGeneration, config, processor_class("PixtralProcessor"), parts


def _mllama():
    from transformers import (
        MllamaConfig,
        MllamaForConditionalGeneration,
        MllamaImageProcessorPil,
        MllamaProcessor,
    )

    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>", "<|image|>"]
    tokenizer = _tokenizer(specials, eos="<|eot_id|>", pad="<|finetune_right_pad_id|>", bos="<|begin_of_text|>")
    config = MllamaConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "cross_attention_layers": [1], "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 4096, "pad_token_id": tokenizer.pad_token_id,
                     "eos_token_id": tokenizer.eos_token_id, "bos_token_id": tokenizer.bos_token_id},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_global_layers": 1,
                       "attention_heads": 2, "image_size": 28, "patch_size": 14, "max_num_tiles": 4,
                       "intermediate_layers_indices": [0], "vision_output_dim": 64},
        image_token_index=tokenizer.convert_tokens_to_ids("<|image|>"))
    image_processor = MllamaImageProcessorPil(size={"height": 28, "width": 28}, max_image_tiles=4)
    return MllamaForConditionalGeneration, config, MllamaProcessor, {"image_processor": image_processor,
                                                                     "tokenizer": tokenizer}


def _omni_tokenizer(pads: tuple[str, str, str], vision: tuple[str, str], audio: tuple[str, str],
                    extra: tuple[str, ...] = ()):
    """A ChatML tokenizer with an omni family's named tokens: image, audio and video pads, vision and audio
    bos/eos."""
    named = {"image_token": pads[0], "audio_token": pads[1], "video_token": pads[2], "vision_bos_token": vision[0],
             "vision_eos_token": vision[1], "audio_bos_token": audio[0], "audio_eos_token": audio[1]}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *extra, *named.values()]
    return _tokenizer(specials, eos="<|im_end|>", pad="<|endoftext|>", named=named)


def _qwen2_5_omni():
    """The Qwen2.5-Omni thinker (the trainable part of the omni checkpoints): a Qwen2.5-VL vision tower, a Whisper-style
    audio tower and the tokenizer's named omni tokens (``<|IMAGE|>``, ``<|vision_bos|>``, ``<|AUDIO|>`` ...), as the
    real checkpoint's tokenizer declares them."""
    from transformers import (
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
        Qwen2VLImageProcessorPil,
        WhisperFeatureExtractor,
    )

    tokenizer = _omni_tokenizer(("<|IMAGE|>", "<|AUDIO|>", "<|VIDEO|>"), ("<|vision_bos|>", "<|vision_eos|>"),
                                ("<|audio_bos|>", "<|audio_eos|>"))
    tid = tokenizer.convert_tokens_to_ids
    config = Qwen2_5OmniThinkerConfig(
        text_config=_qwen_text(tokenizer, rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                           "rope_theta": 10000.0}),
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
                       "window_size": 56, "fullatt_block_indexes": [1]},
        audio_config={"num_mel_bins": 16, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 32,
                      "d_model": 16, "output_dim": 32, "n_window": 100, "max_source_positions": 1500},
        audio_token_index=tid("<|AUDIO|>"), image_token_index=tid("<|IMAGE|>"), video_token_index=tid("<|VIDEO|>"),
        audio_start_token_id=tid("<|audio_bos|>"), audio_end_token_id=tid("<|audio_eos|>"),
        vision_start_token_id=tid("<|vision_bos|>"), vision_end_token_id=tid("<|vision_eos|>"),
        user_token_id=tid("<|im_start|>"))
    parts = {"image_processor": Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56 * 4),
             "feature_extractor": WhisperFeatureExtractor(feature_size=16, sampling_rate=16000), "tokenizer": tokenizer}
    return Qwen2_5OmniThinkerForConditionalGeneration, config, Qwen2_5OmniProcessor, parts


def _qwen3_omni():
    """The Qwen3-Omni thinker: a Qwen3-VL vision tower, Qwen3-Omni's windowed audio tower, a small MoE language model
    and Qwen3-Omni's named tokens (``<|image_pad|>``, ``<|vision_start|>``, ``<|audio_pad|>``, ``<|audio_start|>``
    ...)."""
    from transformers import (
        Qwen2VLImageProcessorPil,
        Qwen3OmniMoeProcessor,
        Qwen3OmniMoeThinkerConfig,
        Qwen3OmniMoeThinkerForConditionalGeneration,
        WhisperFeatureExtractor,
    )

    tokenizer = _omni_tokenizer(("<|image_pad|>", "<|audio_pad|>", "<|video_pad|>"),
                                ("<|vision_start|>", "<|vision_end|>"), ("<|audio_start|>", "<|audio_end|>"),
                                extra=("<think>", "</think>"))
    tid = tokenizer.convert_tokens_to_ids
    config = Qwen3OmniMoeThinkerConfig(
        text_config=_qwen_text(tokenizer, head_dim=8, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
                               rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                "rope_theta": 10000.0, "mrope_interleaved": True}),
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "in_channels": 3,
                       "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32,
                       "num_position_embeddings": 64, "deepstack_visual_indexes": [0]},
        audio_config={"num_mel_bins": 16, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 32,
                      "d_model": 16, "output_dim": 32, "n_window": 50, "n_window_infer": 100,
                      "downsample_hidden_size": 8, "max_source_positions": 1500},
        audio_token_id=tid("<|audio_pad|>"), image_token_id=tid("<|image_pad|>"), video_token_id=tid("<|video_pad|>"),
        audio_start_token_id=tid("<|audio_start|>"), audio_end_token_id=tid("<|audio_end|>"),
        vision_start_token_id=tid("<|vision_start|>"), vision_end_token_id=tid("<|vision_end|>"),
        user_token_id=tid("<|im_start|>"))
    parts = {"image_processor": Qwen2VLImageProcessorPil(min_pixels=32 * 32, max_pixels=64 * 64 * 4, patch_size=16),
             "feature_extractor": WhisperFeatureExtractor(feature_size=16, sampling_rate=16000), "tokenizer": tokenizer}
    return Qwen3OmniMoeThinkerForConditionalGeneration, config, Qwen3OmniMoeProcessor, parts


def _video_llava(next_video: bool):
    """LLaVA-NeXT-Video (``next_video``: LLaVA-NeXT's any-resolution images, pooled video frames) or Video-LLaVA (its
    own image processor for images and frames), with an <image> and a <video> token; their video processors need
    torchvision, so video is refused here (the stand-in)."""
    from transformers import (
        LlavaNextVideoConfig,
        LlavaNextVideoForConditionalGeneration,
        LlavaNextVideoProcessor,
        VideoLlavaConfig,
        VideoLlavaForConditionalGeneration,
        VideoLlavaImageProcessor,
        VideoLlavaProcessor,
    )

    _, llava, _, parts = _llava_next()
    tokenizer = _tokenizer(["<pad>", "</s>", "<s>", "<image>", "<video>"], eos="</s>", pad="<pad>", bos="<s>",
                           named={"image_token": "<image>", "video_token": "<video>"})
    text = {**llava.text_config.to_dict(), "vocab_size": len(tokenizer) + 8}
    tokens = {"image_token_index": tokenizer.convert_tokens_to_ids("<image>"),
              "video_token_index": tokenizer.convert_tokens_to_ids("<video>")}
    processor_parts = {"tokenizer": tokenizer, "patch_size": 14, "vision_feature_select_strategy": "default",
                       "num_additional_image_tokens": 1}
    if next_video:
        config = LlavaNextVideoConfig(text_config=text, vision_config=llava.vision_config.to_dict(), **tokens,
                                      vision_feature_layer=-1, image_grid_pinpoints=llava.image_grid_pinpoints)
        return LlavaNextVideoForConditionalGeneration, config, LlavaNextVideoProcessor, {
            **processor_parts, "image_processor": parts["image_processor"]}
    config = VideoLlavaConfig(text_config=text, vision_config=llava.vision_config.to_dict(), **tokens,
                              vision_feature_layer=-1)
    image_processor = VideoLlavaImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    return VideoLlavaForConditionalGeneration, config, VideoLlavaProcessor, {**processor_parts,
                                                                            "image_processor": image_processor}


ERNIE_TOKENS = {"image_token": "<|IMAGE_PLACEHOLDER|>", "image_start_token": "<|IMAGE_START|>",
                "image_end_token": "<|IMAGE_END|>", "video_token": "<|VIDEO_PLACEHOLDER|>",
                "video_start_token": "<|VIDEO_START|>", "video_end_token": "<|VIDEO_END|>"}
"""ERNIE-4.5-VL's named media tokens, as its tokenizer declares them (its processor reads them by these names)."""


def _ernie_vl():
    """ERNIE-4.5-VL (``ernie4_5_vl_moe``): a dense first layer and a sparse one with two text and two vision experts
    (routed by ``moe_mm_token_type_ids``), a one-block vision tower and the variable-resolution resampler."""
    from transformers import Ernie4_5_VLMoeConfig, Ernie4_5_VLMoeForConditionalGeneration, Ernie4_5_VLMoeProcessor
    from transformers.models.ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe import (
        Ernie4_5_VLMoeImageProcessorPil,
    )

    specials = ["<unk>", "<s>", "</s>", "<|begin_of_sentence|>", "<|end_of_sentence|>", "<think>", "</think>",
                *ERNIE_TOKENS.values()]
    tokenizer = _tokenizer(specials, eos="</s>", pad="<unk>", bos="<s>", named=ERNIE_TOKENS)
    tid = tokenizer.convert_tokens_to_ids
    config = Ernie4_5_VLMoeConfig(
        text_config={"vocab_size": len(tokenizer) + 8, "hidden_size": 64, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 4096, "moe_num_experts": 2, "moe_k": 1,
                     "moe_intermediate_size": [32, 16], "moe_num_shared_experts": 1,
                     "mlp_layer_types": ["dense", "sparse"],
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [3, 3, 2]},
                     "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id,
                     "bos_token_id": tokenizer.bos_token_id},
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": 14,
                       "spatial_merge_size": 2, "temporal_merge_size": 2},
        image_token_id=tid("<|IMAGE_PLACEHOLDER|>"), image_start_token_id=tid("<|IMAGE_START|>"),
        image_end_token_id=tid("<|IMAGE_END|>"), video_token_id=tid("<|VIDEO_PLACEHOLDER|>"),
        video_start_token_id=tid("<|VIDEO_START|>"), video_end_token_id=tid("<|VIDEO_END|>"))
    image_processor = Ernie4_5_VLMoeImageProcessorPil(size={"shortest_edge": 28 * 28, "longest_edge": 56 * 56 * 4})
    return Ernie4_5_VLMoeForConditionalGeneration, config, Ernie4_5_VLMoeProcessor, {
        "image_processor": image_processor, "tokenizer": tokenizer}


def _minicpm_v4_6(scale_resolution: int = 112, downsample_mode: str = "16x"):
    """MiniCPM-V 4.6: a NaViT vision tower with its window-attention merger after layer 0, a Qwen3.5 language model,
    and the tokenizer's named image tokens (MiniCPM-V's ``<image>``/``<slice>``/``<image_id>`` markers); the image
    processor slices an image larger than ``scale_resolution`` squared into at most 4 slices."""
    from transformers import MiniCPMV4_6Config, MiniCPMV4_6ForConditionalGeneration, MiniCPMV4_6Processor
    from transformers.models.minicpmv4_6.image_processing_pil_minicpmv4_6 import MiniCPMV4_6ImageProcessorPil

    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": "<image>",
             "image_end_token": "</image>", "slice_start_token": "<slice>", "slice_end_token": "</slice>",
             "image_id_start_token": "<image_id>", "image_id_end_token": "</image_id>"}
    tokenizer = _tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", *named.values()], eos="<|im_end|>",
                           pad="<|endoftext|>", named=named)
    text = _qwen_text(tokenizer, model_type="qwen3_5_text", head_dim=8, layer_types=["linear_attention", "full_attention"],
                      linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
    config = MiniCPMV4_6Config(
        text_config=text, vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                         "num_attention_heads": 2, "image_size": 56, "patch_size": 14},
        insert_layer_id=0, downsample_mode=downsample_mode, image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"))
    image_processor = MiniCPMV4_6ImageProcessorPil(scale_resolution=scale_resolution, max_slice_nums=4,
                                                   downsample_mode=downsample_mode)
    return MiniCPMV4_6ForConditionalGeneration, config, MiniCPMV4_6Processor, {"image_processor": image_processor,
                                                                             "tokenizer": tokenizer}


BUILDERS = {
    "qwen2_vl": lambda: _qwen("qwen2_vl"), "qwen3_vl": lambda: _qwen("qwen3_vl"), "qwen2_5_vl": _qwen2_5_vl,
    "qwen3_5": _qwen3_5, "glm4v": _glm4v, "gemma3": _gemma3, "gemma4": lambda: _gemma4(audio=False),
    "gemma4n": lambda: _gemma4(audio=True), "llava": _llava, "llava_next": _llava_next, "qwen2_audio": _qwen2_audio,
    "intern_vl": _intern_vl, "paligemma": _paligemma, "mistral3": _mistral3, "pixtral": lambda: _mistral3(llava=True),
    "mllama": _mllama, "llava_next_video": lambda: _video_llava(next_video=True),
    "video_llava": lambda: _video_llava(next_video=False), "qwen2_5_omni": _qwen2_5_omni,
    "qwen3_omni": _qwen3_omni, "ernie_vl": _ernie_vl, "minicpmv4_6": _minicpm_v4_6,
    "minicpmv4_6_4x": lambda: _minicpm_v4_6(scale_resolution=224, downsample_mode="4x"),
}
"""Family -> builder of (model class, config, processor class, processor parts)."""


def build_tiny_vlm(family: str, seed: int = 0):
    """(model in eval mode, processor) of one family, deterministic for a seed."""
    from engine.multimodal.processor import build_processor

    if family not in BUILDERS:
        raise ValueError(family)
    model_cls, config, processor_cls, parts = BUILDERS[family]()
    processor = build_processor(processor_cls, parts)
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    return model, processor


def save_tiny_vlm(family: str, folder: str | Path) -> Path:
    """Save a tiny model of ``family`` with its processor (tokenizer included) to ``folder``."""
    from engine.multimodal.processor import save_processor

    model, processor = build_tiny_vlm(family)
    model.save_pretrained(folder)
    save_processor(processor, folder)
    return Path(folder)


def write_image_dataset(folder: Path, with_text_row: bool = False) -> Path:
    """A dataset folder ``colors`` (sharegpt, eight rows: a red and a blue image four times over, plus a text-only
    row each time with ``with_text_row``) with its dataset_info.json; returns the folder."""
    import json

    from PIL import Image

    (folder / "img").mkdir(parents=True)
    rows = []
    for index, (color, word) in enumerate([((220, 20, 20), "red"), ((20, 20, 220), "blue")]):
        Image.new("RGB", (56, 56), color).save(folder / "img" / f"{index}.png")
        rows.append({"messages": [{"role": "user", "content": "<image>What color is it?"},
                                  {"role": "assistant", "content": f"It is {word}."}],
                     "images": [f"img/{index}.png"]})
    if with_text_row:
        rows.append({"messages": [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi."}]})
    (folder / "colors.json").write_text(json.dumps(rows * 4))
    info = {"colors": {"file_name": "colors.json", "formatting": "sharegpt",
                       "columns": {"messages": "messages", "images": "images"},
                       "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                "assistant_tag": "assistant"}}}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    return folder


def image_file(folder: Path, name: str, size: tuple[int, int] = (100, 60), color=(200, 30, 30)) -> str:
    """A plain-colour PNG in ``folder``; its path."""
    from PIL import Image

    path = Path(folder) / name
    Image.new("RGB", size, color).save(path)
    return str(path)


def load_default(path: str):
    """An image as the data layer loads it with the default pixel bounds."""
    from engine.multimodal import media
    from engine.multimodal.processor import MediaOptions

    opts = MediaOptions()
    return media.load_image(path, opts.image_max_pixels, opts.image_min_pixels)


def sft_config(folder: Path, model: Path, data: Path, dataset: str = "colors", *, template: str, **extra) -> Path:
    """A two-step LoRA SFT config (batches of three, every logged step) for a tiny model; its path."""
    import yaml

    config = {"model_name_or_path": str(model), "template": template, "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": dataset, "dataset_dir": str(data),
              "cutoff_len": 1024, "output_dir": str(folder / "out"), "per_device_train_batch_size": 3,
              "learning_rate": 0.01, "max_steps": 2, "logging_steps": 1, "save_strategy": "no", "plot_loss": False,
              "report_to": "none", **extra}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def logged_losses(folder: Path) -> list[float]:
    """The training losses a run logged in its events.jsonl."""
    import json

    events = [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines() if x.strip()]
    return [e["loss"] for e in events if e["event"] == "log"]
