"""Gated delta-net linear attention (Qwen3.5) as serving engines run it: two fused ops.

transformers runs a gated delta-net layer's core on two paths: a prompt through
``torch_chunk_gated_delta_rule`` (Python loops over 64-token chunks) and a cached one-token step
through ``torch_recurrent_gated_delta_rule``, with a different causal convolution on each. vLLM
and SGLang run one kernel of each kind per step (flash-linear-attention's chunked kernel over the
prompts, its fused recurrent kernel over the decodes; ``causal_conv1d_fn`` and
``causal_conv1d_update``). dispatchprof counts the layer as those two fused ops, defined here
(``torch.ops.dispatchprof``) with their reference implementations and formulas, and used by
`dispatchprof.llm.gated_delta`:

- ``causal_conv1d(x, weight, state)``: x (B, S, C) channels last, weight (C, K), state (B, C, K-1)
  (None: zeros, a new sequence); returns silu(depthwise causal convolution of state ++ x) (B, S, C)
  and the new state, the last K-1 inputs.
- ``gated_delta_rule(q, k, v, g, beta, state)``: q, k (B, S, Hk, dk), v (B, S, H, dv), g and beta
  (B, S, H), state (B, H, dk, dv) float32 (None: zeros); q and k are L2-normalised and q scaled by
  dk^-1/2 in the op (``use_qk_l2norm_in_kernel``), and per token t and value head h:
  S = S * exp(g_t); S = S + k_t (beta_t (v_t - S^T k_t))^T; o_t = S^T q_t. Returns o (B, S, H, dv)
  in v's dtype and the final state.

**Counting rule** (docs/counting.md, "Linear attention"): the arithmetic of the per-token
recurrence above, element by element, whichever kernel runs it (as attention counts its
definition, not the flash kernel's tiling): per token and value head 4 dk dv + dv + 4 dk MULT,
3 dk dv - dv + 2 dk ADD, dk + 2 DIV, 2 SQRT, 1 EXP, MACs 3 dk dv (S^T k, the rank-1 update,
S^T q). The convolution: per token and channel K MULT, K - 1 ADD, K MACs and a silu. **Bytes**:
every input and output once, and the state read and written once per sequence and step even
where none is passed (a new sequence's zeros): per step a sequence's state traffic does not
depend on its past, which keeps a step's work linear in its sequences and tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import torch
import torch.nn.functional as F

from op_formulas.cost import Cost, TensorMeta
from op_formulas.pointwise import SILU
from op_formulas.registry import formula

#: The recurrent state's dtype: transformers' reference computes in float32, and SGLang keeps it so by
#: default (``--mamba-ssm-dtype``: "The default setting is float32", sglang docs/basic_usage/qwen3.md).
STATE_DTYPE = torch.float32


def conv_state_bytes(channels: int, kernel: int, itemsize: int) -> int:
    """Bytes of one sequence's convolution state: its last K-1 inputs, channels x (K-1) x itemsize."""
    return channels * (kernel - 1) * itemsize


def recurrent_state_bytes(heads: int, dk: int, dv: int) -> int:
    """Bytes of one sequence's recurrent state: heads x dk x dv in `STATE_DTYPE`."""
    return heads * dk * dv * STATE_DTYPE.itemsize


@torch.library.custom_op("dispatchprof::causal_conv1d", mutates_args=())
def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, state: Optional[torch.Tensor]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """silu(depthwise causal conv of state ++ x), and the last K-1 inputs (module docstring)."""
    b, s, c = x.shape
    width = weight.shape[-1] - 1
    past = x.new_zeros(b, c, width) if state is None else state.to(x.dtype)
    full = torch.cat([past, x.transpose(1, 2)], dim=-1)                       # (B, C, K-1+S)
    out = F.silu(F.conv1d(full.to(weight.dtype), weight.unsqueeze(1), groups=c)).to(x.dtype)
    return out.transpose(1, 2).contiguous(), full[:, :, full.shape[-1] - width:].contiguous()


@causal_conv1d.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, state: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape), x.new_empty(x.shape[0], x.shape[2], weight.shape[-1] - 1)


@torch.library.custom_op("dispatchprof::gated_delta_rule", mutates_args=())
def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                     state: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule token by token (module docstring), in float32."""
    b, s, hk, dk = k.shape
    h, dv = v.shape[-2:]
    rep, dtype = h // hk, v.dtype
    q, k = (_l2norm(x.float()).repeat_interleave(rep, dim=2) for x in (q, k))
    q = q / dk ** 0.5
    v, g, beta = v.float(), g.float(), beta.float()
    s_ = q.new_zeros(b, h, dk, dv) if state is None else state.to(STATE_DTYPE).clone()
    out = v.new_empty(b, s, h, dv)
    for t in range(s):
        s_ = s_ * g[:, t].exp()[..., None, None]
        delta = (v[:, t] - (s_ * k[:, t, :, :, None]).sum(-2)) * beta[:, t, :, None]
        s_ = s_ + k[:, t, :, :, None] * delta[:, :, None, :]
        out[:, t] = (s_ * q[:, t, :, :, None]).sum(-2)
    return out.to(dtype), s_


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(sum x^2 + 1e-6) over the last dim (flash-linear-attention's and transformers' l2norm)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


@gated_delta_rule.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
      state: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, _, dk = k.shape
    h, dv = v.shape[-2:]
    return v.new_empty(v.shape), v.new_empty((b, h, dk, dv), dtype=STATE_DTYPE)


ops = torch.ops.dispatchprof


@formula(ops.causal_conv1d)
def causal_conv1d_cost(x: TensorMeta, weight: TensorMeta, state: Any, *, result: Any, **kwargs: Any) -> Cost:
    """Per token and channel K MULT, K-1 ADD, K MACs and a silu; reads x, the weight and the state
    (B x C x (K-1), counted where none is passed), writes the output and the new state."""
    b, s, c = x.shape
    kernel = weight.shape[-1]
    state_bytes = b * conv_state_bytes(c, kernel, x.itemsize)
    cost = (Cost(mult=kernel, add=kernel - 1, macs=kernel) + SILU) * (b * s * c)
    return dataclasses.replace(cost, bytes_read=x.nbytes + weight.nbytes + state_bytes,
                               bytes_written=x.nbytes + state_bytes)


@formula(ops.gated_delta_rule)
def gated_delta_rule_cost(q: TensorMeta, k: TensorMeta, v: TensorMeta, g: TensorMeta, beta: TensorMeta,
                          state: Any, *, result: Any, **kwargs: Any) -> Cost:
    """The per-token recurrence's arithmetic per value head (module docstring); reads q, k, v, g,
    beta and the float32 state (counted where none is passed), writes the output and the state."""
    b, s, _, dk = k.shape
    h, dv = v.shape[-2:]
    per = Cost(mult=4 * dk * dv + dv + 4 * dk, add=3 * dk * dv - dv + 2 * dk, div=dk + 2, sqrt=2, exp=1,
               macs=3 * dk * dv)
    state_bytes = b * recurrent_state_bytes(h, dk, dv)
    cost = per * (b * s * h)
    return dataclasses.replace(cost, bytes_read=q.nbytes + k.nbytes + v.nbytes + g.nbytes + beta.nbytes
                               + state_bytes, bytes_written=v.nbytes + state_bytes)
