"""Scaled dot-product attention as one fused op, forward and backward.

Whatever backend torch picks (math, flash, efficient, cudnn, flash-for-cpu) and whatever
the tensor kind, attention is counted by one rule (COUNTING.md). With q [B,H,Lq,E],
k [B,Hk,Lk,E], v [B,Hk,Lk,Ev], S the number of scores per (batch, head), R the queries that
see at least one key and C the keys seen by at least one query:
scores S*E MULT + S*(E-1) ADD; scale S MULT; mask or causal S ADD; softmax per row
((S-R) CMP, S ADD, S EXP, (S-R) ADD, S DIV); output Ev*S MULT + Ev*(S-R) ADD;
MACs = S*(E+Ev); all times B*H (query heads).

S = Lq*Lk, R = Lq, C = Lk by default (the math definition, causal or not). The "computed"
causal rule follows the mask that is applied:
- "top_left" (torch's ``is_causal=True``): query i sees min(i+1, Lk) keys;
  with m = min(Lq, Lk): S = m(m+1)/2 + (Lq-m)*Lk, R = Lq, C = m.
- "end" (a decode step over a KV cache, the mask transformers builds): query i sees
  max(0, min(Lk, Lk-Lq+i+1)) keys: S = m(m+1)/2 + m*(Lk-m), R = m, C = Lk.
Traffic: q, k, v (and the mask) read, the output (and logsumexp when returned) written; the
Lq x Lk score matrix is never traffic.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

aten = torch.ops.aten
#: How causal scores are counted: False (all Lq x Lk), or the alignment of the applied mask.
ALIGNMENTS = ("top_left", "end")


class Scores(NamedTuple):
    """S scores per (batch, head); R queries and C keys that take part in at least one."""

    s: int
    rows: int
    cols: int


def causal_scores(lq: int, lk: int) -> int:
    """sum over i < lq of min(lk, max(0, lk - lq + i + 1)): the scores an end-aligned causal
    mask leaves. With m = min(lq, lk): m*(m+1)/2 + m*(lk - m)."""
    return scores(lq, lk, "end").s


def scores(lq: int, lk: int, computed: bool | str = False) -> Scores:
    """The module docstring's S, R, C for one (batch, head)."""
    m = min(lq, lk)
    if not computed:
        return Scores(lq * lk, lq, lk)
    if computed == "top_left":
        return Scores(m * (m + 1) // 2 + (lq - m) * lk, lq, m)
    if computed in ("end", True):
        return Scores(m * (m + 1) // 2 + m * (lk - m), m, lk if lq else 0)
    raise ValueError(f"causal_computed must be False or one of {ALIGNMENTS}, got {computed!r}")


def attention_cost(b: int, h: int, lq: int, lk: int, e: int, ev: int, *, masked: bool,
                   dropout: bool, causal_computed: bool | str) -> Cost:
    """The forward rule of the module docstring for one attention call."""
    s, rows, _ = scores(lq, lk, causal_computed)
    return forward_of_scores(s, rows, e, ev, masked=masked, dropout=dropout) * (b * h)


def forward_of_scores(s: int, rows: int, e: int, ev: int, *, masked: bool, dropout: bool) -> Cost:
    """The forward rule for S scores in R rows (one head, or summed over heads: the rule is
    linear in S and R)."""
    cost = Cost(
        mult=s * e + s + ev * s,
        add=s * (e - 1) + s * int(masked) + (2 * s - rows) + ev * (s - rows),
        cmp=s - rows, exp=s, div=s, macs=s * (e + ev))
    if dropout:
        cost += Cost(other=s, mult=s)   # one draw and one mask-and-scale per probability
    return cost


def attention_backward_cost(b: int, h: int, hk: int, lq: int, lk: int, e: int, ev: int, *,
                            causal_computed: bool | str, masked: bool = False) -> Cost:
    """The model's backward arithmetic, per (batch, head): the four products of the math
    algorithm and the softmax backward; P is taken as saved (a fused kernel's recomputation of
    Q K^T is hardware work the count leaves out; FlopCounterMode counts it as a fifth product):
    dV = P^T dO (Ev*S MULT, Ev*(S-C) ADD); dP = dO V^T (S*Ev MULT, S*(Ev-1) ADD);
    D = rowsum(dO*O) (Lq*Ev MULT, Lq*(Ev-1) ADD); dS = P*(dP-D)*scale (S ADD, 2S MULT);
    dQ = dS K (S*E MULT, E*(S-R) ADD); dK = dS^T Q (S*E MULT, E*(S-C) ADD).
    The mask's gradient is the identity: no arithmetic (``masked`` changes nothing).
    GQA: dK and dV are summed over the H/Hk query heads of each kv head:
    B*Hk*Lk*(E+Ev)*(H/Hk-1) ADD. MACs = S*(2E + 2Ev)."""
    s, rows, cols = scores(lq, lk, causal_computed)
    return backward_of_scores(Scores(s, rows, cols), lq, e, ev) * (b * h) + group_sum_cost(b, h, hk, lk, e, ev)


def backward_of_scores(sc: Scores, lq: int, e: int, ev: int) -> Cost:
    """The backward rule without the GQA sum, for S scores, R rows, C columns and Lq queries (one
    head, or summed over heads: the rule is linear in all four)."""
    s, rows, cols = sc
    return Cost(
        mult=ev * s + s * ev + lq * ev + 2 * s + s * e + s * e,
        add=ev * (s - cols) + s * (ev - 1) + lq * (ev - 1) + s + e * (s - rows) + e * (s - cols),
        macs=s * (2 * e + 2 * ev))


def group_sum_cost(b: int, h: int, hk: int, lk: int, e: int, ev: int) -> Cost:
    """GQA: dK and dV summed over the H/Hk query heads of each kv head."""
    return Cost(add=b * hk * lk * (e + ev) * (h // hk - 1))


def _shapes(q: TensorMeta, k: TensorMeta, v: TensorMeta) -> tuple[int, ...]:
    *batch, h, lq, e = q.shape
    hk, lk = k.shape[-3], k.shape[-2]
    b = 1
    for d in batch:
        b *= d
    return b, h, hk, lq, lk, e, v.shape[-1]


def _forward(q: TensorMeta, k: TensorMeta, v: TensorMeta, mask: Any, dropout_p: Any, is_causal: Any,
             causal_computed: bool, written: int | None = None) -> Cost:
    b, h, _, lq, lk, e, ev = _shapes(q, k, v)
    cost = attention_cost(b, h, lq, lk, e, ev, masked=mask is not None or bool(is_causal),
                          dropout=bool(dropout_p), causal_computed=causal_computed)
    return cost.with_bytes(written=written)


#: Every parameter of ``aten::scaled_dot_product_attention`` (the schema F.scaled_dot_product_attention
#: is generated from) and what `sdpa` makes of it; tests/test_sdpa_calls.py checks this against
#: the schema, so a parameter a new torch adds fails a test until its effect is written here.
SDPA_PARAMETERS = {
    "query": "q [B,H,Lq,E]", "key": "k [B,Hk,Lk,E]", "value": "v [B,Hk,Lk,Ev]",
    "attn_mask": "masked: S ADD", "dropout_p": "dropout when > 0: S OTHER + S MULT",
    "is_causal": "masked: S ADD; the causal rule", "scale": "no change: the scale is S MULT whatever its value",
    "enable_gqa": "no change: H counts query heads, k and v are shared by shape",
}


@formula(aten.scaled_dot_product_attention)
def sdpa(query: TensorMeta, key: TensorMeta, value: TensorMeta, attn_mask: Any = None, dropout_p: float = 0.0,
         is_causal: bool = False, *, scale: Any = None, enable_gqa: bool = False, result: Any,
         causal_computed: bool | str = False, **kwargs: Any) -> Cost:
    """torch.nn.functional.scaled_dot_product_attention, recorded once above the backends; its
    parameters as `SDPA_PARAMETERS` says."""
    return _forward(query, key, value, attn_mask, dropout_p, is_causal, causal_computed)


def _out_and_lse(result: Any) -> int:
    out, lse = result[0], result[1]
    return out.nbytes + (lse.nbytes if isinstance(lse, TensorMeta) else 0)


@formula(aten._scaled_dot_product_flash_attention_for_cpu)
def sdpa_flash_cpu(q: TensorMeta, k: TensorMeta, v: TensorMeta, dropout_p: float = 0.0,
                   is_causal: bool = False, *, result: Any, causal_computed: bool | str = False,
                   attn_mask: Any = None, **kwargs: Any) -> Cost:
    """The CPU flash kernel: (output, logsumexp)."""
    return _forward(q, k, v, attn_mask, dropout_p, is_causal, causal_computed, _out_and_lse(result))


@formula(aten._scaled_dot_product_flash_attention)
def sdpa_flash(q: TensorMeta, k: TensorMeta, v: TensorMeta, dropout_p: float = 0.0,
               is_causal: bool = False, *args: Any, result: Any, causal_computed: bool | str = False,
               **kwargs: Any) -> Cost:
    """The CUDA flash kernel: (output, logsumexp, bookkeeping...)."""
    return _forward(q, k, v, None, dropout_p, is_causal, causal_computed, _out_and_lse(result))


@formula(aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_cudnn_attention)
def sdpa_efficient(q: TensorMeta, k: TensorMeta, v: TensorMeta, attn_bias: Any = None,
                   compute_log_sumexp: bool = False, dropout_p: float = 0.0, is_causal: bool = False,
                   *args: Any, result: Any, causal_computed: bool | str = False, **kwargs: Any) -> Cost:
    """Memory-efficient and cuDNN kernels: (output, logsumexp, bookkeeping...)."""
    return _forward(q, k, v, attn_bias, dropout_p, is_causal, causal_computed, _out_and_lse(result))


def _backward(grad: TensorMeta, q: TensorMeta, k: TensorMeta, v: TensorMeta, masked: bool,
              causal_computed: bool | str) -> Cost:
    b, h, hk, lq, lk, e, ev = _shapes(q, k, v)
    return attention_backward_cost(b, h, hk, lq, lk, e, ev, masked=masked,
                                   causal_computed=causal_computed)


def fused_backward(q: TensorMeta, k: TensorMeta, v: TensorMeta, *, causal_computed: bool | str) -> Cost:
    """The backward of one ``F.scaled_dot_product_attention`` call, whatever ops the backend
    runs for it (the counter records it once, as ``aten.scaled_dot_product_attention_backward``);
    reads q, k, v, the output and its gradient, writes dq, dk, dv."""
    b, h, hk, lq, lk, e, ev = _shapes(q, k, v)
    cost = attention_backward_cost(b, h, hk, lq, lk, e, ev, causal_computed=causal_computed)
    out = b * h * lq * ev * q.itemsize
    return cost.with_bytes(read=q.nbytes + k.nbytes + v.nbytes + 2 * out,
                           written=q.nbytes + k.nbytes + v.nbytes)


@formula(aten._scaled_dot_product_flash_attention_for_cpu_backward)
def sdpa_flash_cpu_backward(grad: TensorMeta, q: TensorMeta, k: TensorMeta, v: TensorMeta,
                            out: Any, lse: Any, dropout_p: float = 0.0, is_causal: bool = False,
                            *, result: Any, causal_computed: bool | str = False, attn_mask: Any = None,
                            **kwargs: Any) -> Cost:
    """See `attention_backward_cost`."""
    return _backward(grad, q, k, v, attn_mask is not None or bool(is_causal), causal_computed)


@formula(aten._scaled_dot_product_flash_attention_backward)
def sdpa_flash_backward(grad: TensorMeta, q: TensorMeta, k: TensorMeta, v: TensorMeta, *args: Any,
                        result: Any, causal_computed: bool | str = False, **kwargs: Any) -> Cost:
    """(grad, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, dropout_p, is_causal, ...)."""
    return _backward(grad, q, k, v, bool(args[7]), causal_computed)


@formula(aten._scaled_dot_product_efficient_attention_backward)
def sdpa_efficient_backward(grad: TensorMeta, q: TensorMeta, k: TensorMeta, v: TensorMeta,
                            attn_bias: Any, *args: Any, result: Any, causal_computed: bool | str = False,
                            **kwargs: Any) -> Cost:
    """(grad, q, k, v, attn_bias, out, lse, seed, offset, dropout_p, grad_input_mask, is_causal)."""
    is_causal = kwargs.get("is_causal", args[6] if len(args) > 6 else False)
    return _backward(grad, q, k, v, attn_bias is not None or bool(is_causal), causal_computed)


@formula(aten._scaled_dot_product_cudnn_attention_backward)
def sdpa_cudnn_backward(grad: TensorMeta, q: TensorMeta, k: TensorMeta, v: TensorMeta, *args: Any,
                        result: Any, causal_computed: bool | str = False, **kwargs: Any) -> Cost:
    """(grad, q, k, v, out, lse, seed, offset, attn_bias, cum_q, cum_k, max_q, max_k, p, is_causal)."""
    return _backward(grad, q, k, v, args[4] is not None or bool(args[10]), causal_computed)
