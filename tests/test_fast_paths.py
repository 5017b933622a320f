"""The counter never changes which code runs (docs/counting.md, "Fast paths").

Every model runs three times on the same inputs: alone, under a plain TorchDispatchMode of this
file's own (the op stream of the uncounted run: a dispatch mode is not what torch's fast paths
check for), and under OpCounter. Outputs must be bit-identical and the ops the counter recorded
must be the plain run's ops, in order. The one documented difference: a call of
F.scaled_dot_product_attention is one record, ``aten.scaled_dot_product_attention``, where the
plain run sees the ops of the backend torch picked (``_scaled_dot_product_flash_attention_for_cpu``,
or the math backend's ops): a third run marks where each attention call begins and ends, with a
torch-function mode that must leave the op stream as it was (checked).
"""

import dataclasses
from collections import Counter

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from conftest import count
from dispatchprof import fake_model, fake_mode
from op_formulas import state_of

SDPA = "aten.scaled_dot_product_attention"
E, H, F_, B, L = 16, 4, 32, 2, 5


class OpStream(TorchDispatchMode):
    """Names every aten op it sees, changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


class AttentionSpans(TorchFunctionMode):
    """Writes a marker into ``stream.ops`` before and after each F.scaled_dot_product_attention."""

    def __init__(self, stream: OpStream) -> None:
        super().__init__()
        self.stream = stream

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **(kwargs or {}))
        self.stream.ops.append("<")
        out = func(*args, **(kwargs or {}))
        self.stream.ops.append(">")
        return out


def _collapse(ops: list[str]) -> list[str]:
    """Each marked attention call's ops as one ``aten.scaled_dot_product_attention``."""
    out, depth = [], 0
    for op in ops:
        if op == "<":
            depth += 1
            if depth == 1:
                out.append(SDPA)
        elif op == ">":
            depth -= 1
        elif depth == 0:
            out.append(op)
    return out


def _split(ops: list[str]) -> tuple[list[str], Counter]:
    """(ops with a formula or attention calls, in order; zero-cost ops with their calls)."""
    zero = {op for op in set(ops) - {SDPA, SDPA + "_backward"}
            if state_of(getattr(getattr(torch.ops, op.split(".")[0]), op.split(".", 1)[1])) == "zero-cost"}
    return [op for op in ops if op not in zero], Counter(op for op in ops if op in zero)


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if isinstance(out, dict) or hasattr(out, "to_tuple"):
        return [t for o in (out.values() if isinstance(out, dict) else out.to_tuple()) for t in _flat(o)]
    return []


def check_invisible(run, attention_calls: bool = True):
    """``run()`` alone, under OpStream and under OpCounter: bit-identical outputs, same ops.
    ``attention_calls``: mark F.scaled_dot_product_attention calls in a third run (False where a
    torch-function mode would change the path, as in nn.MultiheadAttention). Returns the counter."""
    outputs = []
    torch.manual_seed(0)
    alone = _flat(run())
    stream = OpStream()
    torch.manual_seed(0)
    with stream:
        plain = _flat(run())
    torch.manual_seed(0)
    c = count(lambda: outputs.extend(_flat(run())))
    for a, p, k in zip(alone, plain, outputs, strict=True):
        assert torch.equal(a, p) and torch.equal(a, k), "outputs differ with the counter"
    ops = stream.ops
    if attention_calls:
        marked = OpStream()
        torch.manual_seed(0)
        with marked, AttentionSpans(marked):
            run()
        assert [op for op in marked.ops if op not in "<>"] == ops       # the markers changed nothing
        ops = _collapse(marked.ops)
    ops, zero = _split(ops)
    assert [r.op for r in c.profile.records] == ops
    assert Counter(dict(c.profile.zero_cost_calls)) == zero
    assert not c.unknown_ops()
    return c


# --- torch's own fast paths ------------------------------------------------------------------
def _mha():
    return nn.MultiheadAttention(E, H, batch_first=True)


def _padding(x):
    kpm = torch.zeros(B, L, dtype=torch.bool, device=x.device)
    kpm[1, 3:] = True                          # the second sequence has 3 tokens
    return kpm


def _causal(x):
    return torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)


def _layer(**kw):
    return nn.TransformerEncoderLayer(E, H, F_, batch_first=True, **kw)


