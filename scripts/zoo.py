"""The coverage zoo: small models of every family dispatchprof promises to cover.

Each entry builds a model and a step (forward, loss, backward) on one tensor kind:
"real" (CPU tensors with random weights), "meta" (the meta device) or "fake"
(FakeTensorMode, as ``dispatchprof.fake_model`` builds). Used by scripts/coverage.py,
the tests and the benchmarks.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

import zoo_2026
import zoo_extra
import zoo_more

KINDS = ("real", "meta", "fake")
BATCH, SEQ, VOCAB = 2, 8, 128


def _small_decoder(family: str):
    import transformers as tf

    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    configs = {
        "llama": lambda: tf.LlamaConfig(**common),
        "mistral": lambda: tf.MistralConfig(**common, sliding_window=4),
        "qwen2": lambda: tf.Qwen2Config(**common),
        "gemma2": lambda: tf.Gemma2Config(**common, head_dim=16, sliding_window=4),
        "phi3": lambda: tf.Phi3Config(**common),
    }
    return tf.AutoModelForCausalLM.from_config(configs[family]())


class ResNetish(nn.Module):
    """A small ResNet-style CNN: conv, batch norm, relu, max/avg pool, a residual, linear."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                   nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.relu = nn.ReLU()
        self.avgpool = nn.AvgPool2d(2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)                      # (B, 8, H/2, W/2)
        y = self.relu(self.block(y) + y)
        y = self.pool(self.avgpool(y))        # (B, 8, 1, 1)
        return self.fc(torch.flatten(y, 1))


class LSTMClassifier(nn.Module):
    """A two-layer LSTM over a sequence, classifying from the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


class GRUTagger(nn.Module):
    """A bidirectional GRU tagging every step."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(16, 24, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(x)[0])


class UNetish(nn.Module):
    """A small UNet: conv + group norm + SiLU down, max pool and strided conv, then bilinear
    and nearest upsampling, a transposed conv, skip concatenations, reflection padding."""

    def __init__(self) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(cin, cout, 3), nn.GroupNorm(2, cout), nn.SiLU())

        self.down1, self.down2 = block(3, 8), block(8, 16)
        self.pool = nn.MaxPool2d(2)
        self.strided = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.mid = nn.Sequential(block(16, 16), nn.Hardswish(), nn.Mish())
        self.up_t = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.up1 = block(32, 8)
        self.up2 = block(16, 8)
        self.out = nn.Conv2d(8, 2, 1)
        self.shuffle = nn.Sequential(nn.Conv2d(2, 8, 1), nn.PixelShuffle(2), nn.PixelUnshuffle(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.down1(x)                                   # (B, 8, H, W)
        b = self.down2(self.pool(a))                        # (B, 16, H/2, W/2)
        m = self.mid(self.strided(b))                       # (B, 16, H/4, W/4)
        u = self.up_t(m)                                    # (B, 16, H/2, W/2)
        u = self.up1(torch.cat([u, b], 1))                  # (B, 8, H/2, W/2)
        u = nn.functional.interpolate(u, scale_factor=2, mode="bilinear")
        u = self.up2(torch.cat([u, a], 1)) + nn.functional.interpolate(u, size=a.shape[-2:], mode="nearest")
        return self.shuffle(self.out(u))


class AudioConv(nn.Module):
    """A 1-d conv net over a waveform: strided conv, batch norm, GELU, avg pool, an LSTM-free head."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 8, 10, stride=5), nn.BatchNorm1d(8), nn.GELU(),
                                 nn.Conv1d(8, 16, 3, stride=4, dilation=2), nn.LeakyReLU(), nn.AvgPool1d(2),
                                 nn.ELU(), nn.AdaptiveMaxPool1d(4), nn.Flatten(), nn.Linear(64, 3), nn.Softplus())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@dataclass
class Entry:
    """How to build one zoo model and run one training step of it."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], dict]          # real CPU inputs (tensors moved or faked per kind; flags as is)
    loss: Callable[[object], torch.Tensor]


def _lm_inputs() -> dict:
    ids = torch.randint(3, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids}


def _entries() -> dict[str, Entry]:
    import transformers as tf

    e = {}
    for fam in ("llama", "mistral", "qwen2", "gemma2", "phi3"):
        e[fam] = Entry(fam, lambda fam=fam: _small_decoder(fam), _lm_inputs, lambda out: out.loss)
    e["gpt2"] = Entry("gpt2", lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2)),
        _lm_inputs, lambda out: out.loss)
    e["bert"] = Entry("bert", lambda: tf.BertModel(tf.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=VOCAB, max_position_embeddings=64)),
        lambda: {"input_ids": torch.randint(3, VOCAB, (BATCH, SEQ))},
        lambda out: out.last_hidden_state.square().mean())
    e["t5"] = Entry("t5", lambda: tf.T5ForConditionalGeneration(tf.T5Config(
        d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=VOCAB,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)), _lm_inputs, lambda out: out.loss)
    e["vit"] = Entry("vit", lambda: tf.ViTForImageClassification(tf.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=8, num_labels=10)),
        lambda: {"pixel_values": torch.randn(BATCH, 3, 32, 32), "labels": torch.randint(0, 10, (BATCH,))},
        lambda out: out.loss)
    e["resnet"] = Entry("resnet", ResNetish, lambda: {"x": torch.randn(BATCH, 3, 16, 16)},
                        lambda out: out.logsumexp(-1).mean())
    e["lstm"] = Entry("lstm", LSTMClassifier, lambda: {"x": torch.randn(BATCH, 5, 16)},
                      lambda out: out.square().mean())
    e.update(_extended_entries())
    e.update(zoo_2026.entries(Entry))
    e.update(zoo_more.entries(Entry))
    e.update(zoo_extra.entries(Entry))
    return e


