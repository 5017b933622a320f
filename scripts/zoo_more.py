"""More model families, as scripts/zoo.py's entries: models found unclean in a broad trial that
the other zoo files do not build. Tiny transformers configs, each with a training step:

- Funnel (pooling encoder) and DeBERTa-v2 (disentangled relative attention), classification;
- Reformer (LSH and local attention, reversible layers), causal LM;
- Swin-v2 (scaled cosine window attention, continuous position bias), classification;
- EnCodec (the audio codec: convolutions, an LSTM, residual vector quantization), reconstruction;
- Deformable-DETR (multi-scale deformable attention: grid_sample), its decoder output;
- Llama under ``torch.autocast("cpu", dtype=torch.bfloat16)``, as mixed-precision training runs it;
- Whisper's ``generate`` (greedy, 4 new tokens), then a training step on the tokens it generated.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

VOCAB, BATCH, SEQ = 128, 2, 16


def _ids() -> torch.Tensor:
    return torch.randint(3, VOCAB, (BATCH, SEQ))


def _lm() -> dict:
    ids = _ids()
    return {"input_ids": ids, "labels": ids}


def _classify() -> dict:
    return {"input_ids": _ids(), "labels": torch.tensor([0, 2])}


def _funnel() -> nn.Module:
    import transformers as tf
    return tf.FunnelForSequenceClassification(tf.FunnelConfig(
        vocab_size=VOCAB, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64, num_labels=3))


def _deberta_v2() -> nn.Module:
    import transformers as tf
    return tf.DebertaV2ForSequenceClassification(tf.DebertaV2Config(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        num_labels=3))


def _reformer() -> nn.Module:
    import transformers as tf
    return tf.ReformerModelWithLMHead(tf.ReformerConfig(
        vocab_size=VOCAB, hidden_size=32, num_attention_heads=2, attention_head_size=16, feed_forward_size=64,
        axial_pos_shape=[4, 4], axial_pos_embds_dim=[16, 16], local_attn_chunk_length=4, lsh_attn_chunk_length=4,
        num_buckets=2, is_decoder=True, max_position_embeddings=SEQ))


def _swinv2() -> nn.Module:
    import transformers as tf
    return tf.Swinv2ForImageClassification(tf.Swinv2Config(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, num_labels=3))


def _encodec() -> nn.Module:
    # hop 8 at 800 Hz: 100 frames/s, 1.5 kbps = 1 codebook of 32 codes (10 bits would be 2)
    import transformers as tf
    return tf.EncodecModel(tf.EncodecConfig(
        hidden_size=16, num_filters=4, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=32,
        codebook_dim=16, num_lstm_layers=1, sampling_rate=800, target_bandwidths=[1.5]))


def _deformable_detr() -> nn.Module:
    import transformers as tf
    backbone = tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1],
                               out_features=["stage2", "stage3", "stage4"])
    return tf.DeformableDetrModel(tf.DeformableDetrConfig(
        use_timm_backbone=False, backbone_config=backbone, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        num_queries=4, num_labels=3, encoder_n_points=2, decoder_n_points=2))


class AutocastLlama(nn.Module):
    """The zoo's tiny Llama with its forward under CPU autocast in bfloat16 (parameters float32)."""

    def __init__(self) -> None:
        super().__init__()
        import zoo
        self.model = zoo._small_decoder("llama")

    def forward(self, **inputs: Any) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.model(**inputs)


class WhisperGenerate(nn.Module):
    """The zoo's tiny Whisper: ``generate`` (greedy, 4 new tokens), then the loss of a forward on
    the generated tokens as labels, so one step runs the generation loop and a backward."""

    def __init__(self) -> None:
        super().__init__()
        import transformers as tf

        import zoo
        self.model = tf.WhisperForConditionalGeneration(tf.WhisperConfig(
            **zoo._seq2seq(num_mel_bins=16, max_source_positions=16, max_target_positions=32)))

    def forward(self, input_features: torch.Tensor) -> Any:
        ids = self.model.generate(input_features, max_new_tokens=4, do_sample=False)   # (B, 1 + 4)
        return self.model(input_features=input_features, labels=ids)


def entries(entry_cls: type) -> dict[str, Any]:
    """These models as ``entry_cls(name, build, inputs, loss)`` (scripts/zoo.py's Entry)."""
    loss = lambda out: out.loss                                               # noqa: E731
    hidden = lambda out: out.last_hidden_state.float().square().mean()        # noqa: E731
    return {
        "funnel": entry_cls("funnel", _funnel, _classify, loss),
        "deberta-v2": entry_cls("deberta-v2", _deberta_v2, _classify, loss),
        "reformer": entry_cls("reformer", _reformer, _lm, loss),
        "swinv2": entry_cls("swinv2", _swinv2,
                            lambda: {"pixel_values": torch.randn(BATCH, 3, 32, 32), "labels": torch.tensor([0, 2])},
                            loss),
        "encodec": entry_cls("encodec", _encodec, lambda: {"input_values": torch.randn(BATCH, 1, 64)},
                             lambda out: out.audio_values.square().mean()),
        "deformable-detr": entry_cls("deformable-detr", _deformable_detr,
                                     lambda: {"pixel_values": torch.randn(BATCH, 3, 64, 64)}, hidden),
        "llama-autocast": entry_cls("llama-autocast", AutocastLlama, _lm, loss),
        "whisper-generate": entry_cls("whisper-generate", WhisperGenerate,
                                      lambda: {"input_features": torch.randn(BATCH, 16, 32)}, loss),
    }


NAMES = ("funnel", "deberta-v2", "reformer", "swinv2", "encodec", "deformable-detr", "llama-autocast",
         "whisper-generate")