#: name -> (build, call(model, x)); all self-attention, batch first, eval, no grad
MODELS = {
    "mha-padding": (_mha, lambda m, x: m(x, x, x, key_padding_mask=_padding(x), need_weights=False)[0]),
    "mha-weights": (_mha, lambda m, x: m(x, x, x, attn_mask=_causal(x))),
    "mha-keywords": (_mha, lambda m, x: m(query=x, key=x, value=x, need_weights=False)[0]),
    "layer-mask": (_layer, lambda m, x: m(x, src_mask=_causal(x))),
    "encoder-gelu-mask": (lambda: nn.TransformerEncoder(_layer(activation="gelu"), 2, enable_nested_tensor=False),
                          lambda m, x: m(x, mask=_causal(x), is_causal=False)),  # no value check
    "encoder-nested": (lambda: nn.TransformerEncoder(_layer(), 2),
                       lambda m, x: m(x, src_key_padding_mask=_padding(x))),
}
FAST_OPS = {"mha-padding": "aten._native_multi_head_attention", "mha-keywords": "aten._native_multi_head_attention",
            "mha-weights": "aten._native_multi_head_attention",
            "layer-mask": "aten._transformer_encoder_layer_fwd",
            "encoder-gelu-mask": "aten._transformer_encoder_layer_fwd",
            "encoder-nested": "aten._transformer_encoder_layer_fwd"}


def _real(name):
    build, call = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    x = torch.randn(B, L, E)
    return model, lambda: call(model, x)


@pytest.mark.parametrize("name", MODELS)
def test_torch_fast_paths_run_and_count_as_uncounted(name):
    model, run = _real(name)
    with torch.no_grad():
        c = check_invisible(run, attention_calls=False)
    assert FAST_OPS[name] in [r.op for r in c.profile.records]     # the fast path ran, counted


def _kind(name, kind):
    """Total counts of one forward of ``name`` on tensor kind ``kind`` (same weights' shapes)."""
    build, call = MODELS[name]
    torch.manual_seed(0)
    if kind == "fake":
        model = fake_model(build)
        with fake_mode(model):
            x = torch.randn(B, L, E)
    else:
        model = build().to(kind)
        x = torch.randn(B, L, E, device=kind)
    model.eval()

    def run():
        if kind != "fake":
            return call(model, x)
        with fake_mode(model):
            return call(model, x)
    with torch.no_grad():
        return count(run)


@pytest.mark.parametrize("name", ["mha-padding", "mha-weights", "mha-keywords", "layer-mask", "encoder-gelu-mask"])
def test_real_fake_meta_count_the_same_arithmetic(name):
    real, fake, meta = (_kind(name, k) for k in ("cpu", "fake", "meta"))
    ops = [[r.op for r in c.profile.records] for c in (real, fake, meta)]
    assert FAST_OPS[name] in ops[0] and ops[0] == ops[1]            # real and fake: the fast path
    assert FAST_OPS[name] not in ops[2]                              # meta: torch's slow path
    totals = [c.total() for c in (real, fake, meta)]
    assert totals[0] == totals[1]
    arithmetic = [dataclasses.replace(t, bytes_read=0, bytes_written=0, calls=0) for t in totals]
    assert arithmetic[0] == arithmetic[2]


def test_native_mha_counts_by_hand():
    model, run = _real("mha-padding")
    with torch.no_grad():
        c = count(run)
    r = [r for r in c.profile.records if r.op == FAST_OPS["mha-padding"]][0]
    # n = B*L = 10 rows, E = 16, H = 4 heads of d = 4, S = 25 scores per head, masked
    # in_proj: 10*48*16 = 7680 MULT, 7680 ADD (bias included); out_proj: 10*16*16 = 2560 each
    # attention per head: MULT 25*4 + 25 + 4*25 = 225; ADD 25*3 + 25 (mask) + (50 - 5) + 4*20 = 225
    assert (r.cost.mult, r.cost.add) == (7680 + 8 * 225 + 2560, 7680 + 8 * 225 + 2560)
    assert r.cost.macs == 7680 + 8 * 25 * 8 + 2560
    # softmax per head: 20 CMP, 25 EXP, 25 DIV
    assert (r.cost.cmp, r.cost.exp, r.cost.div) == (8 * 20, 8 * 25, 8 * 25)
    # bytes, float32: x 640 + W_in (768 + 48)*4 + q, k, v 1920 + mask [2, 5] 40 + attention out 640
    # + W_out (256 + 16)*4; written: q, k, v 1920 + attention out 640 + output 640
    assert r.cost.bytes_read == 640 + 3264 + 1920 + 40 + 640 + 1088
    assert r.cost.bytes_written == 1920 + 640 + 640


# --- the zoo ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", zoo.ALL_NAMES)
def test_zoo_runs_and_counts_as_uncounted(name):
    model, inputs, _ = zoo.build(name, "real")
    model.eval()
    with torch.no_grad():
        check_invisible(lambda: model(**inputs))