def _image(labels: bool = True) -> Callable[[], dict]:
    def make() -> dict:
        out = {"pixel_values": torch.randn(BATCH, 3, 32, 32)}
        if labels:
            out["labels"] = torch.randint(0, 10, (BATCH,))
        return out
    return make


def _seq2seq(**extra: object) -> dict:
    return dict(d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=VOCAB,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, **extra)


def _extended_entries() -> dict[str, Entry]:
    """Vision, audio, multimodal and encoder-decoder families transformers builds from a config
    offline, and plain torch nets (GRU, UNet-style, 1-d audio conv)."""
    import transformers as tf

    loss = lambda out: out.loss                                   # noqa: E731
    logits2 = lambda out: out.logits.float().square().mean()      # noqa: E731
    e = {
        "convnext": Entry("convnext", lambda: tf.ConvNextForImageClassification(tf.ConvNextConfig(
            num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)), _image(), loss),
        "resnet-hf": Entry("resnet-hf", lambda: tf.ResNetForImageClassification(tf.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10)),
            _image(), loss),
        "swin": Entry("swin", lambda: tf.SwinForImageClassification(tf.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
            num_labels=10)), _image(), loss),
        "segformer": Entry("segformer", lambda: tf.SegformerForSemanticSegmentation(tf.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
            num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=3)),
            lambda: {"pixel_values": torch.randn(BATCH, 3, 32, 32),
                     "labels": torch.randint(0, 3, (BATCH, 32, 32))}, loss),
        "whisper": Entry("whisper", lambda: tf.WhisperForConditionalGeneration(tf.WhisperConfig(
            **_seq2seq(num_mel_bins=16, max_source_positions=16, max_target_positions=32))),
            lambda: {"input_features": torch.randn(BATCH, 16, 32), "labels": torch.randint(3, VOCAB, (BATCH, SEQ))},
            loss),
        "wav2vec2": Entry("wav2vec2", lambda: tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2, vocab_size=32, mask_time_prob=0.0,
            layerdrop=0.0)),   # LayerDrop skips the layer on a CPU random draw: kinds would differ by chance
            lambda: {"input_values": torch.randn(BATCH, 400)}, logits2),
        "clip": Entry("clip", lambda: tf.CLIPModel(tf.CLIPConfig(
            text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                             vocab_size=VOCAB, max_position_embeddings=16),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                               image_size=32, patch_size=8), projection_dim=16)),
            lambda: {"input_ids": torch.randint(3, VOCAB, (BATCH, SEQ)), "pixel_values": torch.randn(BATCH, 3, 32, 32),
                     "return_loss": True}, loss),       # a Python bool: a tensor flag has no value on meta
        "bart": Entry("bart", lambda: tf.BartForConditionalGeneration(tf.BartConfig(
            **_seq2seq(max_position_embeddings=64))), _lm_inputs, loss),
        # DETR: a small transformers ResNet backbone (no timm, no download); trained on a
        # logits + boxes loss (its Hungarian-matching loss needs scipy and real values)
        "detr": Entry("detr", lambda: tf.DetrForObjectDetection(tf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False,
            backbone_config=tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                            layer_type="basic", out_features=["stage2"]),
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5, num_labels=3)),
            _image(labels=False), lambda out: out.logits.float().square().mean() + out.pred_boxes.float().mean()),
        "gru": Entry("gru", GRUTagger, lambda: {"x": torch.randn(BATCH, 5, 16)}, lambda out: out.square().mean()),
        "unet": Entry("unet", UNetish, lambda: {"x": torch.randn(BATCH, 3, 16, 16)}, lambda out: out.abs().mean()),
        "audio-conv": Entry("audio-conv", AudioConv, lambda: {"x": torch.randn(BATCH, 1, 400)},
                            lambda out: nn.functional.smooth_l1_loss(out, torch.zeros_like(out))),
    }
    return e


