"""Convolutions, forward and backward.

Rule (COUNTING.md): with weight ``[Cout, Cin/g, k...]`` each output element costs
MULT = (Cin/g)*prod(k), ADD = (Cin/g)*prod(k) - 1, +1 ADD with bias; MACs = MULT.
Transposed convolutions scatter every input element into the output:
MULT = numel(input) * (Cout/g) * prod(k) and the products are summed into the
outputs, ADD = MULT - numel(output).
"""

from __future__ import annotations

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


@formula(aten.convolution, aten._convolution)
def convolution(x: TensorMeta, w: TensorMeta, bias: Any = None, stride: Any = None,
                padding: Any = None, dilation: Any = None, transposed: Any = False,
                *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Direct convolution (see module docstring); bias adds 1 ADD per output."""
    out = first_meta(result)
    mult = conv_products(x, w, out, transposed)
    add = mult - out.numel
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
    NB: the scatter ADD counts assume every element receives at least one product."""
    mult = conv_products(x, w, grad, transposed)
    cost = Cost()
    if output_mask[0]:
        cost += Cost(mult=mult, add=mult - x.numel, macs=mult)
    if output_mask[1]:
        cost += Cost(mult=mult, add=mult - w.numel, macs=mult)
    if output_mask[2]:
        cost += Cost(add=grad.numel - grad.shape[1])
    return cost