# --- the slow path: training, gradients ------------------------------------------------------
def _mha_step(kind):
    torch.manual_seed(0)
    if kind == "fake":
        model = fake_model(lambda: nn.MultiheadAttention(E, H, batch_first=True, dropout=0.0))
        with fake_mode(model):
            x = torch.randn(B, L, E, requires_grad=True)
    else:
        model = nn.MultiheadAttention(E, H, batch_first=True, dropout=0.0).to(kind)
        x = torch.randn(B, L, E, device=kind, requires_grad=True)
    model.train()

    def step():
        out = model(x, x, x, key_padding_mask=_padding(x), need_weights=False)[0]
        out.square().sum().backward()
        return [out, x.grad, *[p.grad for p in model.parameters()]]
    return step


def test_mha_training_counts_attention_once_forward_and_backward():
    step = _mha_step("cpu")
    alone = step()
    stream = OpStream()
    with stream:
        _mha_step("cpu")()
    outputs = []
    c = count(lambda: outputs.extend(_mha_step("cpu")()))
    assert all(torch.equal(a, k) for a, k in zip(alone, outputs, strict=True))
    # the slow path: the CPU flash kernel forward and backward, each one attention record
    names = {"aten._scaled_dot_product_flash_attention_for_cpu": SDPA,
             "aten._scaled_dot_product_flash_attention_for_cpu_backward": SDPA + "_backward"}
    ops, _ = _split([names.get(op, op) for op in stream.ops])
    assert [r.op for r in c.profile.records] == ops and ops.count(SDPA + "_backward") == 1
    kinds = [c] + [count(_mha_step(k)) for k in ("fake", "meta")]
    attention = [[(r.op, r.cost) for r in k.profile.records if "attention" in r.op] for k in kinds]
    assert attention[0] == attention[1] == attention[2] and len(attention[0]) == 2


class _UserMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_a_mode_of_your_own_still_disables_the_fast_path_as_without_the_counter():
    model, run = _real("mha-padding")
    with torch.no_grad(), _UserMode():
        c = check_invisible(run, attention_calls=False)
    assert FAST_OPS["mha-padding"] not in [r.op for r in c.profile.records]


def test_a_forward_that_raises_puts_the_attention_mode_back():
    from dispatchprof import OpCounter
    model, _ = _real("mha-padding")
    q, wrong = torch.randn(1, 2, 4, 8), torch.randn(B, L, E + 1)
    with torch.no_grad(), pytest.raises(RuntimeError, match="embed_dim 16") as alone:   # the fast path's error
        model(wrong, wrong, wrong)
    with torch.no_grad(), OpCounter() as c:
        with pytest.raises(RuntimeError) as counted:
            model(wrong, wrong, wrong)
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert str(counted.value) == str(alone.value)
    assert [r.op for r in c.profile.records] == [SDPA]     # seen by the mode, put back


def test_nested_encoder_counts_each_sequence_with_its_own_length():
    model, run = _real("encoder-nested")          # sequences of 5 and 3 tokens (E = 16)
    with torch.no_grad():
        c = count(run)
    layers = [r for r in c.profile.records if r.op == FAST_OPS["encoder-nested"]]
    assert len(layers) == 2
    # independent: the slow path, op by op, on meta, one sequence at a time (no padding, no mask)
    layer = model.layers[0].to("meta")
    with torch.no_grad():
        alone = [count(layer, torch.randn(1, n, E, device="meta")).total() for n in (5, 3)]
    for field in ("add", "mult", "div", "sqrt", "exp", "cmp", "other", "macs"):
        assert getattr(layers[0].cost, field) == getattr(alone[0], field) + getattr(alone[1], field)
    gather = [r for r in c.profile.records if r.op == "aten._nested_tensor_from_mask"][0].cost
    assert (gather.bytes_read, gather.bytes_written) == (10 + 8 * 16 * 4, 8 * 16 * 4)   # bool mask [2,5]
    pad = [r for r in c.profile.records if r.op == "aten.to_padded_tensor"][0].cost
    assert (pad.bytes_read, pad.bytes_written) == (8 * 16 * 4, 2 * 5 * 16 * 4)
    check = [r for r in c.profile.records if r.op == "aten._nested_tensor_from_mask_left_aligned"][0].cost
    assert check.cmp == 10


def test_the_fast_path_still_runs_after_a_slow_path_call_in_the_same_count():
    from dispatchprof import OpCounter
    model, run = _real("mha-padding")
    with OpCounter() as c:
        model.train()
        run()                                  # slow path: F.multi_head_attention_forward's own code
        model.eval()
        with torch.no_grad():
            run()                              # the fast path, as without the counter
    ops = [r.op for r in c.profile.records]
    assert ops.count(SDPA) == 1 and ops.count(FAST_OPS["mha-padding"]) == 1
