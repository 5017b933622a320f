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


@dataclass
class Entry:
    """How to build one zoo model and run one training step of it."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], dict]          # real CPU inputs; moved or faked per kind
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
    return e


ZOO_NAMES = ("llama", "mistral", "qwen2", "gemma2", "phi3", "gpt2", "bert", "t5", "vit", "resnet", "lstm")


def entry(name: str) -> Entry:
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(ZOO_NAMES)}")
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
            with fake_mode(model):
                inputs = {k: _fake_like(v) for k, v in e.inputs().items()}
            return model, inputs, e.loss
        model = e.build()
        inputs = e.inputs()
        if kind == "meta":
            model = model.to("meta")
            inputs = {k: v.to("meta") for k, v in inputs.items()}
        model.train()
    return model, inputs, e.loss


def _fake_like(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point:
        return torch.randn(t.shape, dtype=t.dtype)
    return torch.randint(3, 10, t.shape, dtype=t.dtype)


def training_step(model: nn.Module, inputs: dict, loss_fn: Callable, *, optimizer: str | None = None) -> None:
    """Forward, loss, backward, and optionally an optimizer step ("adamw", "adamw-foreach",
    "adamw-fused")."""
    loss = loss_fn(model(**inputs))
    loss.backward()
    if optimizer is not None:
        opts = {"adamw": {"foreach": False}, "adamw-foreach": {"foreach": True}, "adamw-fused": {"fused": True}}
        torch.optim.AdamW(model.parameters(), lr=1e-3, **opts[optimizer]).step()
