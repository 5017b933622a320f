"""Matmul and convolution formulas: hand arithmetic, then real torch calls."""

import pytest
import torch

from conftest import count, counts, only_record
from op_formulas import T, lookup

aten = torch.ops.aten


@pytest.mark.parametrize("packet, args, kwargs, expected", [
    # [4,6] @ [6,5]: 4*5*6 MULT = 120, 4*5*5 ADD = 100
    (aten.mm, (T(4, 6), T(6, 5)), {}, {"mult": 120, "add": 100, "macs": 120}),
    # bmm: x3 batches
    (aten.bmm, (T(3, 4, 6), T(3, 6, 5)), {}, {"mult": 360, "add": 300, "macs": 360}),
    # addmm: + 4*5 ADD for the bias
    (aten.addmm, (T(5), T(4, 6), T(6, 5)), {}, {"mult": 120, "add": 120, "macs": 120}),
    # addmm with alpha=2, beta=3: + 20 MULT each
    (aten.addmm, (T(5), T(4, 6), T(6, 5)), {"alpha": 2, "beta": 3}, {"mult": 160, "add": 120, "macs": 120}),
    # addmm with beta=0: no added term
    (aten.addmm, (T(5), T(4, 6), T(6, 5)), {"beta": 0}, {"mult": 120, "add": 100, "macs": 120}),
    # baddbmm: 2 x [3,4]@[4,2]: 24 products of K=4 -> 48 MULT, 36 ADD, + 12 ADD
    (aten.baddbmm, (T(2, 3, 2), T(2, 3, 4), T(2, 4, 2)), {}, {"mult": 48, "add": 48, "macs": 48}),
    (aten.mv, (T(3, 4), T(4)), {}, {"mult": 12, "add": 9, "macs": 12}),
    (aten.dot, (T(5), T(5)), {}, {"mult": 5, "add": 4, "macs": 5}),
])
def test_matmul_rules(packet, args, kwargs, expected):
    assert counts(lookup(packet)(*args, result=T(1), **kwargs)) == expected


def test_linear_reaches_addmm():
    lin = torch.nn.Linear(6, 5)
    c = count(lin, torch.randn(4, 6))
    r = only_record(c, "aten.addmm")
    assert counts(r.cost) == {"mult": 120, "add": 120, "macs": 120}
    # reads x (4*6), weight (5*6) and bias (5) as float32; writes 4*5
    assert (r.cost.bytes_read, r.cost.bytes_written) == ((24 + 30 + 5) * 4, 20 * 4)


def test_conv2d_counts_per_output_element():
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)                      # weight [8, 3, 3, 3]
    r = only_record(count(conv, torch.randn(2, 3, 5, 5)), "aten.convolution")
    outputs = 2 * 8 * 5 * 5                                        # 400
    # per output: 3*9 = 27 MULT, 26 ADD + 1 ADD bias
    assert counts(r.cost) == {"mult": 27 * outputs, "add": 27 * outputs, "macs": 27 * outputs}


def test_grouped_conv_without_bias():
    conv = torch.nn.Conv2d(4, 4, 3, groups=2, bias=False)          # weight [4, 2, 3, 3]
    r = only_record(count(conv, torch.randn(1, 4, 5, 5)), "aten.convolution")
    outputs = 1 * 4 * 3 * 3                                        # 36
    assert counts(r.cost) == {"mult": 18 * outputs, "add": 17 * outputs, "macs": 18 * outputs}


def test_transposed_conv_scatters_every_input():
    conv = torch.nn.ConvTranspose2d(2, 3, 2, stride=2, bias=False)  # weight [2, 3, 2, 2]
    r = only_record(count(conv, torch.randn(1, 2, 4, 4)), "aten.convolution")
    mult = 32 * 3 * 4                                              # 32 inputs x Cout 3 x 4 taps
    assert counts(r.cost) == {"mult": mult, "add": mult - 1 * 3 * 8 * 8, "macs": mult}


def test_conv_backward_macs_twice_forward():
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(1, 3, 6, 6, requires_grad=True)
    c = count(lambda: conv(x).sum().backward())
    fwd = only_record(c, "aten.convolution").cost
    bwd = only_record(c, "aten.convolution_backward").cost
    assert bwd.macs == 2 * fwd.macs
    # grad_bias: sum of 1*4*4*4 grads into 4 channels = 64 - 4 ADD; input grad and weight grad:
    # products minus the elements they land in.
    assert bwd.add == (fwd.mult - x.numel()) + (fwd.mult - conv.weight.numel()) + (64 - 4)
