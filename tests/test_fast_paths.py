"""The counter never changes which code runs (docs/counting.md, "Fast paths").

Every model runs three times on the same inputs: alone, under a plain TorchDispatchMode of this
file's own (the op stream of the uncounted run: a dispatch mode is not what torch's fast paths
check for), and under OpCounter. Outputs must be bit-identical and the ops the counter recorded
must be the plain run's ops, in order. The one documented difference: a call of
F.scaled_dot_product_attention is one record, ``aten.scaled_dot_product_attention``, where the
plain run sees the ops of the backend torch picked (``_scaled_dot_product_flash_attention_for_cpu``,
or the math backend's ops): a third run marks where each attention call begins and ends, with a
torch-function mode that must leave the op stream as it was (checked). The module calls are
tests/attention_calls.py's; the packed encoder (a padding mask) is tested in test_packed_encoder.py.
"""

from collections import Counter

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import zoo
from attention_calls import B, E, FAST_OPS, H, L, MODELS, count_kind, make_masks, mha, real_model, record_fields
from conftest import count
from dispatchprof import OpCounter, fake_model, fake_mode
from dispatchprof.count.fastpath import mha_forward_body
from op_formulas import state_of

SDPA = "aten.scaled_dot_product_attention"


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
        if func is torch.nn.functional.multi_head_attention_forward:   # its body, with this mode on
            with self:
                return mha_forward_body()(*args, **(kwargs or {}))
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
@pytest.mark.parametrize("name", MODELS)
def test_torch_fast_paths_run_and_count_as_uncounted(name):
    model, run = real_model(name)
    with torch.no_grad():
        c = check_invisible(run, attention_calls=name not in FAST_OPS)   # marking a slow path changes nothing
    ops = [r.op for r in c.profile.records]
    assert FAST_OPS[name] in ops if name in FAST_OPS else not set(FAST_OPS.values()) & set(ops)


#: Models counted record by record on real, fake and meta tensors.
KINDS_MODELS = ["mha-padding", "mha-weights", "mha-keywords", "mha-plain", "mha-both-masks",
                "mha-seq-first", "layer-mask", "encoder-gelu-mask", "encoder-padding-no-nested", "layer-seq-first",
                "encoder-nested"]


@pytest.mark.parametrize("name", KINDS_MODELS)
def test_real_fake_meta_count_record_by_record(name):
    real, fake, meta = (count_kind(name, k) for k in ("cpu", "fake", "meta"))
    records = [[record_fields(r) for r in c.profile.records] for c in (real, fake, meta)]
    ops = [r[0] for r in records[0]]
    if name in FAST_OPS:
        assert FAST_OPS[name] in ops                                 # the fast path, on all three
    else:      # torch's slow path: on meta, attention runs the CPU's fused kernel (count/meta_attention.py)
        assert not set(FAST_OPS.values()) & set(ops) and SDPA in ops
    assert records[0] == records[1] == records[2]
    if name in FAST_OPS:                                                # and the same views
        assert real.profile.zero_cost_calls == meta.profile.zero_cost_calls   # (fake adds prim.device)


