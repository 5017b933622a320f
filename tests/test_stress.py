"""Attribution under stress: what the user sees in each scenario, and nothing left behind
(the autouse fixture in conftest.py checks hooks and modes after every test)."""

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from conftest import count
from dispatchprof import OpCounter


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))

    def helper(self, x):
        return self.fc.forward(x) * 2          # a submodule called through forward(), not __call__


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block.helper(x)


def test_submodule_called_through_a_method_other_than_call_counts_in_the_caller():
    """No hook fires for .forward() or another method: those ops count in the module whose __call__ ran."""
    # No hook fires for .forward() or .helper(): their ops belong to the module whose __call__ ran.
    c = count(Parent(), torch.randn(2, 4))
    rows = c.by_module()
    assert set(rows) == {""}
    assert rows[""].self_totals.macs == 2 * 4 * 4 and rows[""].self_totals.mult == 32 + 8


def test_activation_checkpointing_recomputes_in_backward_under_the_same_scope():
    """Checkpointed blocks: the recomputed forward is backward-phase work in the block's scope; calls counts it."""
    block = Block()

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = block

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)

    x = torch.randn(2, 4, requires_grad=True)
    with OpCounter() as c:
        Root()(x).sum().backward()
    recs = [r for r in c.profile.records if r.scope == "block.fc" and r.op == "aten.addmm"]
    assert [r.phase for r in recs] == ["forward", "backward"]       # the recomputation is backward work
    assert recs[0].cost == recs[1].cost
    assert c.by_module()["block"].scope.calls == 2                   # forward + recomputation
    assert c.total("backward").macs == 32 + 32 + 32                  # recompute, grad input, grad weight


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_no_grad_and_inference_mode_count_the_same(context):
    """no_grad and inference_mode give the same counts (composite ops are decomposed as elsewhere)."""
    model, x = Block(), torch.randn(3, 4)
    plain = count(model, x).total()
    with context():
        under = count(model, x).total()
    assert under == plain


def test_keyboard_interrupt_during_counting_leaves_nothing_and_keeps_results():
    """Ctrl-C inside forward: the interrupt propagates, nothing is left behind, counts so far stay readable."""
    class Interrupted(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            self.fc(x)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with OpCounter() as c:
            Interrupted()(torch.randn(1, 4))
    assert c.total().macs == 16                                      # the Linear that ran before
    assert c.by_module()["fc"].scope.calls == 1


def test_forward_raising_halfway_in_a_nested_module_keeps_the_tree_consistent():
    """An exception deep inside: every frame pops, inclusive counts still add up to the total."""
    class Fails(nn.Module):
        def forward(self, x):
            x = x * 2
            raise ValueError("halfway")

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), Fails())

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(ValueError, match="halfway"):
        with OpCounter() as c:
            Outer()(torch.randn(1, 4))
    rows = c.by_module()
    assert rows["inner.1"].inclusive.mult == 4 and rows["inner"].inclusive.macs == 16
    assert rows[""].inclusive == c.total()
