"""Quantized kernels: (de)quantisation and int8 linear layers.

quantize: x / scale + zero_point, rounded and clamped: 1 DIV + 1 ADD + 1 OTHER + 2 CMP per
element; dynamic quantisation first finds the range (2(n-1) CMP for min and max) and the scale
and zero point (2 ADD + 1 DIV + 1 OTHER). dequantize: (q - zero_point) * scale: 1 ADD + 1 MULT.
int8 linear [M,K] x [N,K]^T: M*N*K integer MULT, M*N*(K-1) ADD, MACs = M*N*K; each output is
rescaled (acc * s_x * s_w: 1 MULT), corrected for the zero point (x_zp * rowsum(w): 1 MULT +
1 ADD) and biased (1 ADD). Bytes: the input, the int8 weight (N*K bytes) and a float32 bias
(N*4; nn.Linear's default) read, the output written. The dynamic kernel also quantises its input.
The packed weight is an opaque object: N comes from the output, K from the input.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.args import first_meta, numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.matmul import matmul_cost
from op_formulas.pointwise import register_per_element
from op_formulas.registry import formula

aten = torch.ops.aten
quantized = torch.ops.quantized
QUANTIZE = Cost(div=1, add=1, other=1, cmp=2)

register_per_element(QUANTIZE, aten.quantize_per_tensor, aten.quantize_per_channel)
register_per_element(Cost(add=1, mult=1), aten.dequantize)


def dynamic_range(n: int) -> Cost:
    """min and max over n elements, then scale and zero point."""
    return Cost(cmp=2 * max(n - 1, 0), add=2, div=1, other=1)


@formula(aten.quantize_per_tensor_dynamic)
def quantize_dynamic(x: TensorMeta, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Range, then quantise every element."""
    return dynamic_range(x.numel) + QUANTIZE * x.numel


def int8_linear(x: TensorMeta, out: TensorMeta) -> Cost:
    """The module docstring's integer contraction and per-output rescaling, with its bytes."""
    k, n = x.shape[-1], out.shape[-1]
    m = numel(out.shape[:-1])
    cost = matmul_cost(m, n, k) + Cost(mult=2, add=2) * (m * n)
    return cost.with_bytes(read=x.nbytes + n * k + 4 * n, written=out.nbytes)


@formula(quantized.linear_dynamic)
def linear_dynamic(x: TensorMeta, packed: Any, reduce_range: bool = False, *, result: Any,
                   **kwargs: Any) -> Cost:
    """Quantise the float input dynamically, then the int8 linear."""
    return dynamic_range(x.numel) + QUANTIZE * x.numel + int8_linear(x, first_meta(result))


@formula(quantized.linear)
def linear_static(x: TensorMeta, packed: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """int8 input: the int8 linear, then requantise each output (QUANTIZE)."""
    out = first_meta(result)
    return int8_linear(x, out) + QUANTIZE * out.numel


@formula(quantized.linear_prepack, aten._empty_affine_quantized)
def pack(*args: Any, result: Any, **kwargs: Any) -> Cost:
    """Weight packing and quantized factories: data movement, no arithmetic."""
    return Cost()
