"""An in-place op writes its mutated tensor once, on every tensor kind: on fake tensors a real
tensor created inside the forward (``torch.zeros``) and overwritten with a fake value comes back
from the fake kernel as a new object, which was counted as a second write (Jamba's and Zamba2's
Mamba conv state: +2,048 and +4,608 bytes on fake)."""

import torch
from torch import nn

from conftest import count, only_record
from dispatchprof import fake_model, fake_mode
from dispatchprof.count.aliasing import returns_only_mutated

aten = torch.ops.aten


class ConvState(nn.Module):
    """Mamba's conv-state update: a zero state, concatenated with the input, keeps its last 4 steps."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        state = torch.zeros(2, 64, 4)
        state.copy_(torch.cat([state, h], -1)[:, :, -4:])
        return state


def test_copy_into_a_real_tensor_writes_it_once_on_fake_tensors():
    real = only_record(count(ConvState(), torch.randn(2, 64, 8)), "aten.copy_")
    model = fake_model(ConvState)
    with fake_mode(model):
        h = torch.randn(2, 64, 8)
    fake = only_record(count(model, h), "aten.copy_")
    nbytes = 2 * 64 * 4 * 4                          # the [2, 64, 4] float32 state, read from the slice and written
    assert (real.cost.bytes_read, real.cost.bytes_written) == (nbytes, nbytes)
    assert (fake.cost.bytes_read, fake.cost.bytes_written) == (nbytes, nbytes)


def test_returns_only_mutated_reads_the_schema():
    assert returns_only_mutated(aten.copy_.default) and returns_only_mutated(aten.add_.Tensor)
    assert returns_only_mutated(aten.add.out)                      # returns its out= tensor
    assert not returns_only_mutated(aten.native_batch_norm.default)   # mutates running stats, returns new tensors
    assert not returns_only_mutated(aten._foreach_add_.List)        # returns nothing
    assert not returns_only_mutated(aten.add.Tensor)
