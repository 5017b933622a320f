"""Convolutions, forward and backward.

Rule (COUNTING.md): with weight ``[Cout, Cin/g, k...]`` each output element costs
MULT = (Cin/g)*prod(k), ADD = (Cin/g)*prod(k) - 1, +1 ADD with bias; MACs = MULT.
Transposed convolutions scatter every input element into the output:
MULT = numel(input) * (Cout/g) * prod(k) and the products are summed into the
outputs, ADD = MULT - (outputs that receive at least one product).

Scatters (a transposed forward, a direct convolution's grad_input) add their products into
the elements they reach: ADD = products - elements reached. With stride > dilated kernel some
elements are reached by no product (they stay 0 and cost nothing); `reached` counts the others
exactly, one spatial dim at a time (the reached set is a product of per-dim sets).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import torch

from op_formulas.args import first_meta, numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def conv_products(x: TensorMeta, w: TensorMeta, out: TensorMeta, transposed: bool) -> int:
    """Multiplications of a convolution: one per (output, weight-in-group) pair."""
    kernel = numel(w.shape[2:])
    if transposed:
        # weight [Cin, Cout/g, k...]: every input element meets Cout/g * prod(k) weights.
        return x.numel * w.shape[1] * kernel
    return out.numel * w.shape[1] * kernel


@lru_cache(maxsize=1024)
def reached_1d(length: int, sources: int, k: int, stride: int, pad: int, dil: int) -> int:
    """Positions of [0, length) hit by o*stride - pad + j*dil for o < sources, j < k."""
    hit = {o * stride - pad + j * dil for o in range(sources) for j in range(k)}
    return sum(1 for p in hit if 0 <= p < length)


def reached(target: TensorMeta, source: TensorMeta, w: TensorMeta, stride: Any, padding: Any,
            dilation: Any) -> int:
    """Elements of ``target`` (an input for a direct conv's grad_input, an output for a
    transposed conv) that receive at least one product from the spatial positions of ``source``."""
    dims = len(w.shape) - 2
    n = numel(target.shape[:2])
    for d in range(dims):
        n *= reached_1d(target.shape[2 + d], source.shape[2 + d], w.shape[2 + d],
                         _at(stride, d, 1), _at(padding, d, 0), _at(dilation, d, 1))
    return n


def _at(values: Any, d: int, default: int) -> int:
    if values is None or isinstance(values, str):
        return default
    if isinstance(values, int):
        return values
    return int(values[d] if len(values) > d else values[0]) if len(values) else default


@formula(aten.convolution, aten._convolution)
def convolution(x: TensorMeta, w: TensorMeta, bias: Any = None, stride: Any = None,
                padding: Any = None, dilation: Any = None, transposed: Any = False,
                *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Direct convolution (see module docstring); bias adds 1 ADD per output."""
    out = first_meta(result)
    mult = conv_products(x, w, out, transposed)
    add = mult - (reached(out, x, w, stride, padding, dilation) if transposed else out.numel)
    if bias is not None:
        add += out.numel
    return Cost(mult=mult, add=add, macs=mult)


@formula(aten.convolution_backward)
def convolution_backward(grad: TensorMeta, x: TensorMeta, w: TensorMeta, bias_sizes: Any,
                         stride: Any, padding: Any, dilation: Any, transposed: bool,
                         output_padding: Any, groups: int, output_mask: Sequence[bool],
                         *, result: Any, **kwargs: Any) -> Cost:
    """Reference backward, per output_mask entry:
    grad_input: the forward's products again, scattered into the input:
        MULT = MACs = forward MULT, ADD = MULT - numel(input);
    grad_weight: one product per (output, weight-in-group) pair summed per weight:
        MULT = MACs = forward MULT, ADD = MULT - numel(weight);
    grad_bias: sum of grad over batch and space: numel(grad) - Cout ADD.
    A direct convolution's grad_input is a scatter: ADD = MULT - inputs reached (module
    docstring); a transposed one's is a direct convolution of grad: ADD = MULT - numel(input)."""
    mult = conv_products(x, w, grad, transposed)
    cost = Cost()
    if output_mask[0]:
        landed = x.numel if transposed else reached(x, grad, w, stride, padding, dilation)
        cost += Cost(mult=mult, add=mult - landed, macs=mult)
    if output_mask[1]:
        cost += Cost(mult=mult, add=mult - w.numel, macs=mult)
    if output_mask[2]:
        cost += Cost(add=grad.numel - grad.shape[1])
    return cost
