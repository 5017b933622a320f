"""Formulas added for issue #15, each checked on a real torch call with the arithmetic by hand."""

import torch
import torch.nn.functional as F

from conftest import count, counts


def _records(c, op):
    return [r for r in c.profile.records if r.op == op]


def test_conv_backward_with_stride_above_kernel_never_negative():
    # conv1d, input length 10, kernel 2, stride 4: 3 outputs reach inputs {0,1,4,5,8,9} = 6 of 10.
    # Cout = 2: grad_input has 3 outputs * 2 channels * 2 taps = 12 products, landing on 6 inputs
    # (2 each): 12 - 6 = 6 ADD (the old rule gave 12 - 10 = 2 and, with Cout = 1, 6 - 10 = -4).
    x = torch.randn(1, 1, 10, requires_grad=True)
    w = torch.randn(2, 1, 2, requires_grad=True)
    c = count(lambda: F.conv1d(x, w, stride=4).sum().backward())
    (bwd,) = _records(c, "aten.convolution_backward")
    # grad_weight: 12 products summed into 4 weights: 8 ADD. grad_input: 12 MULT, 6 ADD.
    assert counts(bwd.cost) == {"mult": 24, "add": 6 + 8, "macs": 24}
    w1 = torch.randn(1, 1, 2, requires_grad=True)
    c = count(lambda: F.conv1d(x, w1, stride=4).sum().backward())
    (bwd,) = _records(c, "aten.convolution_backward")
    # grad_input 6 products on 6 inputs: 0 ADD; grad_weight 6 products into 2 weights: 4 ADD
    assert counts(bwd.cost) == {"mult": 12, "add": 4, "macs": 12}
    assert all(getattr(r.cost, k) >= 0 for r in c.profile.records for k in ("add", "mult"))


def test_transposed_conv_with_stride_above_kernel_counts_reached_outputs():
    # conv_transpose1d: 2 inputs, kernel 1, stride 3: 4 outputs, products land on {0, 3}: 0 ADD.
    x, w = torch.randn(1, 1, 2), torch.randn(1, 1, 1)
    c = count(lambda: F.conv_transpose1d(x, w, stride=3))
    (r,) = _records(c, "aten.convolution")
    assert counts(r.cost) == {"mult": 2, "macs": 2}
