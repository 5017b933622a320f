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

A causal flash-attention kernel (FlashAttention, the serving engines' fused attention) walks the
Lq x Lk score matrix in tiles of ``FLASH_TILE`` = (query rows, keys) and skips every tile that its
end-aligned causal mask hides entirely; a tile holding at least one kept score is computed whole:

    flash_scores(Lq, Lk) = sum over query blocks [r0, r1) of (r1 - r0) * min(Lk, ceil((Lk - Lq + r1) / 64) * 64)

(the block's last row sees Lk - Lq + r1 keys). Worked: Lq = Lk = 256 keeps 128 * 128 + 128 * 256 =
49,152 of 65,536 scores (0.75); Lq <= 128 keeps every score. `flash_work_share` is what such a
kernel computes of what was counted: B * H * flash_scores * (E + Ev) / the record's MACs (MACs are
S * (E + Ev) per (batch, head), docs/counting.md; twice that for a backward), at most 1, so a
count made with ``causal="computed"`` is not cut twice.
"""

from __future__ import annotations

from typing import Sequence

from dispatchprof.results.records import OpRecord

#: The part of an op name that marks an attention op.
ATTENTION_MARK = "attention"
#: (query rows, keys) of a flash-attention tile: PyTorch's FlashAttention-2 forward for head dim 128
#: on A100 and H100 (run_mha_fwd_hdim128: Flash_fwd_kernel_traits<128, 128, 64, ...>,
#: pytorch/pytorch aten/src/ATen/native/transformers/cuda/flash_attn/flash_fwd_launch_template.h).
FLASH_TILE = (128, 64)


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


def flash_scores(lq: int, lk: int) -> int:
    """Scores of one (batch, head) that a causal flash kernel computes: the ``FLASH_TILE`` tiles
    of the Lq x Lk matrix holding a score that the end-aligned mask keeps (module docstring)."""
    rows, keys = FLASH_TILE
    total = 0
    for r0 in range(0, lq, rows):
        r1 = min(lq, r0 + rows)
        seen = lk - lq + r1                              # keys the block's last row sees
        if seen > 0:
            total += (r1 - r0) * min(lk, -(-seen // keys) * keys)
    return total


def is_causal_flash(r: OpRecord) -> bool:
    """A causal fused attention op (forward or backward) with MACs, whose query, key and value
    shapes are its first three: one that a flash kernel runs tile by tile."""
    return (is_attention(r) and bool(r.causal) and bool(r.cost.macs) and len(r.shapes) >= 3
            and all(len(s) == 4 for s in r.shapes[:3]))


def flash_work_share(r: OpRecord) -> float:
    """The share of ``r``'s counted work that a causal flash kernel computes (module docstring);
    1 for any other op."""
    if not is_causal_flash(r):
        return 1.0
    (b, h, lq, e), k, v = r.shapes[:3]
    per_score = (e + v[3]) * (2 if "backward" in r.op else 1)
    return min(1.0, b * h * flash_scores(lq, k[2]) * per_score / r.cost.macs)
