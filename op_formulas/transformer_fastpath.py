"""torch's transformer fast path: the fused kernels nn.MultiheadAttention, nn.TransformerEncoderLayer
and nn.TransformerEncoder run in eval mode without gradients, and the nested-tensor conversions.

Rule: a fused call counts the arithmetic of the module's reference (slow) path on the same
arguments, op for op as that path's own formulas count it, so a model counts the same whichever
path torch takes (the meta device always takes the slow path). With n = B*L rows of width E, H
heads of width d = E/H, S = L*L scores per (batch, head):

- ``_native_multi_head_attention``: packed input projection (n*3E*E MULT, n*3E*E ADD with the
  bias, n*3E*E MACs); attention as `attention_cost` (masked when a mask is given) when
  ``need_weights`` is False; when True, as the slow path computes it: q scaled (B*H*L*d MULT),
  scores (+ the mask added), softmax, P @ V, and the head average of the weights
  (B*L*L*(H-1) ADD + B*L*L DIV); output projection (n*E*E MULT, n*E*E ADD, n*E*E MACs).
- ``_transformer_encoder_layer_fwd``: that attention (``need_weights`` False) + two residual
  adds (n*E ADD each) + two layer norms (`layer_norm_row` per row) + linear1 (n*F*E MULT and
  ADD) + relu (n*F CMP) or gelu (its formula) + linear2 (n*E*F MULT and ADD).
- On a nested input (the encoder's padding-mask fast path) each sequence counts with its own
  length: B = 1 and L = its length, summed; padding is not computed and not counted.
- Bytes: what each stage of the kernel reads and writes: the projections read their input,
  weight and bias and write their output; attention reads q, k, v and the mask and writes its
  output (and the weights); the encoder layer's adds and norms read and write n*E each. The
  slow path's extra copies (contiguous q, k, v, the expanded mask) are not part of the kernel.
- ``_nested_tensor_from_mask_left_aligned``: one CMP per mask element, reads the mask.
  ``_nested_tensor_from_mask``: a gather: reads the mask and the rows it keeps, writes them.
  ``to_padded_tensor``: reads the nested rows, writes the padded output.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from op_formulas.attention import attention_cost
from op_formulas.cost import Cost, TensorMeta
from op_formulas.matmul import matmul_cost
from op_formulas.norm import layer_norm_row
from op_formulas.reduction import mean_row, softmax_row
from op_formulas.registry import formula, lookup

aten = torch.ops.aten


def sequences(x: Any) -> list[tuple[int, int]]:
    """(batch, length) groups of a [B, L, E] tensor, or of a nested tensor given as the tuple of
    its [L_i, E] components (one group per sequence)."""
    if isinstance(x, TensorMeta):
        return [(x.shape[0], x.shape[1])] if len(x.shape) == 3 else [(1, x.shape[0])]
    return [(1, c.shape[0]) for c in x]


def linear_cost(n: int, d_in: int, d_out: int) -> Cost:
    """x [n, d_in] @ W^T [d_in, d_out] + bias: the product and one ADD per output."""
    return matmul_cost(n, d_out, d_in) + Cost(add=n * d_out)


def weights_attention_cost(b: int, h: int, length: int, d: int, *, masked: bool, average: bool) -> Cost:
    """The slow path's attention when the weights are returned: q * d**-0.5 (B*H*L*d MULT),
    scores (baddbmm with the mask: +S ADD), softmax per row, P @ V, and the head average."""
    s = length * length
    cost = Cost(mult=length * d) + matmul_cost(length, length, d) + Cost(add=s * int(masked))
    cost += softmax_row(length) * length + matmul_cost(length, d, length)
    cost = cost * (b * h)
    if average:
        cost += mean_row(h) * (b * s)
    return cost


def mha_cost(groups: Sequence[tuple[int, int]], e: int, h: int, *, masked: bool,
             need_weights: bool, average: bool) -> Cost:
    """The arithmetic of one self-attention block (module docstring), over (batch, length) groups."""
    total = Cost()
    d = e // h
    for b, length in groups:
        n = b * length
        if need_weights:
            attn = weights_attention_cost(b, h, length, d, masked=masked, average=average)
        else:
            attn = attention_cost(b, h, length, length, d, d, masked=masked, dropout=False, causal_computed=False)
        total += linear_cost(n, e, 3 * e) + attn + linear_cost(n, e, e)
    return total


def _rows(groups: Sequence[tuple[int, int]]) -> int:
    return sum(b * length for b, length in groups)


def _mask_bytes(mask: Any) -> int:
    return mask.nbytes if isinstance(mask, TensorMeta) else 0


def mha_bytes(n: int, e: int, itemsize: int, mask: Any, weights: int) -> tuple[int, int]:
    """(read, written) of the three stages: projection, attention, output projection."""
    w_in, w_out = (3 * e * e + 3 * e) * itemsize, (e * e + e) * itemsize
    read = n * e * itemsize + w_in + 3 * n * e * itemsize + _mask_bytes(mask) + n * e * itemsize + w_out
    written = 3 * n * e * itemsize + n * e * itemsize + weights + n * e * itemsize
    return read, written


@formula(aten._native_multi_head_attention)
def native_mha(query: Any, key: Any, value: Any, embed_dim: int, num_head: int, qkv_weight: TensorMeta,
               qkv_bias: Any, proj_weight: TensorMeta, proj_bias: Any, mask: Any = None,
               need_weights: bool = True, average_attn_weights: bool = True, mask_type: Any = None,
               *, result: Any, **kwargs: Any) -> Cost:
    """nn.MultiheadAttention's fused self-attention: see the module docstring."""
    groups = sequences(query)
    cost = mha_cost(groups, embed_dim, num_head, masked=mask is not None, need_weights=bool(need_weights),
                    average=bool(average_attn_weights))
    weights = result[1].nbytes if need_weights and isinstance(result[1], TensorMeta) else 0
    return cost.with_bytes(*mha_bytes(_rows(groups), embed_dim, qkv_weight.itemsize, mask, weights))