@pytest.mark.parametrize("batch_first,grad", [(False, False), (True, False), (False, True), (True, True)])
def test_meta_attention_has_the_cpu_layouts(batch_first, grad):
    """On meta tensors F.scaled_dot_product_attention's output has the strides of the CPU's call
    (torch's meta call, the math backend, makes it contiguous) and its input gradients those of
    the CPU's backward, so nn.MultiheadAttention's slow path (training mode) runs the real run's
    ops after it, forward and backward: no copy the CPU does not make."""
    streams, strides = {}, {}
    for kind in ("cpu", "meta"):
        torch.manual_seed(0)
        model = nn.MultiheadAttention(E, H, batch_first=batch_first).to(kind).train()
        x = torch.randn(B, L, E, device=kind, requires_grad=grad)

        def run():
            y = model(x, x, x, need_weights=False)[0]
            if grad:
                y.sum().backward()
        with torch.set_grad_enabled(grad):
            c = count(run)
            q = torch.randn(L, B * H, E // H, device=kind).transpose(0, 1).view(B, H, L, E // H)
            with OpCounter():
                strides[kind] = torch.nn.functional.scaled_dot_product_attention(q, q, q).stride()
        streams[kind] = [(r.op, r.phase, r.cost, r.shapes) for r in c.profile.records]
    ops = [op for op, _, _, _ in streams["cpu"]]
    assert streams["cpu"] == streams["meta"] and SDPA in ops and (SDPA + "_backward" in ops) == grad
    contiguous = (H * L * (E // H), L * (E // H), E // H, 1)
    assert strides["cpu"] == strides["meta"] != contiguous      # torch's meta call: contiguous


def test_meta_leaves_torch_as_it_was():
    from torch.utils import backend_registration
    before = backend_registration._privateuse1_backend_name
    count_kind("encoder-gelu-mask", "meta")
    model = mha().to("meta").eval()
    x = torch.randn(B, L, E, device="meta")

    def stop(module, args):
        assert backend_registration._privateuse1_backend_name == "meta"     # inside the call
        raise RuntimeError("stopped")
    model.register_forward_pre_hook(stop)        # runs after the counter's, before forward
    with torch.no_grad(), pytest.raises(RuntimeError, match="stopped"):
        count(lambda: model(x, x, x))
    assert backend_registration._privateuse1_backend_name == before
    with torch.no_grad():                                   # without the counter: torch's slow path
        stream = OpStream()
        y = torch.randn(B, L, E, device="meta")
        with stream:
            mha().to("meta").eval()(y, y, y)         # (no hook here)
    assert FAST_OPS["mha-plain"] not in stream.ops


def _variant(**kw):
    return lambda: nn.MultiheadAttention(E, kw.pop("heads", H), batch_first=kw.pop("batch_first", True), **kw)


#: name -> (build, call(model, x, masks)): each takes or misses the fast path for one reason
MHA_CALLS = {
    "positional": (_variant(), lambda m, x, k: m(x, x, x, k.pad, False)),
    "keywords": (_variant(), lambda m, x, k: m(query=x, key=x, value=x, attn_mask=k.causal)),
    "float-mask": (_variant(), lambda m, x, k: m(x, x, x, attn_mask=torch.zeros(L, L))),
    "float-padding": (_variant(), lambda m, x, k: m(x, x, x, key_padding_mask=torch.zeros(B, L))),
    "unbatched": (_variant(), lambda m, x, k: m(x[0], x[0], x[0])),
    "cross": (_variant(), lambda m, x, k: m(x, x.clone(), x.clone())),
    "seq-first": (_variant(batch_first=False), lambda m, x, k: m(x, x, x)),
    "odd-heads": (_variant(heads=1), lambda m, x, k: m(x, x, x)),
    "no-bias": (_variant(bias=False), lambda m, x, k: m(x, x, x)),
    "bias-kv": (_variant(add_bias_kv=True), lambda m, x, k: m(x, x, x)),
    "zero-attn": (_variant(add_zero_attn=True), lambda m, x, k: m(x, x, x)),
    "kdim": (_variant(kdim=8, vdim=8), lambda m, x, k: m(x, x[..., :8], x[..., :8])),
    "training": (_variant(), lambda m, x, k: m.train()(x, x, x)),
    "grad": (_variant(), lambda m, x, k: m(x.requires_grad_(), x, x)),
}


@pytest.mark.parametrize("name", MHA_CALLS)
def test_mha_fast_path_conditions_are_torchs(name):
    from dispatchprof.count.fastpath_checks import mha_takes_fast_path
    build, call = MHA_CALLS[name]
    model, x, masks = build().eval(), torch.randn(B, L, E), make_masks("cpu")
    seen = {}

    def spy(module, args, kwargs):
        seen["predicted"] = mha_takes_fast_path(module, args, kwargs)
    model.register_forward_pre_hook(spy, with_kwargs=True)
    stream = OpStream()
    with torch.set_grad_enabled(name == "grad"), stream:
        call(model, x, masks)
    assert seen["predicted"] == ("aten._native_multi_head_attention" in stream.ops)
    assert seen["predicted"] == (name in ("positional", "keywords"))


def test_keyword_arguments_come_from_the_module_call_only():
    from dispatchprof.count.fastpath_checks import call_kwargs
    seen = []
    model = mha().eval()
    model.register_forward_pre_hook(lambda module, args: seen.append(call_kwargs(1)))
    x = torch.randn(B, L, E)
    model(x, x, x, need_weights=False)
    assert seen == [{"need_weights": False}]
    assert call_kwargs(0) is None                  # not called by nn.Module: nothing is read


def test_native_mha_counts_by_hand():
    model, run = real_model("mha-padding")
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
    k = make_masks("cpu" if kind == "fake" else kind)

    def step():
        out = model(x, x, x, key_padding_mask=k.pad, need_weights=False)[0]
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
    model, run = real_model("mha-padding")
    with torch.no_grad(), _UserMode():
        c = check_invisible(run, attention_calls=False)
    assert FAST_OPS["mha-padding"] not in [r.op for r in c.profile.records]


def test_a_forward_that_raises_puts_the_attention_mode_back():
    from dispatchprof import OpCounter
    model, _ = real_model("mha-padding")
    q, wrong = torch.randn(1, 2, 4, 8), torch.randn(B, L, E + 1)
    with torch.no_grad(), pytest.raises(RuntimeError, match="embed_dim 16") as alone:   # the fast path's error
        model(wrong, wrong, wrong)
    with torch.no_grad(), OpCounter() as c:
        with pytest.raises(RuntimeError) as counted:
            model(wrong, wrong, wrong)
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert str(counted.value) == str(alone.value)
    assert [r.op for r in c.profile.records] == [SDPA]     # seen by the mode, put back


def test_the_fast_path_still_runs_after_a_slow_path_call_in_the_same_count():
    from dispatchprof import OpCounter
    model, run = real_model("mha-padding")
    with OpCounter() as c:
        model.train()
        run()                                  # slow path: F.multi_head_attention_forward's own code
        model.eval()
        with torch.no_grad():
            run()                              # the fast path, as without the counter
    ops = [r.op for r in c.profile.records]
    assert ops.count(SDPA) == 1 and ops.count(FAST_OPS["mha-padding"]) == 1


# --- what other libraries check before picking a path ----------------------------------------
def _library_checks(x):
    """The predicates transformers 5.23, diffusers and timm read to pick a path (docs/counting.md,
    "What libraries check"), evaluated on the tensor a model sees."""
    from transformers.utils import import_utils
    return {
        "torch.compiler.is_compiling": torch.compiler.is_compiling(),
        "torch.jit.is_tracing": torch.jit.is_tracing(),
        "torch.jit.is_scripting": torch.jit.is_scripting(),
        "torch.fx is_fx_tracing": torch.fx._symbolic_trace.is_fx_tracing(),
        "transformers is_tracing(x)": import_utils.is_tracing(x),
        "transformers is_torch_fx_proxy(x)": import_utils.is_torch_fx_proxy(x),
        "transformers is_fake_tensor(x)": import_utils.is_fake_tensor(x),
        "x.device.type": x.device.type,
        "type(x)": type(x),
    }


class _Probe(nn.Module):
    def forward(self, x):
        self.seen = _library_checks(x)
        return x + 1


@pytest.mark.parametrize("kind", ["cpu", "meta", "fake"])
def test_library_path_checks_read_the_same_under_the_counter(kind):
    from torch._subclasses import FakeTensorMode
    probe = _Probe()
    if kind == "fake":
        with FakeTensorMode():
            x = torch.randn(2, 3)
    else:
        x = torch.randn(2, 3, device=kind)
    probe(x)
    alone = probe.seen
    count(lambda: probe(x))
    assert probe.seen == alone
    assert alone["transformers is_tracing(x)"] == (kind == "fake")   # fake tensors: the user's choice
