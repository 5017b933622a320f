"""On fake tensors the counter runs ``aten._unsafe_view`` as ``aten.view`` (count/stand_ins.py,
`view_on_fake`): served from the fake tensors' dispatch cache, the same view of the same storage,
the same refusal of strides that cannot be viewed, and recorded as ``_unsafe_view``."""

import pytest
import torch
from torch._subclasses import FakeTensorMode

from dispatchprof import OpCounter
from dispatchprof.count.stand_ins import runner

aten = torch.ops.aten


def test_fake_unsafe_view_is_a_cached_view_of_the_same_storage():
    run = runner(aten._unsafe_view, aten._unsafe_view.default._op)
    with FakeTensorMode() as mode:
        x = torch.empty(6, 4, 8)[1:]                          # storage offset 32
        bypassed = FakeTensorMode.cache_bypasses.get("unsafe view", 0)
        plain = aten._unsafe_view.default(x, [20, 8])
        stood_in = run(x, [20, 8])
        assert FakeTensorMode.cache_bypasses.get("unsafe view", 0) == bypassed + 1     # only the plain call
        assert (stood_in.shape, stood_in.stride(), stood_in.storage_offset()) == \
            (plain.shape, plain.stride(), plain.storage_offset()) == ((20, 8), (8, 1), 32)
        assert stood_in.untyped_storage()._cdata == x.untyped_storage()._cdata
        transposed = torch.empty(3, 4).t()
        refusals = []
        for call in (aten._unsafe_view.default, run):
            with pytest.raises(ValueError, match="Cannot view a tensor") as refused:
                call(transposed, [12])
            refusals.append(str(refused.value))
        assert refusals[0] == refusals[1]
    assert mode.cache_enabled


def test_real_unsafe_view_runs_unchanged():
    run = runner(aten._unsafe_view, aten._unsafe_view.default._op)
    x = torch.arange(24.0).reshape(2, 3, 4)
    out = run(x, [6, 4])
    assert out.data_ptr() == x.data_ptr() and not out._is_view() and out[5, 3].item() == 23.0


def test_linear_on_fake_tensors_is_counted_as_before():
    """A 3-d linear: t, view, mm, _unsafe_view, the GEMM's MACs 5 x 7 x 16 x 3 (batch x seq x out x in)."""
    with FakeTensorMode():
        layer, x = torch.nn.Linear(3, 16, bias=False), torch.empty(5, 7, 3)
        with torch.no_grad(), OpCounter() as c:
            y = layer(x)
    assert y.shape == (5, 7, 16)
    assert c.total().macs == 5 * 7 * 16 * 3
    assert dict(c.profile.zero_cost_calls)["aten._unsafe_view"] == 1
