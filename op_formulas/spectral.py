"""FFTs and the window functions that go with them.

Rule (the radix-2 Cooley-Tukey reference): a complex FFT of length n has (n/2)*L butterflies,
L = ceil(log2 n) stages (0 for n = 1); each butterfly is one complex multiply (4 MULT + 2 ADD)
and two complex adds (4 ADD), so one transform costs 2*n*L MULT and 3*n*L ADD (the familiar
5 n log2 n flops). A transform over several dims runs one dim at a time over all the others:
with N the elements of the complex signal, the cost is N * sum_d L_d * (2 MULT + 3 ADD).
Real-to-complex (rfft) and complex-to-real (irfft) count as the complex FFT of the full real
length n (the signal taken as complex with zero imaginary parts: the straightforward reference,
not a half-length packing trick). Normalisation (``norm`` "ortho" or a 1/n scale): 1 MULT
per real output value (2 per complex output element).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from op_formulas.args import first_meta, numel
from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten


def stages(n: int) -> int:
    """ceil(log2 n): radix-2 stages of a length-n transform (0 for n <= 1)."""
    return max(int(n) - 1, 0).bit_length()


def fft_cost(signal: Sequence[int], dims: Sequence[int]) -> Cost:
    """A complex FFT of a signal of shape ``signal`` over ``dims`` (module docstring)."""
    n = numel(signal)
    levels = sum(stages(signal[d % len(signal)]) for d in dims)
    return Cost(mult=2 * n * levels, add=3 * n * levels)


def _normalised(out: TensorMeta, normalization: int) -> Cost:
    values = out.numel * (2 if out.dtype.is_complex else 1)
    return Cost(mult=values * int(normalization != 0))


@formula(aten._fft_c2c)
def fft_c2c(x: TensorMeta, dim: Sequence[int], normalization: int, forward: bool, *, result: Any,
            **kwargs: Any) -> Cost:
    """Complex FFT over ``dim`` of the input's shape."""
    return fft_cost(x.shape, dim) + _normalised(first_meta(result), normalization)


@formula(aten._fft_r2c)
def fft_r2c(x: TensorMeta, dim: Sequence[int], normalization: int, onesided: bool, *, result: Any,
            **kwargs: Any) -> Cost:
    """As the complex FFT of the real input's full shape."""
    return fft_cost(x.shape, dim) + _normalised(first_meta(result), normalization)


@formula(aten._fft_c2r)
def fft_c2r(x: TensorMeta, dim: Sequence[int], normalization: int, last_dim_size: int, *,
            result: Any, **kwargs: Any) -> Cost:
    """As the complex FFT of the real output's full shape."""
    out = first_meta(result)
    return fft_cost(out.shape, dim) + _normalised(out, normalization)


@formula(aten.hann_window, aten.hamming_window)
def cosine_window(length: int, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """a - b*cos(2*pi*i/N) per element: 2 MULT (2*pi*i, b*cos), 1 DIV, 1 OTHER (cos), 1 ADD."""
    return Cost(mult=2, div=1, other=1, add=1) * first_meta(result).numel
