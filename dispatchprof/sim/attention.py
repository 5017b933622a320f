"""Attention ops in the counted op stream: which records they are and what their query holds.

The one rule the simulator uses to find attention in the records (tensor parallelism's head
check, the serving runtime's token positions and sequences per step, the narrow KV cache):

- an attention op is a record whose op name contains ``"attention"``: torch's fused scaled
  dot-product kernels, forward and backward, under whatever backend name
  (``aten.scaled_dot_product_attention``, ``aten._scaled_dot_product_flash_attention_for_cpu``,
  ...) and FlexAttention (``higher_order.flex_attention``, ``higher_order.flex_attention_backward``);
- its first argument is the query [B, heads, T, head_dim] (a backward's first argument, the
  output's gradient, has the same shape); `query_shape` is None when it is not 4-d;
- a fused attention op with MACs reads the query, key and value as its first three inputs
  (`reads_kv`), so the key and value bytes are ``inputs[1]`` and ``inputs[2]``.
"""

from __future__ import annotations

from typing import Sequence

from dispatchprof.results.records import OpRecord

#: The part of an op name that marks an attention op.
ATTENTION_MARK = "attention"


def is_attention(r: OpRecord) -> bool:
    """An attention op (forward or backward, fused SDPA or flex): its op name holds ATTENTION_MARK."""
    return ATTENTION_MARK in r.op


def query_shape(r: OpRecord) -> tuple[int, ...] | None:
    """The query [B, heads, T, head_dim] of an attention op, or None (not attention, or no 4-d
    first argument)."""
    if is_attention(r) and r.shapes and len(r.shapes[0]) == 4:
        return r.shapes[0]
    return None


def reads_kv(r: OpRecord) -> bool:
    """An attention op with MACs whose inputs are query, key, value, ...: its ``inputs[1]`` and
    ``inputs[2]`` are the key and value it reads."""
    return is_attention(r) and bool(r.cost.macs) and len(r.inputs) >= 3


def attention_heads(records: Sequence[OpRecord]) -> list[int]:
    """Heads of every attention op with a query shape (query [B, heads, T, D]), in record order."""
    return [q[1] for q in map(query_shape, records) if q is not None]


def query_positions(records: Sequence[OpRecord]) -> dict[str, int]:
    """Token positions per phase: the query length T of the phase's first attention op with a
    query shape (query [B, heads, T, head_dim])."""
    out: dict[str, int] = {}
    for r in records:
        q = query_shape(r)
        if q is not None:
            out.setdefault(r.phase, q[2])
    return out


def step_sequences(records: Sequence[OpRecord], starts: set[int]) -> dict[int, int]:
    """Per step (the index of its first record, of ``starts``): how many sequences it runs, the
    batch B of its first attention op's query [B, heads, T, head_dim]; 1 for a step without one."""
    out: dict[int, int] = {}
    step, found = -1, True
    for k, r in enumerate(records):
        if k in starts:
            step, found = k, False
            out[k] = 1
        if not found and (q := query_shape(r)) is not None:
            out[step], found = q[0], True
    return out
