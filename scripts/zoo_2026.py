"""The zoo's 2026 families (issue #40): transformers models built from the user's own configs at
tiny sizes, each with a training step, as scripts/zoo.py's entries.

MoE decoders run transformers' default experts path (``aten._grouped_mm``); state-space and
hybrid decoders run their torch fallbacks (no CUDA kernels here); vision-language models train
on text and image together (LLaVA, Qwen2-VL, BLIP-2); SAM trains its masks and IoU scores
from point prompts. scripts/coverage.py runs them all; tests/test_zoo_extended.py a few.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

VOCAB, BATCH, SEQ = 128, 2, 8
#: The tiny decoder shape every text family starts from.
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2)
#: MoE fields shared by the experts families: 4 experts, 2 per token, expert MLP 16.
MOE = dict(moe_intermediate_size=16, num_experts_per_tok=2)


def _lm_inputs() -> dict:
    ids = torch.randint(3, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids}


def _causal(config: Callable[[], Any]) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import transformers as tf
        return tf.AutoModelForCausalLM.from_config(config())
    return build


def _text_configs() -> dict[str, Callable[[], Any]]:
    import transformers as tf

    t = TINY
    return {
        "mixtral": lambda: tf.MixtralConfig(**t, num_local_experts=4, num_experts_per_tok=2),
        "qwen2-moe": lambda: tf.Qwen2MoeConfig(**t, **MOE, num_experts=4, shared_expert_intermediate_size=32),
        "qwen3-moe": lambda: tf.Qwen3MoeConfig(**t, **MOE, num_experts=4, head_dim=8),
        "deepseek-v2": lambda: tf.DeepseekV2Config(**{**t, "num_key_value_heads": 4}, **MOE, n_routed_experts=4, n_shared_experts=1,
                                                   first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=16,
                                                   qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8),
        "deepseek-v3": lambda: tf.DeepseekV3Config(**{**t, "num_key_value_heads": 4}, **MOE, n_routed_experts=4,
                                                   n_group=2, topk_group=1, first_k_dense_replace=1,
                                                   kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8,
                                                   qk_nope_head_dim=8, v_head_dim=8),
        "gpt-oss": lambda: tf.GptOssConfig(**t, num_local_experts=4, num_experts_per_tok=2, head_dim=8,
                                           sliding_window=4, layer_types=["sliding_attention", "full_attention"]),
        "phimoe": lambda: tf.PhimoeConfig(**t, num_local_experts=4, num_experts_per_tok=2),
        "jamba": lambda: tf.JambaConfig(**t, num_experts=4, num_experts_per_tok=2, expert_layer_period=2,
                                        expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                                        mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, use_mamba_kernels=False),
        "mamba": lambda: tf.MambaConfig(hidden_size=32, num_hidden_layers=2, vocab_size=VOCAB, state_size=4,
                                        expand=2, conv_kernel=4, use_mambapy=False),
        "mamba2": lambda: tf.Mamba2Config(hidden_size=32, num_hidden_layers=2, vocab_size=VOCAB, state_size=4,
                                          expand=2, conv_kernel=4, num_heads=4, head_dim=16, n_groups=1,
                                          chunk_size=4),
        "zamba2": lambda: tf.Zamba2Config(hidden_size=32, num_hidden_layers=2, vocab_size=VOCAB,
                                          num_attention_heads=4, num_key_value_heads=4, mamba_d_state=4,
                                          mamba_d_conv=4, mamba_expand=2, mamba_headdim=8, n_mamba_heads=8,
                                          intermediate_size=64, layers_block_type=["mamba", "hybrid"],
                                          hybrid_layer_ids=[1], chunk_size=4, pad_token_id=0),
        "rwkv": lambda: tf.RwkvConfig(hidden_size=32, num_hidden_layers=2, vocab_size=VOCAB, context_length=64,
                                      attention_hidden_size=32, intermediate_size=64),
        "recurrent-gemma": lambda: tf.RecurrentGemmaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                           num_attention_heads=4, num_key_value_heads=1,
                                                           vocab_size=VOCAB, lru_width=32, attention_window_size=4,
                                                           block_types=["recurrent", "attention"]),
        "gemma3": lambda: tf.Gemma3TextConfig(**t, head_dim=8, sliding_window=4),
        "gemma3n": lambda: tf.Gemma3nTextConfig(**t, head_dim=8, vocab_size_per_layer_input=VOCAB,
                                                hidden_size_per_layer_input=8, sliding_window=4,
                                                layer_types=["sliding_attention", "full_attention"],
                                                num_kv_shared_layers=0, laurel_rank=4, altup_num_inputs=2,
                                                activation_sparsity_pattern=[0.0, 0.0]),
        "llama4": lambda: tf.Llama4TextConfig(**t, head_dim=8, num_local_experts=4, num_experts_per_tok=1,
                                              intermediate_size_mlp=64, interleave_moe_layer_step=1,
                                              no_rope_layers=[1, 0], attention_chunk_size=4),
    }


def _image(size: int = 32) -> dict:
    return {"pixel_values": torch.randn(BATCH, 3, size, size)}


def _llava():
    import transformers as tf
    vision = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                 image_size=32, patch_size=8)
    return tf.LlavaForConditionalGeneration(tf.LlavaConfig(vision_config=vision, text_config=tf.LlamaConfig(**TINY),
                                                           image_token_index=VOCAB - 1, projector_hidden_act="gelu"))


def _llava_inputs() -> dict:
    ids = torch.cat([torch.full((BATCH, 16), VOCAB - 1), torch.randint(3, VOCAB - 1, (BATCH, SEQ))], 1)
    return {"input_ids": ids, "labels": ids, **_image()}


def _qwen2_vl():
    import transformers as tf
    vision = dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, patch_size=4, spatial_merge_size=2,
                  temporal_patch_size=2)
    text = dict(**TINY, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]})
    return tf.Qwen2VLForConditionalGeneration(tf.Qwen2VLConfig(
        text_config=text, vision_config=vision, image_token_id=VOCAB - 1, video_token_id=VOCAB - 2,
        vision_start_token_id=VOCAB - 3, vision_end_token_id=VOCAB - 4))


def _qwen2_vl_inputs() -> dict:
    # one 16x16 image per row: a 4x4 grid of 4x4 patches (x2 frames), merged 2x2 into 4 image tokens
    ids = torch.cat([torch.full((BATCH, 1), VOCAB - 3), torch.full((BATCH, 4), VOCAB - 1),
                     torch.full((BATCH, 1), VOCAB - 4), torch.randint(3, VOCAB - 4, (BATCH, SEQ))], 1)
    return {"input_ids": ids, "labels": ids, "pixel_values": torch.randn(BATCH * 16, 3 * 2 * 4 * 4),
            "image_grid_thw": torch.tensor([[1, 4, 4]] * BATCH), "mm_token_type_ids": (ids == VOCAB - 1).int()}


def _blip2():
    import transformers as tf
    return tf.Blip2ForConditionalGeneration(tf.Blip2Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8),
        qformer_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                            encoder_hidden_size=32, vocab_size=VOCAB, max_position_embeddings=64),
        text_config=tf.OPTConfig(hidden_size=32, ffn_dim=64, num_hidden_layers=1, num_attention_heads=2,
                                 vocab_size=VOCAB, max_position_embeddings=64, word_embed_proj_dim=32,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=2),
        num_query_tokens=4, image_token_index=VOCAB - 1))


def _blip2_inputs() -> dict:
    ids = torch.cat([torch.full((BATCH, 4), VOCAB - 1), torch.randint(3, VOCAB - 1, (BATCH, SEQ))], 1)
    return {"input_ids": ids, "labels": ids, **_image()}


def _sam():
    import transformers as tf
    return tf.SamModel(tf.SamConfig(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8, window_size=2, global_attn_indexes=(1,), mlp_dim=64,
                           num_pos_feats=8),
        prompt_encoder_config=dict(hidden_size=16, image_size=32, patch_size=8, mask_input_channels=4),
        mask_decoder_config=dict(hidden_size=16, mlp_dim=32, num_hidden_layers=1, num_attention_heads=2,
                                 iou_head_hidden_dim=16)))


def _sam_inputs() -> dict:
    return {**_image(), "input_points": torch.rand(BATCH, 1, 2, 2) * 32,
            "input_labels": torch.ones(BATCH, 1, 2, dtype=torch.long)}


def _other_entries(entry_cls: type) -> dict[str, Any]:
    import transformers as tf

    loss = lambda out: out.loss                                          # noqa: E731
    hidden = lambda out: out.last_hidden_state.float().square().mean()   # noqa: E731
    return {
        "llava": entry_cls("llava", _llava, _llava_inputs, loss),
        "qwen2-vl": entry_cls("qwen2-vl", _qwen2_vl, _qwen2_vl_inputs, loss),
        "blip2": entry_cls("blip2", _blip2, _blip2_inputs, loss),
        "sam": entry_cls("sam", _sam, _sam_inputs,
                         lambda out: out.pred_masks.float().square().mean() + out.iou_scores.float().mean()),
        "dinov2": entry_cls("dinov2", lambda: tf.Dinov2Model(tf.Dinov2Config(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2, image_size=32, patch_size=8)),
            _image, hidden),
        "wav2vec2-ctc": entry_cls("wav2vec2-ctc", lambda: tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
            conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
            vocab_size=32, mask_time_prob=0.0, layerdrop=0.0, pad_token_id=0)),
            lambda: {"input_values": torch.randn(BATCH, 400), "labels": torch.randint(1, 32, (BATCH, 4))}, loss),
        "bigbird": entry_cls("bigbird", lambda: tf.BigBirdModel(tf.BigBirdConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=VOCAB,
            max_position_embeddings=64, attention_type="block_sparse", block_size=2, num_random_blocks=1)),
            lambda: {"input_ids": torch.randint(3, VOCAB, (BATCH, 32))}, hidden),
        "longformer": entry_cls("longformer", lambda: tf.LongformerModel(tf.LongformerConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=VOCAB,
            max_position_embeddings=64, attention_window=[4], pad_token_id=0)),
            lambda: {"input_ids": torch.randint(3, VOCAB, (BATCH, 16))}, hidden),
        "patchtst": entry_cls("patchtst", lambda: tf.PatchTSTForPrediction(tf.PatchTSTConfig(
            num_input_channels=2, context_length=32, patch_length=8, patch_stride=8, prediction_length=8,
            d_model=16, num_attention_heads=2, num_hidden_layers=1, ffn_dim=32)),
            lambda: {"past_values": torch.randn(BATCH, 32, 2), "future_values": torch.randn(BATCH, 8, 2)}, loss),
    }


def entries(entry_cls: type) -> dict[str, Any]:
    """The 2026 families as ``entry_cls(name, build, inputs, loss)`` (scripts/zoo.py's Entry)."""
    loss = lambda out: out.loss                                   # noqa: E731
    e = {name: entry_cls(name, _causal(cfg), _lm_inputs, loss) for name, cfg in _text_configs().items()}
    e.update(_other_entries(entry_cls))
    return e


NAMES = ("mixtral", "qwen2-moe", "qwen3-moe", "deepseek-v2", "deepseek-v3", "gpt-oss", "phimoe", "jamba",
         "mamba", "mamba2", "zamba2", "rwkv", "recurrent-gemma", "gemma3", "gemma3n", "llama4", "llava", "qwen2-vl",
         "blip2", "sam", "dinov2", "wav2vec2-ctc", "bigbird", "longformer", "patchtst")