@formula(aten._transformer_encoder_layer_fwd)
def encoder_layer(src: Any, embed_dim: int, num_heads: int, qkv_weight: TensorMeta, qkv_bias: Any,
                  proj_weight: TensorMeta, proj_bias: Any, use_gelu: bool, norm_first: bool, eps: float,
                  norm_weight_1: Any, norm_bias_1: Any, norm_weight_2: Any, norm_bias_2: Any,
                  ffn_weight_1: TensorMeta, ffn_bias_1: Any, ffn_weight_2: TensorMeta, ffn_bias_2: Any,
                  mask: Any = None, mask_type: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """nn.TransformerEncoderLayer's fused forward: see the module docstring."""
    groups = sequences(src)
    n, e, f = _rows(groups), embed_dim, ffn_weight_1.shape[0]
    item = qkv_weight.itemsize
    cost = mha_cost(groups, e, num_heads, masked=mask is not None, need_weights=False, average=False)
    cost += Cost(add=2 * n * e) + layer_norm_row(e, True, True) * (2 * n)
    hidden = TensorMeta((n, f), qkv_weight.dtype)
    act = lookup(aten.gelu)(hidden, result=hidden) if use_gelu else Cost(cmp=n * f)
    cost += linear_cost(n, e, f) + act + linear_cost(n, f, e)
    read, written = mha_bytes(n, e, item, mask, 0)
    norms = (2 * e) * item * 2                                 # two norms' weight and bias
    ffn = (f * e + f + e * f + e) * item                       # linear1 and linear2 weights and biases
    read += 2 * (2 * n * e) * item + 2 * n * e * item + norms  # residual adds, norms
    read += n * e * item + n * f * item * 2 + ffn               # linear1, activation, linear2
    written += 2 * n * e * item + 2 * n * e * item + n * f * item * 2 + n * e * item
    return cost.with_bytes(read, written)


@formula(aten._nested_tensor_from_mask_left_aligned)
def mask_left_aligned(src: Any, mask: TensorMeta, *, result: Any, **kwargs: Any) -> Cost:
    """Whether each row of the mask is a run of True then False: one CMP per mask element."""
    return Cost(cmp=mask.numel).with_bytes(mask.nbytes, 0)


@formula(aten._nested_tensor_from_mask)
def nested_from_mask(src: TensorMeta, mask: TensorMeta, mask_check: bool = True, *, result: Any,
                     **kwargs: Any) -> Cost:
    """Gathers the rows the mask keeps into a nested tensor: no arithmetic."""
    kept = sum(c.nbytes for c in result)
    return Cost().with_bytes(mask.nbytes + kept, kept)


@formula(aten.to_padded_tensor)
def to_padded(nested: Any, padding: float, output_size: Any = None, *, result: Any, **kwargs: Any) -> Cost:
    """A nested tensor written out padded: no arithmetic."""
    rows = sum(c.nbytes for c in nested) if not isinstance(nested, TensorMeta) else nested.nbytes
    return Cost().with_bytes(rows, result.nbytes)
