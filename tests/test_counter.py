"""OpCounter as a context: unknown ops, bad input, exceptions, nesting, bit-identical outputs."""

import warnings

import pytest
import torch
from torch import nn

import zoo
from conftest import count, counts
from dispatchprof import DataDependentOpError, OpCounter


def test_unknown_op_is_kept_and_warned_once():
    x = torch.randn(3, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with OpCounter() as c:
            torch.pdist(x)
            torch.pdist(x)
    unknown = {u.op: u for u in c.unknown_ops()}
    assert "aten._pdist_forward" in unknown and unknown["aten._pdist_forward"].calls == 2
    assert unknown["aten._pdist_forward"].scopes == ("",)
    assert sum("aten._pdist_forward has no formula" in str(w.message) for w in caught) == 1
    assert c.by_operator()["aten._pdist_forward"].state == "unknown"


def test_data_dependent_op_on_meta_names_op_and_scope_and_suggests_fake():
    class Picky(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(2, 2)

        def forward(self, x):
            return self.inner(x).nonzero()

    m = Picky().to("meta")
    with pytest.raises(DataDependentOpError, match=r"aten.nonzero in module scope '<root>'.*fake tensors"):
        with OpCounter():
            m(torch.randn(2, 2, device="meta"))

    class ItemInChild(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = nn.Sequential(nn.Identity())

        def forward(self, x):
            self.child(x)
            return x

    class UsesItem(nn.Identity):
        def forward(self, x):
            return x.sum().item()

    m2 = ItemInChild().to("meta")
    m2.child[0] = UsesItem()
    with pytest.raises(DataDependentOpError, match=r"aten._local_scalar_dense in module scope 'child.0'"):
        with OpCounter():
            m2(torch.randn(2, device="meta"))


def test_value_reading_op_on_fake_names_op_and_scope_and_suggests_real_tensors():
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

    class Reads(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(2, 2)

        def forward(self, x):
            return x[: int((self.inner(x) > 0).sum())]

    with FakeTensorMode():
        m, x = Reads(), torch.randn(3, 2)
    with pytest.raises(DataDependentOpError, match=r"aten._local_scalar_dense in module scope '<root>' needs the "
                       r"values of a fake tensor.*counts on real tensors only") as e:
        with OpCounter():
            m(x)
    assert isinstance(e.value, DataDependentOutputException)     # still what fake tensors raise

    class Fallback(nn.Module):          # a model that catches fake tensors' refusal runs as without the counter
        def forward(self, x):
            try:
                return x.nonzero()
            except DynamicOutputShapeException:
                return x[:1]

    with FakeTensorMode():
        y = torch.randn(3, 2)
    with OpCounter():
        out = Fallback()(y)
    assert out.shape == Fallback()(y).shape == (1, 2)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"model": "gpt2"}, TypeError, r"takes a torch.nn.Module, got str"),
    ({"causal": "half"}, ValueError, r"causal=...\) must be one of \('full', 'computed'\), got 'half'"),
])
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        OpCounter(**kwargs)


def test_bad_phase_names_the_allowed_ones():
    c = count(lambda: torch.ones(2) + 1)
    with pytest.raises(ValueError, match=r"phase must be one of \('forward', 'backward', 'prefill', 'decode', 'optimizer'\), got 'fwd'"):
        c.total("fwd")


def test_exception_inside_forward_leaves_nothing_and_keeps_results():
    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            self.lin(x)
            raise RuntimeError("boom")

    model = Boom()
    hooks_before = (dict(model._forward_hooks), dict(model._forward_pre_hooks))
    with pytest.raises(RuntimeError, match="boom"):
        with OpCounter() as c:
            model(torch.randn(2, 4))
    assert (dict(model._forward_hooks), dict(model._forward_pre_hooks)) == hooks_before
    assert c.total().macs == 2 * 4 * 4                              # the Linear before the failure
    assert c.by_module()["lin"].inclusive.macs == 32
    # the autouse fixture checks that no global hook or mode is left


def test_outputs_bit_identical_with_and_without_counting():
    model, inputs, _ = zoo.build("llama", "real")
    with torch.no_grad():
        plain = model(**inputs).logits
        with OpCounter():
            counted = model(**inputs).logits
    assert torch.equal(plain, counted)
    assert not torch.isnan(plain).any()


def test_nested_counters_both_count():
    lin = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    with OpCounter() as outer:
        lin(x)
        with OpCounter() as inner:
            lin(x)
    assert inner.total().macs == 18 and outer.total().macs == 36
    assert outer.by_module()[""].scope.calls == 2 and inner.by_module()[""].scope.calls == 1


def test_counter_is_not_reentrant_but_reusable():
    c = OpCounter()
    with c:
        with pytest.raises(RuntimeError, match="already counting"):
            c.__enter__()
    with c:
        torch.ones(2) * 2
    assert counts(c.total()) == {"mult": 2}


def test_results_before_counting_raise():
    with pytest.raises(RuntimeError, match="nothing counted yet"):
        OpCounter().total()
