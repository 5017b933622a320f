"""gpt-oss's attention with sinks as serving engines run it: one fused attention kernel.

transformers' ``GptOssAttention`` (eager, its only non-kernel implementation) writes the scores,
appends each head's sink logit as an extra column, takes the softmax over both, drops the sink
column and multiplies by V: two matmuls, a cat, a max, a softmax and the copies between them, with
the Lq x Lk score matrix written to and read from memory. vLLM (its FlashAttention 3 kernel's
``s_aux``), SGLang and TensorRT-LLM run one fused FlashAttention kernel with the sink folded into
the softmax denominator:

    out = sum_j exp(x_j) v_j / (sum_j exp(x_j) + exp(sink)) = o * Z / (Z + exp(sink))
        = o * sigmoid(lse - sink)

where ``o`` is plain attention's output over the same keys and mask and ``lse = log Z`` the
log-sum-exp of its scores, which flash kernels return with ``o``.

``SinkAttention`` computes exactly that function (sliding-window layers included: the window is
the mask the model passes, and the cache the model holds) from the same weights, as one
``aten._scaled_dot_product_flash_attention_for_cpu`` call (the fused CPU kernel, which takes
grouped K/V heads and a mask and returns the log-sum-exp; the meta and fake tensors dispatchprof
counts on are CPU tensors) and the correction above, per head and query: ``lse - sink``, a sigmoid,
a cast to the output's dtype and a product with the output, four elementwise ops over B x H x Lq
(x head_dim for the product), where the eager form runs its score-sized ops. The counter counts
the kernel by the attention rule (docs/counting.md, Attention): q, k, v and the mask read, the
output and the log-sum-exp written, never the scores.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dispatchprof.llm.module_swaps import swap_modules

aten = torch.ops.aten

#: The attention classes `fuse_sink_attention` replaces: transformers' gpt-oss attention.
SINK_CLASSES = ("GptOssAttention",)


def has_sinks(config: Any) -> bool:
    """Whether ``config`` describes gpt-oss's attention with per-head sinks (model_type gpt_oss)."""
    return getattr(config, "model_type", None) == "gpt_oss"


class SinkAttention(nn.Module):
    """A GptOssAttention's weights, run as one fused attention kernel (see the module docstring).

    Built from the original module: its q_proj, k_proj, v_proj, o_proj and sinks become this
    module's own under the same names, so parameters and scope names are unchanged."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        for name in ("config", "layer_idx", "layer_type", "head_dim", "num_key_value_groups", "scaling",
                     "attention_dropout", "is_causal", "sliding_window"):
            setattr(self, name, getattr(attn, name))
        for name, child in attn.named_children():
            self.add_module(name, child)
        self.sinks = attn.sinks
        self._rotary = _rotary_fn(attn)

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                attention_mask: torch.Tensor | None, past_key_values: Any = None, **kwargs: Any
                ) -> tuple[torch.Tensor, None]:
        b, s = hidden_states.shape[:-1]
        shape = (b, s, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)  # (B, H, S, hd)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)  # (B, Hk, S, hd)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        q, k = self._rotary(q, k, *position_embeddings)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        out = sink_attention(q, k, v, self.sinks, attention_mask, self.scaling)  # (B, H, S, hd)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1)), None


def sink_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor,
                   mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """Attention of q (B, H, Lq, E) over k, v (B, Hk, Lk, E) with one sink logit per head
    (``sinks``, (H,)) in the softmax denominator: the fused kernel's output times
    sigmoid(lse - sink). Causal from the position when no mask is given."""
    if q.device.type not in ("cpu", "meta"):
        raise ValueError(f"sink_attention runs torch's fused CPU kernel (dispatchprof counts on CPU, meta and "
                         f"fake CPU tensors); got tensors on {q.device.type!r}")
    if mask is None and q.shape[-2] > 1 and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"a step of {q.shape[-2]} queries over {k.shape[-2]} keys needs an attention mask")
    if mask is not None:
        mask = mask[:, :, :, :k.shape[-2]]
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, mask is None and q.shape[-2] > 1, attn_mask=mask, scale=scale)
    keep = torch.sigmoid(lse - sinks.view(1, -1, 1)).to(out.dtype)  # (B, H, Lq): Z / (Z + e^sink)
    return out * keep.unsqueeze(-1)


def _rotary_fn(attn: nn.Module) -> Any:
    """transformers' rotary function for this attention's model."""
    import importlib

    return importlib.import_module(type(attn).__module__).apply_rotary_pos_emb


def fuse_sink_attention(model: nn.Module) -> int:
    """Replace every attention submodule of ``model`` (one dispatchprof built) whose class is in
    `SINK_CLASSES` by ``SinkAttention(child)`` over the same weights; returns how many were replaced."""
    return swap_modules(model, SINK_CLASSES, SinkAttention)
