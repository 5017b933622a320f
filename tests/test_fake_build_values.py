"""fake_model builds a constructor that reads values it computed from Python numbers (timm's and
transformers' drop-path rates, timm's RegNet widths): those values are real, the parameters fake."""

import pytest
import torch
from torch import nn
from torch._subclasses import FakeTensor

from dispatchprof import fake_model


class ReadsItsRates(nn.Module):
    """timm's rule: drop-path rates from a linspace, read with .item(); widths with unique()."""

    def __init__(self) -> None:
        super().__init__()
        self.rates = [x.item() for x in torch.linspace(0, 0.3, 4)]
        self.widths = torch.unique(torch.arange(6) // 2 * 8).tolist()
        self.blocks = nn.ModuleList(nn.Linear(w, 4) for w in self.widths)
        self.token = nn.Parameter(torch.zeros(1, 4))
        self.register_buffer("index", torch.arange(4).view(2, 2).t().contiguous())


class ReadsNothing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("index", torch.arange(4))


def test_a_constructor_that_reads_its_own_values_builds_fake():
    model = fake_model(ReadsItsRates)
    assert model.rates == pytest.approx([0.0, 0.1, 0.2, 0.3]) and model.widths == [0, 8, 16]
    params = list(model.parameters())
    assert len(params) == 7 and all(isinstance(p, FakeTensor) for p in params)   # 3 x (weight, bias) + token
    assert not isinstance(model.index, FakeTensor) and model.index.tolist() == [[0, 2], [1, 3]]


def test_a_constructor_that_reads_nothing_builds_all_fake():
    model = fake_model(ReadsNothing)
    assert all(isinstance(t, FakeTensor) for t in list(model.parameters()) + list(model.buffers()))


def test_random_and_filled_factories_stay_fake():
    from dispatchprof.count.build_values import ConstructorValues
    from torch._subclasses import FakeTensorMode

    with FakeTensorMode(), ConstructorValues():
        made = [torch.zeros(3), torch.ones(3), torch.randn(3), torch.empty(3), torch.full((3,), 2.0)]
        real = [torch.arange(3), torch.linspace(0, 1, 3), torch.logspace(0, 1, 3), torch.arange(3) * 2]
    assert all(isinstance(t, FakeTensor) for t in made)
    assert not any(isinstance(t, FakeTensor) for t in real) and real[3].tolist() == [0, 2, 4]
