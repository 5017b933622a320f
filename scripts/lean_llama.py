"""A lean, gpt-fast style Llama (pytorch-labs/gpt-fast ``model.py``): the same arithmetic as a Hugging
Face Llama of the same config, with little Python around it - a fused qkv projection, a static KV
cache written in place, rotary tables precomputed once, a causal mask sliced from a buffer, no cache
objects, masks or output dataclasses built per call.

    model = lean_from_config(hf_config)          # LlamaConfig-like: sizes, heads, rope_theta, eps
    counts = count_decode(model, batch=1, prompt=512, devices=["H100-SXM"])

Used by scripts/validate_host_time.py and tests/test_host_split.py: the same config in HF form and
in this form gets different eager predictions because its measured host time differs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps) * self.weight


class KVCache(nn.Module):
    def __init__(self, batch: int, heads: int, length: int, head_dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, length, head_dim, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(batch, heads, length, head_dim, dtype=dtype))

    def update(self, input_pos: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k_cache[:, :, input_pos] = k          # (B, kvh, S, hd), in place
        self.v_cache[:, :, input_pos] = v
        return self.k_cache, self.v_cache


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wqkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.kv_cache: KVCache | None = None

    def forward(self, x: Tensor, freqs: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        b, t, _ = x.shape
        kv = self.kv_heads * self.head_dim
        q, k, v = self.wqkv(x).split([self.heads * self.head_dim, kv, kv], dim=-1)
        q = q.view(b, t, self.heads, self.head_dim)
        k = k.view(b, t, self.kv_heads, self.head_dim)
        v = v.view(b, t, self.kv_heads, self.head_dim)
        q, k = rotate(q, freqs), rotate(k, freqs)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))              # (B, h, T, hd)
        k, v = self.kv_cache.update(input_pos, k, v)
        k, v = repeat_kv(k, self.heads), repeat_kv(v, self.heads)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.wo(y.transpose(1, 2).contiguous().view(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int, heads: int, kv_heads: int, eps: float) -> None:
        super().__init__()
        self.attention = Attention(dim, heads, kv_heads)
        self.feed_forward = FeedForward(dim, hidden)
        self.attention_norm = RMSNorm(dim, eps)
        self.ffn_norm = RMSNorm(dim, eps)

    def forward(self, x: Tensor, freqs: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        h = x + self.attention(self.attention_norm(x), freqs, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


def repeat_kv(x: Tensor, heads: int) -> Tensor:
    """(B, kvh, S, hd) -> (B, heads, S, hd), each KV head repeated for its query heads."""
    b, kvh, s, hd = x.shape
    return x[:, :, None].expand(b, kvh, heads // kvh, s, hd).reshape(b, heads, s, hd)


def rotate(x: Tensor, freqs: Tensor) -> Tensor:
    """Rotary embedding with a precomputed (T, hd/2, 2) cos/sin table (gpt-fast apply_rotary_emb)."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    f = freqs.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * f[..., 0] - xs[..., 1] * f[..., 1],
                       xs[..., 1] * f[..., 0] + xs[..., 0] * f[..., 1]], -1)
    return out.flatten(3).type_as(x)


class LeanLlama(nn.Module):
    def __init__(self, vocab: int, dim: int, hidden: int, layers: int, heads: int, kv_heads: int,
                 eps: float = 1e-5, rope_theta: float = 10000.0, max_len: int = 1024) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, hidden, heads, kv_heads, eps) for _ in range(layers))
        self.norm = RMSNorm(dim, eps)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.heads, self.kv_heads, self.head_dim, self.max_len = heads, kv_heads, dim // heads, max_len
        half = self.head_dim // 2
        inv = 1.0 / (rope_theta ** (torch.arange(0, half).float() / half))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        self.register_buffer("freqs_cis", torch.stack([angles.cos(), angles.sin()], -1), persistent=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)),
                             persistent=False)

    def setup_caches(self, batch: int, dtype: torch.dtype) -> None:
        for b in self.layers:
            b.attention.kv_cache = KVCache(batch, self.kv_heads, self.max_len, self.head_dim, dtype)

    def forward(self, idx: Tensor, input_pos: Tensor) -> Tensor:
        mask = self.causal_mask[None, None, input_pos]
        freqs = self.freqs_cis[input_pos]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, freqs, mask, input_pos)
        return self.output(self.norm(x))


def lean_from_config(cfg, max_len: int = 1024) -> LeanLlama:
    """The lean form of a transformers LlamaConfig (same sizes, heads, eps and rope theta)."""
    return LeanLlama(cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers,
                     cfg.num_attention_heads, cfg.num_key_value_heads, cfg.rms_norm_eps,
                     getattr(cfg, "rope_theta", None) or 10000.0, max_len)
