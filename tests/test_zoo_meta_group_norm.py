"""docs/counting.md, "Group norm of a channels-last input on meta": torch's group_norm keeps a
channels-last input's layout on the CPU (fake tensors included) and makes it contiguous first on
the meta device; the counter counts what runs, so meta has one clone more, arithmetic equal."""

import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensorMode

from dispatchprof import OpCounter


def _forward_ops(device, fake=False):
    def make():
        return torch.randn(2, 16, 8, 8, device=device).contiguous(memory_format=torch.channels_last)
    if fake:
        with FakeTensorMode():
            x = make()
    else:
        x = make()
    with OpCounter(host_time=False) as c:
        F.group_norm(x, 4)
    return [(r.op, r.cost.bytes_read, r.cost.bytes_written) for r in c.profile.records], c.total()


def test_meta_copies_a_channels_last_input_before_group_norm():
    cpu, cpu_total = _forward_ops("cpu")
    meta, meta_total = _forward_ops("meta")
    assert _forward_ops("cpu", fake=True)[0] == cpu
    assert [op for op, *_ in cpu] == ["aten.native_group_norm"]
    # [2, 16, 8, 8] float32 = 8,192 bytes read and written by the clone
    assert meta[0] == ("aten.clone", 8192, 8192) and meta[1:] == cpu
    assert (meta_total.add, meta_total.mult, meta_total.div) == (cpu_total.add, cpu_total.mult, cpu_total.div)
