"""Quantized kernels: (de)quantisation, int8 linear layers and int8 convolutions.

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
from op_formulas.conv import convolution
from op_formulas.matmul import matmul_cost
from op_formulas.pointwise import register_per_element
from op_formulas.registry import UnsupportedCall, formula

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


# --- static int8 convolutions ----------------------------------------------------------------
# quantized.conv{1,2,3}d(qx, packed, output_scale, output_zero_point) and their fused relu / add
# variants: the integer convolution by the float rule (conv.py: per output (Cin/g)*prod(k) MULT and
# MACs, (Cin/g)*prod(k) - 1 ADD, +1 ADD with bias; transposed: the scatter rule), then per output
# the int8 linear's rescale (1 MULT) and zero-point correction (1 MULT + 1 ADD), requantisation
# (QUANTIZE; the dynamic kernels quantise their float input instead and return floats); fused relu +1 CMP; fused add (conv2d_add): the accumulator dequantised and added
# (2 ADD + 1 MULT). The packed weight (an opaque object) gives the weight's shape, groups, stride,
# padding, dilation and bias. Bytes: the int8 input, the int8 weight (1 byte per element), a float32
# bias (4 bytes per output channel) and the accumulator read, the int8 output written.
RELU, ADD_ACCUM = Cost(cmp=1), Cost(add=2, mult=1)


def _packed_conv(packed: Any, spatial: int) -> tuple[TensorMeta, bool, tuple, tuple, tuple, bool]:
    """(weight, has bias, stride, padding, dilation, transposed) of a packed conv weight; conv1d's
    packs a 2-d kernel [.., 1, k]: the extra leading spatial dim is dropped."""
    try:
        w = packed.weight()
        params = [list(packed.stride()), list(packed.padding()), list(packed.dilation())]
        bias, transposed = packed.bias(), bool(packed.transpose())
    except (AttributeError, RuntimeError) as e:
        raise UnsupportedCall(f"packed conv weight without its parameters ({type(packed).__name__})") from e
    shape = tuple(int(s) for s in w.shape)
    shape = shape[:2] + shape[len(shape) - spatial:]
    stride, padding, dilation = (tuple(p[len(p) - spatial:]) for p in params)
    return TensorMeta(shape, torch.int8), bias is not None, stride, padding, dilation, transposed


def int8_conv(qx: TensorMeta, packed: Any, out: TensorMeta, extra: Cost, accum: Any = None) -> Cost:
    """The block comment's integer convolution and per-output work, with its bytes."""
    w, has_bias, stride, padding, dilation, transposed = _packed_conv(packed, len(qx.shape) - 2)
    conv = convolution(qx, w, 0 if has_bias else None, stride, padding, dilation, transposed, result=out)
    cost = conv + (Cost(mult=2, add=1) + extra) * out.numel
    read = qx.nbytes + w.numel + (4 * out.shape[1] if has_bias else 0)
    read += accum.nbytes if isinstance(accum, TensorMeta) else 0
    return cost.with_bytes(read=read, written=out.nbytes)


def _conv_formula(extra: Cost) -> Any:
    def count(qx: TensorMeta, packed: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
        return int8_conv(qx, packed, first_meta(result), QUANTIZE + extra)
    count.__doc__ = f"int8 convolution, requantised, +{extra} per output."
    return count


def _conv_add_formula(extra: Cost) -> Any:
    def count(qx: TensorMeta, accum: TensorMeta, packed: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
        return int8_conv(qx, packed, first_meta(result), QUANTIZE + extra, accum)
    count.__doc__ = f"int8 convolution, then the accumulator added, +{extra} per output."
    return count


formula(quantized.conv1d, quantized.conv2d, quantized.conv3d, quantized.conv_transpose1d,
        quantized.conv_transpose2d, quantized.conv_transpose3d)(_conv_formula(Cost()))
formula(quantized.conv1d_relu, quantized.conv2d_relu, quantized.conv3d_relu)(_conv_formula(RELU))
formula(quantized.conv2d_add)(_conv_add_formula(ADD_ACCUM))
formula(quantized.conv2d_add_relu)(_conv_add_formula(ADD_ACCUM + RELU))
@formula(quantized.conv1d_dynamic, quantized.conv2d_dynamic, quantized.conv3d_dynamic,
         quantized.conv_transpose1d_dynamic, quantized.conv_transpose2d_dynamic, quantized.conv_transpose3d_dynamic)
def conv_dynamic(x: TensorMeta, packed: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """Float input quantised dynamically (range, then QUANTIZE per element), the int8 convolution,
    a float output (no requantisation)."""
    return dynamic_range(x.numel) + QUANTIZE * x.numel + int8_conv(x, packed, first_meta(result), Cost())


formula(quantized.conv1d_prepack, quantized.conv2d_prepack, quantized.conv3d_prepack, quantized.conv_prepack,
        quantized.conv_transpose1d_prepack, quantized.conv_transpose2d_prepack,
        quantized.conv_transpose3d_prepack)(pack)
