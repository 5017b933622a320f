"""A constant built on the CPU and moved to a meta model's device (`.to(x.device)`) costs nothing,
as on a CPU run, where the move dispatches no op (docs/zoo.md, "A constant moved onto the meta
device"). Hand counts: x is [4, 2] float32 (32 bytes), the constant [2] float32 (8 bytes)."""

import torch
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.count.tensors import moved_onto_meta


class Scale(nn.Module):
    """x * c, c = [2., 3.] built on the CPU and moved to x's device, optionally cast."""

    def __init__(self, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = torch.tensor([2.0, 3.0])
        return x * c.to(x.device, self.dtype or c.dtype)


def _count(model: nn.Module, device: str):
    x = torch.ones(4, 2, device=device)
    with OpCounter() as c:
        model(x)
    return c


def _summary(c):
    return [(r.op, r.cost.mult, r.cost.bytes_read, r.cost.bytes_written) for r in c.profile.records]


def test_moved_constant_is_free_on_meta_as_on_cpu():
    real, meta = _count(Scale(), "cpu"), _count(Scale(), "meta")
    # the multiply alone: 8 MULT, reads x (32 B) and c (8 B), writes 32 B
    assert _summary(real) == [("aten.mul", 8, 40, 32)]
    assert _summary(meta) == _summary(real)
    assert dict(meta.profile.zero_cost_calls).get("aten._to_copy") == 1
    assert "aten._to_copy" not in dict(real.profile.zero_cost_calls)


def test_a_cast_on_the_move_is_counted_on_both_kinds():
    # .to(device, float64): the CPU run casts too (an aten._to_copy reading 8 B, writing 16 B)
    real, meta = _count(Scale(torch.float64), "cpu"), _count(Scale(torch.float64), "meta")
    assert [r for r in _summary(real) if r[0] == "aten._to_copy"] == [("aten._to_copy", 0, 8, 16)]
    assert _summary(meta) == _summary(real)


def test_the_rule_reads_devices_dtype_and_format():
    cpu, meta = torch.ones(2), torch.empty(2, device="meta")
    assert moved_onto_meta((cpu,), {}, meta)
    assert not moved_onto_meta((cpu,), {}, cpu.clone())                       # stays on the CPU
    assert not moved_onto_meta((meta,), {}, torch.empty(2, device="meta"))    # meta to meta: a copy
    assert not moved_onto_meta((cpu,), {}, torch.empty(2, device="meta", dtype=torch.float16))   # a cast
    assert not moved_onto_meta((cpu,), {"memory_format": torch.channels_last}, meta)


def test_a_scalar_assigned_into_a_slice_is_documented_not_matched():
    """`x[:, 0] = 5` (T5's and Whisper's shift of the decoder ids): on the CPU torch fills the
    slice from a 0-dim CPU tensor it makes without dispatching (`fill_`: reads 8 B, writes 2 x 8 B);
    on meta it makes the scalar with a dispatched `scalar_tensor` on the meta device (writes 8 B)
    and copies it (`copy_`: reads 8 B, writes 16 B). A `scalar_tensor` on meta cannot be told apart
    from one the model asks for, so meta counts 8 B more written (docs/zoo.md)."""
    def ops(device):
        x = torch.zeros(2, 3, dtype=torch.int64, device=device)
        with OpCounter() as c:
            x[:, 0] = 5
        return [(r.op, r.cost.bytes_read, r.cost.bytes_written) for r in c.profile.records]

    assert ops("cpu") == [("aten.fill_", 8, 16)]
    assert ops("meta") == [("aten.scalar_tensor", 0, 8), ("aten.copy_", 8, 16)]
