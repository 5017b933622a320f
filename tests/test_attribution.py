"""Module attribution: names, self and inclusive counts, calls, backward, tensor quantities."""

import torch
from torch import nn

import zoo
from conftest import count
from dispatchprof import OpCounter


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_names_match_named_modules_and_inclusive_adds_up():
    """Scope names are model.named_modules() names; each inclusive count is self plus children."""
    model, inputs, loss = zoo.build("llama", "fake")
    with OpCounter() as c:
        zoo.training_step(model, inputs, loss)
    names = dict(model.named_modules())
    rows = c.by_module()
    assert set(rows) <= set(names) and "model.layers.1.self_attn.q_proj" in rows
    assert rows[""].scope.module_type == "LlamaForCausalLM"
    assert rows[""].inclusive == c.total()
    for name, row in rows.items():
        children = [r for r in rows.values() if r.scope.parent == name and r.scope.name != name]
        summed = row.self_totals
        for ch in children:
            summed = summed + ch.inclusive
        assert summed == row.inclusive, name


def test_self_inclusive_calls_and_ops_outside_modules():
    """A model called twice has calls=2; ops outside any module go to the root."""
    model = mlp()
    x = torch.randn(3, 4)
    with OpCounter(model) as c:
        model(x)
        model(x) * 2                        # called twice; the mul runs outside any module
    rows = c.by_module()
    assert rows["0"].scope.calls == 2 and rows[""].scope.calls == 2
    assert rows["0"].self_totals.macs == 2 * 3 * 4 * 8
    assert rows["2"].inclusive.macs == 2 * 3 * 8 * 2
    assert rows[""].self_totals.mult == 3 * 2              # only the outside mul
    assert rows[""].inclusive.macs == 2 * (96 + 48)


def test_module_reused_inside_one_parent_is_one_scope_with_two_calls():
    """A module used twice in one parent is one scope with calls=2."""
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, nn.ReLU(), lin)              # named_modules lists it once, as "0"
    c = count(model, torch.randn(1, 3))
    assert c.by_module()["0"].scope.calls == 2 and c.by_module()["0"].self_totals.macs == 18


def test_module_shared_by_two_parents_gets_one_scope_under_each():
    """A module shared by two parents gets a scope under each parent."""
    shared = nn.Linear(2, 2)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = shared

        def forward(self, x):
            return self.shared(x)

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = Holder(), Holder()

        def forward(self, x):
            return self.b(self.a(x))

    c = count(Parent(), torch.randn(1, 2))
    rows = c.by_module()
    assert rows["a.shared"].scope.calls == 1 and rows["b.shared"].scope.calls == 1
    assert rows["a"].inclusive.macs == rows["b"].inclusive.macs == 4
    assert rows[""].inclusive.macs == 8


def test_recursive_module_keeps_one_scope_and_counts_everything_once():
    """A module re-entering itself keeps one scope; nothing is counted twice."""
    class Countdown(nn.Module):
        def forward(self, x, n):
            return x if n == 0 else self(x * 2, n - 1)

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.rec = Countdown()

        def forward(self, x):
            return self.rec(x, 3)

    c = count(Root(), torch.randn(5))
    rows = c.by_module()
    assert rows["rec"].scope.calls == 4
    assert rows["rec"].inclusive.mult == 15 and rows[""].inclusive.mult == 15


def test_backward_ops_go_to_the_module_whose_forward_made_them():
    """Backward ops land in the module whose forward created them, phase backward."""
    model = mlp()
    x = torch.randn(3, 4)
    with OpCounter() as c:
        model(x).sum().backward()
    bwd = c.by_module("backward")
    # Linear "2": grad input [3,2]@[2,8] and grad weight [2,3]@[3,8], 48 MACs each
    assert bwd["2"].self_totals.macs == 48 + 48
    # Linear "0": only the weight gradient ([8,3]@[3,4]); x needs no gradient
    assert bwd["0"].self_totals.macs == 96
    assert bwd["1"].self_totals.cmp == 3 * 8                 # threshold_backward
    assert c.total("backward").macs == 96 + 96
    assert {r.phase for r in c.profile.records if r.scope == "1"} == {"forward", "backward"}


def test_params_buffers_tied_weights_counted_once():
    """PARAMS counts a tied weight once; BUFFERS counts registered buffers."""
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.norm = nn.BatchNorm1d(4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            return self.head(self.norm(self.emb(ids)))

    c = count(Tied().eval(), torch.tensor([1, 2, 3]))
    rows = c.by_module()
    assert rows["emb"].scope.params == 40 and rows["head"].scope.params == 40
    assert rows[""].scope.params == 40 + 8                  # tied weight once, plus norm's 2x4
    assert rows["norm"].scope.buffers == 4 + 4 + 1          # running mean, var, num_batches_tracked
    assert rows[""].scope.params_bytes == 48 * 4


def test_act_cache_and_peak():
    """ACT is the outputs, CACHE the temporaries, PEAK the live bytes while the module ran."""
    class Scratch(nn.Module):
        def forward(self, x):
            big = x.repeat(100, 1)                          # 100x the input, dropped before return
            return (big.sum(0) + 1).reshape(x.shape)

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.scratch = Scratch()

        def forward(self, x):
            return self.scratch(x) * 2

    x = torch.randn(1, 16)
    c = count(Root(), x)
    s = c.by_module()["scratch"].scope
    assert s.act == 16 and s.act_bytes == 64
    # temporaries: repeat (1600) and sum (16); the add (16) is the output
    assert s.cache == 1600 + 16
    assert s.peak_bytes >= 1600 * 4
    assert c.by_module()[""].scope.peak_bytes >= s.peak_bytes


def test_peak_excludes_parameters_and_views_of_them():
    """PEAK counts allocated activations, never parameters or views of them."""
    lin = nn.Linear(1000, 1000)                              # 4 MB of weight, viewed by t()
    c = count(lin, torch.randn(1, 1000))
    assert c.by_module()[""].scope.peak_bytes == 1000 * 4     # only the output is allocated


def test_a_view_keeps_its_storage_live_until_the_last_tensor_on_it_dies():
    """Live bytes follow storages: 4000 B stay live while a view of them lives, and are freed
    with it. By hand: a 4000, (a dropped, its view holds it) + b 8000, (view dropped) 4000,
    + d 8000: peak 8000. Freed with ``a`` it would be 4000; never freed, 12000."""
    x = torch.randn(1000)
    with OpCounter() as c:
        a = x * 2
        v = a[:10]
        del a
        b = x + 1
        del v
        d = x - 1
        del b, d
    assert c.by_module()[""].scope.peak_bytes == 8000
