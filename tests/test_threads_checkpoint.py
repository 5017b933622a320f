"""Attribution that holds up: per-thread counters, reentrant checkpoints, phases after an
exception, odd outputs (cycles), nested tensors, higher-order ops."""

import dataclasses
import threading

import pytest
import torch
import torch.utils.checkpoint as cp

from conftest import count
from dispatchprof import OpCounter
from dispatchprof.count.modes import NestedTensorNotSupported


class Block(torch.nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x).relu()


def test_two_threads_each_see_only_their_own_scopes():
    class Holder(torch.nn.Module):
        def __init__(self, child):
            super().__init__()
            self.child = child
            self.add_module(child, Block())

        def forward(self, x):
            return getattr(self, self.child)(x)

    results, barrier = {}, threading.Barrier(2)

    def work(name, model):
        with OpCounter(model) as c:
            for _ in range(20):
                barrier.wait()
                model(torch.randn(2, 4))
        results[name] = c

    threads = [threading.Thread(target=work, args=("a", Holder("alpha"))),
               threading.Thread(target=work, args=("b", Holder("beta")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    scopes_a = {s.name for s in results["a"].profile.scopes}
    scopes_b = {s.name for s in results["b"].profile.scopes}
    assert scopes_a == {"", "alpha", "alpha.lin"} and scopes_b == {"", "beta", "beta.lin"}
    # each counted its own 20 calls: 20 addmm of [2,4]x[4,4] = 20 * 32 MACs
    for c in results.values():
        assert c.total().macs == 20 * 2 * 4 * 4
        assert {r.scope for r in c.profile.records} <= {"", "alpha.lin", "alpha", "beta.lin", "beta"}


def test_reentrant_checkpoint_attributes_recomputation_and_backward_to_the_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block, self.head = Block(), torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.head(cp.checkpoint(self.block, x, use_reentrant=True))

    m = M()
    x = torch.randn(2, 4, requires_grad=True)
    with OpCounter(m) as c:
        m(x).sum().backward()
    backward = [(r.op, r.scope) for r in c.profile.records if r.phase == "backward"]
    # the recomputed forward (addmm, relu) and its backward (threshold_backward, 2 mm, bias sum)
    assert ("aten.addmm", "block.lin") in backward and ("aten.relu", "block") in backward
    assert ("aten.threshold_backward", "block") in backward
    assert [s for op, s in backward if op == "aten.mm"] == ["head", "head", "block.lin", "block.lin"]
    assert all(s != "" for op, s in backward if op in ("aten.mm", "aten.threshold_backward"))


def test_optimizer_step_that_raises_does_not_label_the_next_forward():
    m = torch.nn.Linear(3, 3)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def boom(*args):
        raise RuntimeError("boom")

    with OpCounter(m) as c:
        m(torch.randn(2, 3)).sum().backward()
        handle = opt.register_step_pre_hook(boom)
        with pytest.raises(RuntimeError, match="boom"):
            opt.step()
        handle.remove()
        m(torch.randn(2, 3))
        opt.step()
    phases = [(r.op, r.phase) for r in c.profile.records if r.op in ("aten.addmm", "aten.add_")]
    assert phases[0] == ("aten.addmm", "forward") and phases[1] == ("aten.addmm", "forward")
    assert ("aten.add_", "optimizer") in phases


def test_phase_restored_after_an_exception_inside_it():
    with OpCounter() as c:
        with pytest.raises(ValueError, match="inside"):
            with c.phase("decode"):
                raise ValueError("inside")
        torch.ones(2) + 1
    assert [r.phase for r in c.profile.records if r.op == "aten.add"] == ["forward"]


def test_self_referencing_outputs_terminate():
    @dataclasses.dataclass
    class Out:
        y: torch.Tensor
        me: object = None

    class Loop(torch.nn.Module):
        def forward(self, x):
            d = {"y": x * 2}
            d["self"] = d
            o = Out(x * 3)
            o.me = o
            return d, o, [d, o]

    model = Loop()
    with OpCounter(model) as c:
        model(torch.randn(3))
    root = c.by_module()[""].scope
    assert c.total().mult == 6 and root.act == 6      # two outputs of 3 elements, each counted once


def test_nested_tensors_are_refused_with_a_clear_error():
    lin = torch.nn.Linear(4, 5)
    for layout in (torch.jagged, torch.strided):
        nt = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)], layout=layout)
        with pytest.raises(NestedTensorNotSupported, match="nested tensors are not supported"):
            with OpCounter(lin):
                lin(nt)


