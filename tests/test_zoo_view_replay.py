"""Autograd's view replay, the cause of every fake-versus-real byte difference of Swin-v2-style
in-place updates (docs/zoo.md: Longformer, Gemma-3n in the zoo): a view whose base is then
modified in place gets a new backward node. On CPU tensors it is AsStridedBackward (a zeroed
tensor of the base's storage, the gradient copied into the view's part); on fake tensors (a
Python-dispatch subclass) autograd replays the recorded view, so it is the view's own backward
(SliceBackward: slice_backward). torch's view-replay switch on the real run gives the fake
run's ops exactly."""

import torch
from torch._subclasses import FakeTensorMode

from dispatchprof import OpCounter


def _step(w):
    x = w * 1                 # [4, 6] float32, 96 bytes
    v = x[:, 1:]              # a view: [4, 5]
    x.mul_(2)                 # the base modified in place: v's backward node is made again
    v.sum().backward()


def _backward_ops(fake=False, replay=False):
    if fake:
        with FakeTensorMode():
            w = torch.randn(4, 6, requires_grad=True)
    else:
        w = torch.randn(4, 6, requires_grad=True)
    torch._C._set_view_replay_enabled(replay)
    try:
        with OpCounter(host_time=False) as c:
            _step(w)
    finally:
        torch._C._set_view_replay_enabled(False)
    return [(r.op, r.cost.bytes_read, r.cost.bytes_written) for r in c.profile.records if r.phase == "backward"]


def test_cpu_tensors_take_the_strided_backward_and_fake_ones_replay_the_view():
    # sum's gradient is one float expanded to [4, 5] (4 bytes read). CPU: new_zeros of the base's
    # storage (96 bytes) and copy_ into the view's part (80 bytes); fake: slice_backward writes
    # the [4, 6] gradient once (96 bytes); then mul_'s and w*1's backward, alike
    common = [("aten.mul", 96, 96), ("aten.mul", 96, 96)]
    assert _backward_ops() == [("aten.new_zeros", 4, 96), ("aten.copy_", 4, 80)] + common
    assert _backward_ops(fake=True) == [("aten.slice_backward", 4, 96)] + common
    assert _backward_ops(replay=True) == _backward_ops(fake=True)
