"""The cases of the formula property harness (scripts/formula_harness.py): per op, how to draw
its inputs (hypothesis) and call it, and which properties hold (batch scaling, the generic traffic
rule, a backward phase, the tensor kinds it runs on)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from hypothesis import strategies as st


aten = torch.ops.aten

KINDS = ("real", "meta", "fake")


@dataclass(frozen=True)
class Case:
    """One op family member: ``make(draw, batch)`` returns (fn, tensors); fn(*tensors) runs it."""

    op: str                      # the record to check, e.g. "aten.add"
    make: Callable[[Any, int], tuple[Callable, list[torch.Tensor]]]
    scales: bool = True          # counts double when the batch dimension doubles
    generic_bytes: bool = True   # bytes follow the generic rule (inputs read, outputs written)
    backward: bool = False       # the op is found in the backward pass of fn
    kinds: tuple[str, ...] = KINDS
    direct: bool = False         # the drawn tensors are exactly the op's inputs (bytes are checked)


def _dims(draw: Any) -> list[int]:
    return draw(st.lists(st.integers(1, 5), min_size=1, max_size=2))


def unary(name: str, fn: Callable | None = None, **kw: Any) -> Case:
    def make(draw, batch):
        shape = [batch] + _dims(draw)
        return (fn or getattr(torch, name)), [torch.randn(shape)]
    return Case(f"aten.{name}", make, direct=fn is None, **kw)


def inplace(name: str) -> Case:
    def make(draw, batch):
        shape = [batch] + _dims(draw)
        return (lambda x: getattr(x.clone(), name)()), [torch.randn(shape)]
    return Case(f"aten.{name}", make)


def binary(name: str, dtype: torch.dtype = torch.float32, **kw: Any) -> Case:
    def make(draw, batch):
        dims = _dims(draw)
        other = draw(st.sampled_from(["same", "row", "one"]))
        b_shape = {"same": [batch] + dims, "row": dims, "one": [1] + dims}[other]
        a, b = torch.randn([batch] + dims), torch.randn(b_shape)
        if dtype == torch.bool:
            a, b = a > 0, b > 0
        return getattr(torch, name), [a, b]
    return Case(f"aten.{name}", make, direct=True, **kw)


def with_scalar(op: str, call: Callable) -> Case:
    def make(draw, batch):
        scalar = draw(st.sampled_from([2, 0.5, 3, -1, 1.7, -0.5]))
        return (lambda x: call(x, scalar)), [torch.randn([batch] + _dims(draw))]
    return Case(op, make)


def reduction(op: str, call: Callable, scales: bool = True) -> Case:
    def make(draw, batch):
        return call, [torch.randn([batch] + _dims(draw))]
    return Case(op, make, scales=scales)


def matmul(op: str, shapes: Callable, call: Callable, batch_first: bool = True) -> Case:
    def make(draw, batch):
        m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
        return call, [torch.randn(s) for s in shapes(batch, m, k, n)]
    return Case(op, make, direct=True)


def backward_of(op: str, forward: Callable, shape_extra: int = 0) -> Case:
    def make(draw, batch):
        x = torch.randn([batch] + _dims(draw)).requires_grad_()

        def run(t):
            forward(t).sum().backward()
        return run, [x]
    return Case(op, make, backward=True, generic_bytes=False)


def _conv_make(draw, batch):
    groups = draw(st.sampled_from([1, 2]))
    cin, cout = 2 * draw(st.integers(1, 2)), 2 * draw(st.integers(1, 2))
    k, stride = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    x, w = torch.randn(batch, cin, 6, 6), torch.randn(cout, cin // groups, k, k)
    if draw(st.booleans()):
        return (lambda x, w, b: F.conv2d(x, w, b, stride=stride, groups=groups)), [x, w, torch.randn(cout)]
    return (lambda x, w: F.conv2d(x, w, stride=stride, groups=groups)), [x, w]


def _norm_make(draw, batch):
    n = draw(st.integers(1, 6))
    if draw(st.booleans()):
        return (lambda x, w, b: F.layer_norm(x, (n,), w, b)), [torch.randn(batch, 3, n), torch.randn(n), torch.randn(n)]
    return (lambda x: F.layer_norm(x, (n,))), [torch.randn(batch, 3, n)]


def _batch_norm_make(draw, batch):
    c = draw(st.integers(1, 4))
    training = draw(st.booleans())
    return (lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=training)), \
        [torch.randn(batch, c, 3), torch.zeros(c), torch.ones(c), torch.ones(c), torch.zeros(c)]


def _sdpa_make(draw, batch):
    h, lq, lk, e = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 8))
    causal = draw(st.booleans()) and lq <= lk
    q, k, v = torch.randn(batch, h, lq, e), torch.randn(batch, h, lk, e), torch.randn(batch, h, lk, e)
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), [q, k, v]


def _pool_make(kind: str):
    def make(draw, batch):
        x = torch.randn(batch, 2, 6, 6)
        k = draw(st.integers(2, 3))
        call = {"max": lambda x: F.max_pool2d(x, k), "avg": lambda x: F.avg_pool2d(x, k),
                "adaptive": lambda x: F.adaptive_avg_pool2d(x, k)}[kind]
        return call, [x]
    return make


def _binary_inplace(name: str) -> Case:
    def make(draw, batch):
        dims = _dims(draw)
        return (lambda a, b: getattr(a.clone(), name)(b)), [torch.randn([batch] + dims), torch.randn(dims)]
    return Case(f"aten.{name}", make)


def _index_make(kind: str):
    def make(draw, batch):
        n, k = draw(st.integers(1, 6)), draw(st.integers(1, 4))
        x = torch.randn(batch, n)
        idx = torch.randint(0, n, (batch, k))
        if kind == "gather":
            return (lambda x, i: x.gather(1, i)), [x, idx]
        if kind == "index_select":
            return (lambda x, i: x.index_select(1, i)), [x, idx[0]]
        src = torch.randn(batch, k)
        if kind == "scatter_add":
            return (lambda x, i, s: x.scatter_add(1, i, s)), [x, idx, src]
        return (lambda x, i, s: x.index_add(1, i, s)), [x, idx[0], src]
    return make


def _embedding_make(draw, batch):
    vocab, dim = draw(st.integers(2, 20)), draw(st.integers(1, 8))
    return (lambda w, i: F.embedding(i, w)), [torch.randn(vocab, dim), torch.randint(0, vocab, (batch, 3))]


def _nll_make(draw, batch):
    classes = draw(st.integers(2, 6))
    return (lambda x, t: F.nll_loss(x, t)), [torch.randn(batch, classes).log_softmax(-1), torch.randint(0, classes, (batch,))]


def _mse_make(draw, batch):
    dims = _dims(draw)
    return F.mse_loss, [torch.randn([batch] + dims), torch.randn([batch] + dims)]


def _dropout_make(draw, batch):
    p = draw(st.sampled_from([0.1, 0.5]))
    return (lambda x: F.dropout(x, p, training=True)), [torch.randn([batch] + _dims(draw))]


def _group_norm_make(draw, batch):
    groups = draw(st.sampled_from([1, 2]))
    return (lambda x: F.group_norm(x, groups)), [torch.randn(batch, 4, 3)]


def direct(op: str, call: Callable, *, inputs: Callable | None = None, scales: bool = True) -> Case:
    """A case that calls an aten op directly: ``call(batch, n, *tensors)`` with tensors from
    ``inputs(batch, n)`` (default one [batch, n] float tensor)."""
    def make(draw, batch):
        n = draw(st.integers(2, 6))
        tensors = inputs(batch, n) if inputs else [torch.randn(batch, n)]
        return (lambda *ts: call(batch, n, *ts)), tensors
    return Case(op, make, scales=scales)


def _pair(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(batch, n), torch.randn(batch, n)]


def _mats(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(n, n), torch.randn(batch, n, n), torch.randn(batch, n, n)]


def _vecs(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(batch * n), torch.randn(batch * n)]


def _image(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(batch, 2, n, n)]


def _volume(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(batch, 2, n, n, n)]


def _seq(batch: int, n: int) -> list[torch.Tensor]:
    return [torch.randn(batch, 2, n)]


def direct_cases() -> list[Case]:
    """Ops called through torch.ops.aten with plain arguments."""
    a = torch.ops.aten
    def on(t: torch.Tensor) -> dict:
        return {"device": t.device, "dtype": t.dtype}

    return [
        direct("aten.acos", lambda b, n, x: a.acos(x)), direct("aten.asin", lambda b, n, x: a.asin(x)),
        direct("aten.clamp_min", lambda b, n, x: a.clamp_min(x, 0.1)),
        direct("aten.clamp_max", lambda b, n, x: a.clamp_max(x, 0.1)),
        direct("aten.clamp_min_", lambda b, n, x: a.clamp_min_(x.clone(), 0.1)),
        direct("aten.clamp_max_", lambda b, n, x: a.clamp_max_(x.clone(), 0.1)),
        direct("aten.triu", lambda b, n, x: a.triu(x)), direct("aten.triu_", lambda b, n, x: a.triu_(x.clone())),
        direct("aten.cummin", lambda b, n, x: a.cummin(x, -1)), direct("aten.aminmax", lambda b, n, x: a.aminmax(x, dim=-1)),
        direct("aten.nansum", lambda b, n, x: a.nansum(x, [-1])), direct("aten.std_mean", lambda b, n, x: a.std_mean(x, [-1])),
        direct("aten.min", lambda b, n, x: a.min(x, -1)), direct("aten.norm", lambda b, n, x: a.norm(x, 2, [-1])),
        direct("aten._safe_softmax", lambda b, n, x: a._safe_softmax(x, -1)),
        direct("aten.dot", lambda b, n, x, y: a.dot(x, y), inputs=_vecs, scales=False),
        direct("aten.vdot", lambda b, n, x, y: a.vdot(x, y), inputs=_vecs, scales=False),
        direct("aten.addbmm", lambda b, n, c, x, y: a.addbmm(c, x, y), inputs=_mats, scales=False),
        direct("aten.addbmm_", lambda b, n, c, x, y: a.addbmm_(c.clone(), x, y), inputs=_mats, scales=False),
        direct("aten._addmm_activation", lambda b, n, x, y: a._addmm_activation(x[:, 0], x, y.t()), inputs=_pair,
               scales=False),
        direct("aten._to_copy", lambda b, n, x: a._to_copy(x, dtype=torch.float64)),
        direct("aten.copy_", lambda b, n, x, y: a.copy_(x.clone(), y), inputs=_pair),
        direct("aten.copy", lambda b, n, x, y: a.copy(x, y), inputs=_pair),
        direct("aten.fill_", lambda b, n, x: a.fill_(x.clone(), 2.0)), direct("aten.zero_", lambda b, n, x: a.zero_(x.clone())),
        direct("aten.fill", lambda b, n, x: a.fill(x, 2.0)),
        direct("aten.zeros", lambda b, n, x: a.zeros([b, n], **on(x))), direct("aten.ones", lambda b, n, x: a.ones([b, n], **on(x))),
        direct("aten.full", lambda b, n, x: a.full([b, n], 3.0, **on(x))),
        direct("aten.empty", lambda b, n, x: a.empty([b, n], **on(x))),
        direct("aten.empty_like", lambda b, n, x: a.empty_like(x)), direct("aten.full_like", lambda b, n, x: a.full_like(x, 2.0)),
        direct("aten.empty_strided", lambda b, n, x: a.empty_strided([b, n], [n, 1], **on(x))),
        direct("aten.new_zeros", lambda b, n, x: a.new_zeros(x, [b, n])), direct("aten.new_ones", lambda b, n, x: a.new_ones(x, [b, n])),
        direct("aten.new_full", lambda b, n, x: a.new_full(x, [b, n], 2.0)), direct("aten.new_empty", lambda b, n, x: a.new_empty(x, [b, n])),
        direct("aten.new_empty_strided", lambda b, n, x: a.new_empty_strided(x, [b, n], [n, 1])),
        direct("aten.arange", lambda b, n, x: a.arange(b * n, **on(x))),
        direct("aten.linspace", lambda b, n, x: a.linspace(0.0, 1.0, b * n, **on(x))),
        direct("aten.eye", lambda b, n, x: a.eye(b * n, **on(x)), scales=False),
        direct("aten.scalar_tensor", lambda b, n, x: a.scalar_tensor(2.0, **on(x)), scales=False),
        direct("aten.rand", lambda b, n, x: a.rand([b, n], **on(x))), direct("aten.randn", lambda b, n, x: a.randn([b, n], **on(x))),
        direct("aten.randint", lambda b, n, x: a.randint(10, [b, n], device=x.device)),
        direct("aten.randint_like", lambda b, n, x: a.randint_like(x, 10)),
        direct("aten.randperm", lambda b, n, x: a.randperm(b * n, device=x.device)),
        direct("aten.bernoulli", lambda b, n, x: a.bernoulli(x.sigmoid())),
        direct("aten.normal_", lambda b, n, x: a.normal_(x.clone())), direct("aten.uniform_", lambda b, n, x: a.uniform_(x.clone())),
        direct("aten.exponential_", lambda b, n, x: a.exponential_(x.clone())),
        direct("aten.random_", lambda b, n, x: a.random_(x.clone())),
        direct("aten.reflection_pad1d", lambda b, n, x: a.reflection_pad1d(x, [1, 1]), inputs=_seq),
        direct("aten.replication_pad1d", lambda b, n, x: a.replication_pad1d(x, [1, 1]), inputs=_seq),
        direct("aten.reflection_pad2d", lambda b, n, x: a.reflection_pad2d(x, [1, 1, 1, 1]), inputs=_image),
        direct("aten.replication_pad2d", lambda b, n, x: a.replication_pad2d(x, [1, 1, 1, 1]), inputs=_image),
        direct("aten.upsample_nearest1d", lambda b, n, x: a.upsample_nearest1d(x, [2 * n]), inputs=_seq),
        direct("aten.upsample_nearest2d", lambda b, n, x: a.upsample_nearest2d(x, [2 * n, 2 * n]), inputs=_image),
        direct("aten.upsample_nearest3d", lambda b, n, x: a.upsample_nearest3d(x, [2 * n] * 3), inputs=_volume),
        direct("aten.avg_pool3d", lambda b, n, x: a.avg_pool3d(x, [2, 2, 2]), inputs=_volume),
        direct("aten.max_pool3d_with_indices", lambda b, n, x: a.max_pool3d_with_indices(x, [2, 2, 2]), inputs=_volume),
        direct("aten.adaptive_max_pool2d", lambda b, n, x: a.adaptive_max_pool2d(x, [2, 2]), inputs=_image),
        direct("aten._adaptive_avg_pool3d", lambda b, n, x: a._adaptive_avg_pool3d(x, [2, 2, 2]), inputs=_volume),
        direct("aten.scatter", lambda b, n, x: a.scatter(x, 1, torch.zeros(b, 1, dtype=torch.long, device=x.device), 1.0)),
        direct("aten.index_fill", lambda b, n, x: a.index_fill(x, 1, torch.zeros(1, dtype=torch.long, device=x.device), 1.0)),
        direct("aten.triu", lambda b, n, x: a.triu(x, 1)),
        direct("aten.select_scatter", lambda b, n, x: a.select_scatter(x, x[:, 0], 1, 0)),
        direct("aten.slice_scatter", lambda b, n, x: a.slice_scatter(x, x[:, :1], 1, 0, 1)),
        direct("aten.t_copy", lambda b, n, x: a.t_copy(x)), direct("aten.view_copy", lambda b, n, x: a.view_copy(x, [b * n])),
        direct("aten.permute_copy", lambda b, n, x: a.permute_copy(x, [1, 0])),
        direct("aten.transpose_copy", lambda b, n, x: a.transpose_copy(x, 0, 1)),
        direct("aten.unsqueeze_copy", lambda b, n, x: a.unsqueeze_copy(x, 0)),
        direct("aten.detach_copy", lambda b, n, x: a.detach_copy(x)), direct("aten.alias_copy", lambda b, n, x: a.alias_copy(x)),
        direct("aten.expand_copy", lambda b, n, x: a.expand_copy(x[:, :1], [b, n])),
        direct("aten.lift_fresh_copy", lambda b, n, x: a.lift_fresh_copy(x)),
    ]


UNARY = ["neg", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "sigmoid", "tanh", "erf", "log", "log2",
         "log10", "log1p", "sin", "cos", "tan", "atan", "sinh", "cosh", "floor", "ceil", "round", "trunc",
         "frac", "relu", "abs", "sign", "isnan", "isinf", "erfinv"]
INPLACE = ["neg_", "exp_", "sqrt_", "rsqrt_", "sigmoid_", "tanh_", "relu_", "abs_", "sin_", "cos_", "log_", "erf_"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "eq", "ne", "lt", "le",
          "gt", "ge", "floor_divide", "remainder", "fmod", "pow", "rsub"]
LOGICAL = ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]


def cases() -> list[Case]:
    out = [unary(n) for n in UNARY] + [inplace(n) for n in INPLACE]
    out += [unary("silu", F.silu), unary("gelu", F.gelu), unary("hardtanh", F.hardtanh),
            unary("leaky_relu", F.leaky_relu), unary("elu", F.elu), unary("softplus", F.softplus),
            unary("logical_not", torch.logical_not), unary("bitwise_not", lambda x: torch.bitwise_not(x > 0)),
            unary("gelu", lambda x: F.gelu(x, approximate="tanh"))]
    out += [binary(n) for n in BINARY] + [binary(n, torch.bool) for n in LOGICAL]
    out += [with_scalar("aten.pow", torch.pow), with_scalar("aten.add", lambda x, s: torch.add(x, s, alpha=s)),
            with_scalar("aten.mul", torch.mul), with_scalar("aten.clamp", lambda x, s: torch.clamp(x, min=-abs(s))),
            with_scalar("aten.clamp", lambda x, s: torch.clamp(x, -abs(s), abs(s))),
            with_scalar("aten.div", lambda x, s: torch.div(x, s, rounding_mode="floor")),
            with_scalar("aten.lerp", lambda x, s: torch.lerp(x, x * 2, s)),
            with_scalar("aten.masked_fill", lambda x, s: x.masked_fill(x > 0, s)),
            with_scalar("aten.where", lambda x, s: torch.where(x > 0, x, s)),
            with_scalar("aten.addcmul", lambda x, s: torch.addcmul(x, x, x, value=s)),
            with_scalar("aten.addcdiv", lambda x, s: torch.addcdiv(x, x, x, value=s)),
            with_scalar("aten.threshold", lambda x, s: F.threshold(x, s, 0.0))]
    out += [reduction("aten.sum", lambda x: x.sum(-1)), reduction("aten.sum", lambda x: x.sum(), scales=False),
            reduction("aten.mean", lambda x: x.mean(-1)), reduction("aten.prod", lambda x: x.prod(-1)),
            reduction("aten.amax", lambda x: x.amax(-1)), reduction("aten.amin", lambda x: x.amin(-1)),
            reduction("aten.argmax", lambda x: x.argmax(-1)), reduction("aten.argmin", lambda x: x.argmin(-1)),
            reduction("aten.var", lambda x: x.var(-1)), reduction("aten.std", lambda x: x.std(-1)),
            reduction("aten.logsumexp", lambda x: x.logsumexp(-1)), reduction("aten.any", lambda x: (x > 0).any(-1)),
            reduction("aten.all", lambda x: (x > 0).all(-1)), reduction("aten.cumsum", lambda x: x.cumsum(-1)),
            reduction("aten.cumprod", lambda x: x.cumprod(-1)), reduction("aten.cummax", lambda x: x.cummax(-1)),
            reduction("aten._softmax", lambda x: x.softmax(-1)),
            reduction("aten._log_softmax", lambda x: x.log_softmax(-1)),
            reduction("aten.sort", lambda x: x.sort(-1)), reduction("aten.topk", lambda x: x.topk(1, -1)),
            reduction("aten.linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, dim=-1)),
            reduction("aten.max", lambda x: x.max(-1)), reduction("aten.var_mean", lambda x: torch.var_mean(x, -1))]
    out += [matmul("aten.mm", lambda b, m, k, n: [(b * m, k), (k, n)], torch.mm),
            matmul("aten.bmm", lambda b, m, k, n: [(b, m, k), (b, k, n)], torch.bmm),
            matmul("aten.addmm", lambda b, m, k, n: [(n,), (b * m, k), (k, n)], lambda c, a, w: torch.addmm(c, a, w, beta=0.5)),
            matmul("aten.baddbmm", lambda b, m, k, n: [(b, m, n), (b, m, k), (b, k, n)], torch.baddbmm),
            matmul("aten.mv", lambda b, m, k, n: [(b * m, k), (k,)], torch.mv),
            matmul("aten.addmv", lambda b, m, k, n: [(b * m,), (b * m, k), (k,)], torch.addmv)]
    out += [Case("aten.convolution", _conv_make), Case("aten.native_layer_norm", _norm_make),
            Case("aten.native_batch_norm", _batch_norm_make, scales=False),
            Case("aten.scaled_dot_product_attention", _sdpa_make, generic_bytes=True),
            Case("aten.max_pool2d_with_indices", _pool_make("max")), Case("aten.avg_pool2d", _pool_make("avg")),
            Case("aten._adaptive_avg_pool2d", _pool_make("adaptive"))]
    out += [reduction("aten.clone", lambda x: x.t().clone() if x.dim() == 2 else x.clone()),
            reduction("aten.cat", lambda x: torch.cat([x, x], -1)), reduction("aten.stack", lambda x: torch.stack([x, x])),
            reduction("aten.flip", lambda x: x.flip(-1)), reduction("aten.roll", lambda x: x.roll(1, -1)),
            reduction("aten.repeat", lambda x: x.repeat(2, 1) if x.dim() == 2 else x.repeat(2, 1, 1)),
            reduction("aten.constant_pad_nd", lambda x: F.pad(x, (1, 1))),
            reduction("aten.tril", lambda x: x.tril() if x.dim() >= 2 else x), reduction("aten.zeros_like", torch.zeros_like),
            reduction("aten.ones_like", torch.ones_like), reduction("aten.rand_like", torch.rand_like),
            reduction("aten.randn_like", torch.randn_like)]
    out += [_binary_inplace(n) for n in ("add_", "sub_", "mul_", "div_")] + direct_cases()
    out += [Case("aten.gather", _index_make("gather")), Case("aten.index_select", _index_make("index_select")),
            Case("aten.scatter_add", _index_make("scatter_add")), Case("aten.index_add", _index_make("index_add")),
            Case("aten.embedding", _embedding_make, generic_bytes=False),
            Case("aten.nll_loss_forward", _nll_make, scales=False), Case("aten.mse_loss", _mse_make, scales=False),
            Case("aten.bernoulli_", _dropout_make), Case("aten.native_group_norm", _group_norm_make)]
    out += [backward_of("aten.silu_backward", F.silu), backward_of("aten.gelu_backward", F.gelu),
            backward_of("aten.tanh_backward", torch.tanh), backward_of("aten.sigmoid_backward", torch.sigmoid),
            backward_of("aten.threshold_backward", F.relu),
            backward_of("aten._softmax_backward_data", lambda x: x.softmax(-1)),
            backward_of("aten._log_softmax_backward_data", lambda x: x.log_softmax(-1)),
            backward_of("aten.native_layer_norm_backward", lambda x: F.layer_norm(x, x.shape[-1:]))]
    from formula_cases_2026 import cases_2026   # imports this module: here, not at the top
    return out + new_cases() + cases_2026()


def _image_backward(op: str, forward: Callable) -> Case:
    """``op`` in the backward of ``forward`` on a [batch, 2, n, n] image."""
    def make(draw, batch):
        n = draw(st.integers(3, 6))

        def run(t):
            forward(t).sum().backward()
        return run, [torch.randn(batch, 2, n, n).requires_grad_()]
    return Case(op, make, backward=True, generic_bytes=False)


def _sdpa_backward_make(draw, batch):
    fn, tensors = _sdpa_make(draw, batch)
    return (lambda q, k, v: fn(q, k, v).sum().backward()), [t.requires_grad_() for t in tensors]


def _group_norm_backward_make(draw, batch):
    groups = draw(st.sampled_from([1, 2]))
    w, b = torch.randn(4).requires_grad_(), torch.randn(4).requires_grad_()
    return (lambda x, w, b: F.group_norm(x, groups, w, b).sum().backward()), \
        [torch.randn(batch, 4, 3).requires_grad_(), w, b]


def _loss_make(loss: Callable):
    def make(draw, batch):
        dims = _dims(draw)
        return (lambda x, y: loss(x, y).backward()), [torch.randn([batch] + dims).requires_grad_(),
                                                      torch.rand([batch] + dims)]
    return make


def new_cases() -> list[Case]:
    """Issue #15's formulas: activations, losses, resampling, attention backward, FFT, linalg."""
    a = torch.ops.aten
    out = [unary("mish", F.mish), unary("hardswish", F.hardswish), unary("hardsigmoid", F.hardsigmoid),
           unary("celu", F.celu), unary("sgn", torch.sgn), unary("erfc", torch.special.erfc),
           unary("log_sigmoid_forward", F.logsigmoid), unary("glu", lambda x: F.glu(torch.cat([x, x], -1)))]
    out += [backward_of("aten.leaky_relu_backward", F.leaky_relu), backward_of("aten.softplus_backward", F.softplus),
            backward_of("aten.elu_backward", F.elu), backward_of("aten.hardswish_backward", F.hardswish),
            backward_of("aten.hardsigmoid_backward", F.hardsigmoid),
            backward_of("aten.log_sigmoid_backward", F.logsigmoid)]
    # meta tensors run mish's backward as its decomposition (pointwise ops), not as one op
    out += [dataclasses.replace(backward_of("aten.mish_backward", F.mish), kinds=("real", "fake"))]
    out += [_image_backward("aten.upsample_bilinear2d_backward",
                            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")),
            _image_backward("aten.upsample_nearest2d_backward", lambda x: F.interpolate(x, scale_factor=2)),
            _image_backward("aten.reflection_pad2d_backward", lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect")),
            _image_backward("aten.replication_pad2d_backward", lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate")),
            direct("aten.upsample_bilinear2d", lambda b, n, x: a.upsample_bilinear2d(x, [2 * n, 2 * n], False),
                   inputs=_image),
            direct("aten.upsample_bicubic2d", lambda b, n, x: a.upsample_bicubic2d(x, [2 * n, 2 * n], False),
                   inputs=_image),
            direct("aten.pixel_shuffle", lambda b, n, x: a.pixel_shuffle(torch.cat([x, x], 1), 2), inputs=_image),
            direct("aten._fft_r2c", lambda b, n, x: torch.fft.rfft(x)),
            direct("aten._fft_c2c", lambda b, n, x: torch.fft.fft(x.to(torch.complex64))),
            direct("aten.mm", lambda b, n, x: torch.mm(x.to(torch.complex64), x.t().to(torch.complex64)),
                   scales=False),
            Case("aten.scaled_dot_product_attention_backward", _sdpa_backward_make, backward=True,
                 generic_bytes=False),
            Case("aten.native_group_norm_backward", _group_norm_backward_make, backward=True, generic_bytes=False,
                 scales=False),        # the per-channel sums have N*HxW - 1 adds: not linear in N
            Case("aten.binary_cross_entropy_with_logits", _loss_make(F.binary_cross_entropy_with_logits),
                 scales=False),
            Case("aten.smooth_l1_loss", _loss_make(F.smooth_l1_loss), scales=False),
            Case("aten.huber_loss_backward", _loss_make(F.huber_loss), scales=False, backward=True,
                 generic_bytes=False)]
    return out