ZOO_NAMES = ("llama", "mistral", "qwen2", "gemma2", "phi3", "gpt2", "bert", "t5", "vit", "resnet", "lstm")
#: More families (scripts/coverage.py runs them; the tests run a few, to keep CI short).
EXTENDED_NAMES = ("convnext", "resnet-hf", "swin", "segformer", "detr", "whisper", "wav2vec2", "clip", "bart",
                  "gru", "unet", "audio-conv")
#: Issue #40's families: MoE, state-space and hybrid decoders, vision-language, audio, ... (scripts/zoo_2026.py).
FAMILIES_2026 = zoo_2026.NAMES
#: More of #40's models: Funnel, DeBERTa-v2, Reformer, Swin-v2, EnCodec, Deformable-DETR, autocast (scripts/zoo_more.py).
MORE_NAMES = zoo_more.NAMES
#: diffusers and timm families, where those libraries import (scripts/zoo_extra.py).
EXTRA_NAMES = zoo_extra.NAMES
ALL_NAMES = ZOO_NAMES + EXTENDED_NAMES + FAMILIES_2026 + MORE_NAMES + EXTRA_NAMES


def entry(name: str) -> Entry:
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(ALL_NAMES)}")
    return entries[name]


def build(name: str, kind: str, *, seed: int = 0) -> tuple[nn.Module, dict, Callable]:
    """(model, inputs, loss_fn) of zoo model ``name`` on tensor kind ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    e = entry(name)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "fake":
            from dispatchprof import fake_model, fake_mode
            model = fake_model(e.build)
            model.train()
            torch.manual_seed(seed)          # the integer inputs' values as on the other kinds
            real_inputs = e.inputs()
            with fake_mode(model):
                inputs = {k: _fake_like(v) if isinstance(v, torch.Tensor) else v for k, v in real_inputs.items()}
            return model, inputs, e.loss
        model = e.build()
        torch.manual_seed(seed)
        inputs = e.inputs()
        if kind == "meta":
            model = model.to("meta")       # torch makes new parameters here: tied ones come apart
            if hasattr(model, "tie_weights"):
                model.tie_weights()         # transformers ties them again (real and fake stay tied)
            inputs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        model.train()
    return model, inputs, e.loss


def _fake_like(t: torch.Tensor) -> torch.Tensor:
    """A float input as a fake tensor of its shape and dtype; an integer input (token ids, labels,
    image grids) stays the real CPU tensor the user passes, so the model reads its values as on
    real tensors (the parameters stay fake)."""
    if t.dtype.is_floating_point:
        return torch.randn(t.shape, dtype=t.dtype)
    return t


def training_step(model: nn.Module, inputs: dict, loss_fn: Callable, *, optimizer: str | None = None) -> None:
    """Forward, loss, backward, and optionally an optimizer step ("adamw", "adamw-foreach",
    "adamw-fused")."""
    loss = loss_fn(model(**inputs))
    loss.backward()
    if optimizer is not None:
        opts = {"adamw": {"foreach": False}, "adamw-foreach": {"foreach": True}, "adamw-fused": {"fused": True}}
        torch.optim.AdamW(model.parameters(), lr=1e-3, **opts[optimizer]).step()
