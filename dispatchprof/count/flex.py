"""FlexAttention under the counter: one record per call, by the rule of `op_formulas.flex`.

The counter sees the ``flex_attention`` and ``flex_attention_backward`` higher-order ops (torch
runs them eagerly while counting). Each runs its dense reference kernel with counting suspended
(its ops would count the full Lq x Lk score matrix), and one record is added:
``higher_order.flex_attention`` (or ``_backward``) with the attention rule over the blocks the
BlockMask keeps, plus the arithmetic of ``score_mod`` / ``mask_mod`` (and, in the backward,
score_mod's joint graph) measured by running each once on a single score (0-dim tensors) and
counting its ops with the registry's formulas. Bytes: every tensor argument (q, k, v, the
BlockMask's index tensors, captured buffers; in the backward also out, logsumexp and the
gradients) read once, every output written once.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode

from dispatchprof.count.recorder import OpInfo
from dispatchprof.count.tensors import tensor_kind, to_meta
from op_formulas.cost import Cost
from op_formulas.flex import (
    KV_IDX, KV_NUM, MASK_MOD, KeptScores, dense_scores, flex_backward_cost, flex_forward_cost, kept_scores,
)
from op_formulas.registry import UnsupportedCall

#: The higher-order ops this module counts.
FLEX_OPS = frozenset({"flex_attention", "flex_attention_backward"})


class _Probe(TorchDispatchMode):
    """Sums the registry's arithmetic (no bytes) of the ops run under it; names the unknown ones.
    An op without a formula that has a CompositeImplicit decomposition is counted by its parts."""

    def __init__(self) -> None:
        super().__init__()
        self.cost = Cost()
        self.unknown: list[str] = []
        self._infos: dict[Any, OpInfo] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        info = self._infos.get(func)
        if info is None:
            info = self._infos[func] = OpInfo(func)     # the counter's own facts of the overload
        if info.formula is None and info.decomposable:
            with self:                  # aten.__and__ and the like: count their parts
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        if info.formula is not None:
            try:
                cost = info.formula(*to_meta(args), result=to_meta(out), **to_meta(kwargs))
                self.cost += cost.with_bytes(None, None)
            except UnsupportedCall:
                self.unknown.append(info.name)
        elif not info.zero_cost:
            self.unknown.append(info.name)
        return out


def per_score(fn: Callable | None, q: torch.Tensor, n_int: int, extra: tuple, grad: bool = False
              ) -> tuple[Cost, list[str]]:
    """The arithmetic of one call of ``fn`` (score_mod: score, b, h, q_idx, kv_idx; mask_mod: b, h,
    q_idx, kv_idx; a joint graph: score, b, h, q_idx, kv_idx, grad) on one score, and the ops
    it ran that have no formula."""
    if fn is None:
        return Cost(), []
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    score = () if n_int == 4 else (q.new_zeros((), dtype=work),)
    ints = tuple(q.new_zeros((), dtype=torch.int) for _ in range(4))
    tail = (q.new_ones((), dtype=work),) if grad else ()
    probe = _Probe()
    try:
        with torch.no_grad(), TransformGetItemToIndex(), probe:
            fn(*score, *ints, *tail, *extra)
    except Exception as e:  # a mod that cannot run on one score: its arithmetic is left out, named
        return Cost(), [f"{getattr(fn, '__name__', type(fn).__name__)} ({type(e).__name__}: cannot run on one score)"]
    return probe.cost, probe.unknown


def _has_values(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and tensor_kind(t) == "real"


def scores_of(block_mask: tuple, q: torch.Tensor, k: torch.Tensor) -> KeptScores:
    """Kept scores of the BlockMask for these queries and keys (dense without index values)."""
    b, h, lq, lk = q.shape[0], q.shape[1], q.shape[-2], k.shape[-2]
    if _has_values(block_mask[KV_NUM]) and _has_values(block_mask[KV_IDX]):
        with unset_fake_temporarily():          # real index tensors inside a fake run
            return kept_scores(block_mask, b, h, lq, lk)
    return dense_scores(b, h, lq, lk)


def flex_cost(name: str, args: tuple) -> tuple[Cost, list[str]]:
    """The arithmetic of one flex_attention(_backward) HOP call, and the unknown ops its mods ran."""
    q, k, v = args[:3]
    if name == "flex_attention":
        score_mod, block_mask, _, _, score_bufs, mask_bufs = (args[3:9] + ((), ()))[:6]
        joint = None
    else:
        score_mod, joint, block_mask = args[7], args[8], args[9]
        score_bufs, mask_bufs = (args[12:14] + ((), ()))[:2]
    kept = scores_of(block_mask, q, k)
    mask_cost, unknown = per_score(block_mask[MASK_MOD], q, 4, tuple(mask_bufs))
    e, ev = q.shape[-1], v.shape[-1]
    if name == "flex_attention":
        mod_cost, more = per_score(score_mod, q, 5, tuple(score_bufs))
        return flex_forward_cost(kept, e, ev, mod_cost, mask_cost), unknown + more
    if joint is not None:
        mod_cost, more = per_score(joint, q, 5, tuple(score_bufs), grad=True)
    else:                               # no joint graph: score_mod's forward arithmetic stands in
        mod_cost, more = per_score(score_mod, q, 5, tuple(score_bufs))
    return flex_backward_cost(kept, q.shape[0], q.shape[1], k.shape[1], k.shape[-2], e, ev, mod_cost,
                              mask_cost), unknown + more


def run_flex(state: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run a flex_attention(_backward) HOP through its dense kernel, uncounted, and record it once
    on ``state`` (the counter's Recorder)."""
    dense = func.py_kernels[torch._C.DispatchKey.CompositeExplicitAutograd]
    state.inside_fused += 1
    try:
        out = dense(*args, **kwargs)
    finally:
        state.inside_fused -= 1
    cost, unknown = flex_cost(func.name(), args)
    for op in unknown:
        state.unknown_call(op, f"run by a {func.name()} score_mod/mask_mod: no formula")
    state.count_cost(f"higher_order.{func.name()}", cost, args, out)
    return out


__all__ = ["FLEX_OPS", "flex_cost", "per_score", "run_flex", "scores_of"]
