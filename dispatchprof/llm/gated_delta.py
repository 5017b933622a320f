"""Qwen3.5's gated delta-net layers as serving engines run them: the fused ops of
`op_formulas.linear_attention`, one op stream for prompts and decodes.

transformers' ``Qwen3_5GatedDeltaNet`` (and its MoE twin) takes one path for a prompt (a padded
causal convolution, then ``torch_chunk_gated_delta_rule``: Python loops over 64-token chunks and
positions) and another for a cached one-token step (``causal_conv1d_update``,
``torch_recurrent_gated_delta_rule``), so its steps are not one op stream and a long prompt's count
grows with its chunks. vLLM and SGLang run a step's prompts through flash-linear-attention's chunked
kernel and its decodes through the fused recurrent one, each one launch.

``GatedDeltaKernels`` runs the same function from the same weights: the four input projections, the
convolution as ``torch.ops.dispatchprof.causal_conv1d`` (its state carried from the last step), the
gates (beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)) as the model computes them, the
rule as ``torch.ops.dispatchprof.gated_delta_rule`` (q and k L2-normalised in the op), the gated
RMS norm and the output projection: the same ops whatever the step. The conv and recurrent states
live in the cache's linear-attention layer (``conv_states[0]``, ``recurrent_states[0]``), replaced
each step, not copied into place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from op_formulas.linear_attention import conv_state_bytes, recurrent_state_bytes  # defines torch.ops.dispatchprof.*
from dispatchprof.llm.module_swaps import swap_modules

ops = torch.ops.dispatchprof

#: The classes `fuse_gated_delta` replaces: transformers' Qwen3.5 gated delta-nets.
DELTA_CLASSES = ("Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet")


class GatedDeltaKernels(nn.Module):
    """A Qwen3.5 gated delta-net's weights, run as the fused ops (module docstring). Its children
    and parameters are the original's, under the same names."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        if layer.conv1d.bias is not None:
            raise ValueError("a gated delta-net whose convolution has a bias is not covered "
                             "(dispatchprof.llm.gated_delta)")
        for name in ("num_v_heads", "num_k_heads", "head_k_dim", "head_v_dim", "key_dim", "value_dim",
                     "conv_kernel_size", "layer_idx", "layer_type"):
            setattr(self, name, getattr(layer, name))
        for name, child in layer.named_children():
            self.add_module(name, child)
        self.dt_bias, self.A_log = layer.dt_bias, layer.A_log

    def forward(self, hidden_states: torch.Tensor, cache_params: Any = None, attention_mask: Any = None,
                **kwargs: Any) -> torch.Tensor:
        if attention_mask is not None:            # padding tokens zeroed, as the model does
            hidden_states = (hidden_states * attention_mask[:, :, None]).to(hidden_states.dtype)
        b, s, _ = hidden_states.shape
        layer = cache_params.layers[self.layer_idx] if cache_params is not None else None
        conv_state = layer.conv_states[0] if layer is not None else None
        state = layer.recurrent_states[0] if layer is not None else None
        mixed = self.in_proj_qkv(hidden_states)
        z = self.in_proj_z(hidden_states)
        beta = self.in_proj_b(hidden_states).sigmoid()
        a = self.in_proj_a(hidden_states)
        mixed, conv_state = ops.causal_conv1d(mixed, self.conv1d.weight.squeeze(1), conv_state)
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        out, state = ops.gated_delta_rule(q.reshape(b, s, -1, self.head_k_dim), k.reshape(b, s, -1, self.head_k_dim),
                                          v.reshape(b, s, -1, self.head_v_dim), g, beta, state)
        if layer is not None:
            _keep_states(layer, conv_state, state)
        out = self.norm(out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
        return self.out_proj(out.reshape(b, s, -1))


def _keep_states(layer: Any, conv_state: torch.Tensor, state: torch.Tensor) -> None:
    """Hold a step's conv and recurrent states in the cache's linear-attention layer."""
    layer.conv_states[0], layer.recurrent_states[0] = conv_state, state
    layer.is_conv_states_initialized[0] = layer.is_recurrent_states_initialized[0] = True
    layer.has_previous_state[0] = True


def has_gated_delta(config: Any) -> bool:
    """Whether ``config`` has gated delta-net layers (``layer_types`` with "linear_attention" and
    the ``linear_num_value_heads`` of Qwen3.5)."""
    return "linear_attention" in (getattr(config, "layer_types", None) or ()) and \
        hasattr(config, "linear_num_value_heads")


def fuse_gated_delta(model: nn.Module) -> int:
    """Replace every submodule of ``model`` (one dispatchprof built) whose class is in
    `DELTA_CLASSES` by ``GatedDeltaKernels(child)`` over the same weights; returns how many."""
    return swap_modules(model, DELTA_CLASSES, GatedDeltaKernels)


@dataclass(frozen=True)
class SequenceState:
    """What one sequence holds on one device of a tensor-parallel group besides its KV cache: the
    conv and recurrent states of each gated delta-net layer (``layer_bytes``, the same whatever its
    length), over ``layers`` such layers, beside ``kv_layers`` layers that cache keys and values."""

    layer_bytes: int
    layers: int
    kv_layers: int

    @property
    def bytes(self) -> int:
        """All its linear-attention layers' states: layer_bytes x layers."""
        return self.layer_bytes * self.layers


def sequence_state(config: Any, itemsize: int, tp: int = 1) -> SequenceState | None:
    """One sequence's gated delta-net states on one of ``tp`` devices (each holds ceil(heads / tp)
    of the key and value heads), the conv state in the model's ``itemsize`` and the recurrent one
    in float32 (the sizes the fused ops count: `op_formulas.linear_attention`); None for a model
    without such layers (`has_gated_delta`)."""
    if not has_gated_delta(config):
        return None
    types = list(config.layer_types)
    k_heads = math.ceil(config.linear_num_key_heads / tp)
    v_heads = math.ceil(config.linear_num_value_heads / tp)
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    channels = 2 * k_heads * dk + v_heads * dv
    layer = conv_state_bytes(channels, config.linear_conv_kernel_dim, itemsize) + recurrent_state_bytes(v_heads, dk, dv)
    return SequenceState(layer, types.count("linear_attention"), len(types) - types.count("linear_attention"))