def test_cond_while_loop_and_map_are_counted_through_their_bodies():
    from torch._higher_order_ops.cond import cond
    from torch._higher_order_ops.map import map as hop_map
    from torch._higher_order_ops.while_loop import while_loop

    x = torch.randn(3)
    c = count(lambda: cond(torch.tensor(True), lambda t: t.sin(), lambda t: t.cos(), (x,)))
    assert c.total().other == 3 and list(c.unknown_ops()) == []             # sin of 3 elements
    c = count(lambda: while_loop(lambda i: i < 3, lambda i: (i + 1,), (torch.zeros(()),)))
    # 4 tests (0, 1, 2 true; 3 false) and 3 increments
    assert (c.total().cmp, c.total().add) == (4, 3)
    xs = torch.randn(4, 3)
    c = count(lambda: hop_map(lambda a: a.sin(), xs))
    assert c.total().other == 12


def test_flex_attention_is_counted_and_outputs_are_unchanged():
    import torch.nn.attention.flex_attention as flex

    q, k, v = (torch.randn(1, 2, 128, 16) for _ in range(3))
    mask = flex.create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 2, 128, 128, device="cpu")
    before = flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    try:
        ref = flex.flex_attention(q, k, v, block_mask=mask)
    finally:
        flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = before
    with OpCounter() as c:
        out = flex.flex_attention(q, k, v, block_mask=mask)
    assert flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG == before           # restored on exit
    assert torch.equal(out, ref) and list(c.unknown_ops()) == []
    # the dense reference: two [128,16]x[16,128]-class products per head, 2 heads: 2*2*128*128*16
    assert c.total().macs == 2 * 2 * 128 * 128 * 16


def _chain(n):
    import bench_overhead
    return bench_overhead.chain(n)


def test_deep_models_count_wherever_the_model_alone_runs():
    # 220 nested modules: the plain forward needs ~3 frames per level (660 < 1000); torch's hook
    # path needs a 4th, and the counter used to recurse over the tree too (RecursionError at ~195)
    import sys
    assert sys.getrecursionlimit() == 1000
    model, x = _chain(220), torch.randn(4)
    with OpCounter():                      # one-time lazy imports happen here, not 220 levels deep
        _chain(2)(x)
    model(x)
    with OpCounter(model) as c:
        model(x)
    assert sys.getrecursionlimit() == 1000                       # restored
    assert len(c.profile.records) == 220                          # 219 adds + 1 mul
    root = c.by_module()[""].scope
    assert (root.params, root.params_bytes) == (220 * 4, 220 * 16)    # summed bottom-up, no recursion
    deepest = c.by_module()[".".join(["inner"] * 219)].scope
    assert (deepest.params, deepest.params_bytes) == (4, 16)


def test_cost_per_module_does_not_grow_with_depth():
    import time

    def once(model, x):
        t = time.perf_counter()
        with OpCounter(model):
            model(x)
        return time.perf_counter() - t

    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10000)
    try:
        once(_chain(10), torch.randn(4))
        short, long = (_chain(200), torch.randn(4)), (_chain(800), torch.randn(4))
        pairs = [(once(*short), once(*long)) for _ in range(5)]   # alternating: a slow spell hits both
        ratio = min(b for _, b in pairs) / min(a for a, _ in pairs)
    finally:
        sys.setrecursionlimit(old)
    assert ratio < 8          # linear: ~4 (a quadratic walk gave ~16)
