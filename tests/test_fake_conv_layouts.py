"""Convolutions on meta tensors return the CPU kernels' layouts under the counter
(dispatchprof/count/stand_ins.py, `conv_layout_as_cpu`): channels-last where the input or the weight
is, for the output and the input and weight gradients; and a count on meta equals the real one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dispatchprof import OpCounter

CL = torch.channels_last

CASES = {   # name -> (input shape, weight shape, groups, input format, weight format)
    "contiguous": ((2, 8, 6, 6), (4, 8, 3, 3), 1, None, None),
    "channels-last input": ((2, 8, 6, 6), (4, 8, 3, 3), 1, CL, None),
    "channels-last weight": ((2, 8, 6, 6), (4, 8, 3, 3), 1, None, CL),
    "depthwise, channels-last input": ((2, 8, 6, 6), (8, 1, 3, 3), 8, CL, None),
    "3-D, channels-last input": ((2, 4, 4, 4, 4), (4, 4, 3, 3, 3), 1, torch.channels_last_3d, None),
    "1-D": ((2, 8, 6), (4, 8, 3), 1, None, None),
}


def _tensor(shape, fmt, device):
    t = torch.randn(shape, device=device)
    return t if fmt is None else t.contiguous(memory_format=fmt)


def _layouts(name, device):
    shape_x, shape_w, groups, fx, fw = CASES[name]
    torch.manual_seed(0)
    x = _tensor(shape_x, fx, device).requires_grad_()
    w = _tensor(shape_w, fw, device).requires_grad_()
    with OpCounter():
        y = F.conv1d(x, w, groups=groups) if x.dim() == 3 else (
            F.conv2d(x, w, groups=groups) if x.dim() == 4 else F.conv3d(x, w, groups=groups))
        gx, gw = torch.autograd.grad(y, (x, w), torch.ones_like(y))
    return [(t.shape, t.stride()) for t in (y, gx, gw)]


@pytest.mark.parametrize("name", list(CASES))
def test_meta_layouts_are_the_cpu_kernels(name):
    assert _layouts(name, "meta") == _layouts(name, "cpu")


class Net(nn.Module):
    """A permute to channels-last activations, then a depthwise and a pointwise convolution, then
    a view that copies unless the convolution's output is channels-last (SegFormer's mix-FFN)."""

    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 4, 1)

    def forward(self, x):                       # x [B, H*W, C]
        b, n, c = x.shape
        h = x.transpose(1, 2).view(b, c, 4, 4)  # channels-last underneath
        return self.pw(self.dw(h)).flatten(2).transpose(1, 2).reshape(b * n, -1)


def _count(device):
    torch.manual_seed(0)
    net = Net().to(device)
    x = torch.randn(2, 16, 8, device=device, requires_grad=True)
    with OpCounter() as c:
        net(x).sum().backward()
    return c


def test_meta_count_equals_real():
    real, meta = _count("cpu"), _count("meta")
    assert [r.op for r in meta.profile.records] == [r.op for r in real.profile.records]
    assert meta.total() == real.total()
