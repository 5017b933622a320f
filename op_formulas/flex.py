"""FlexAttention (``torch.nn.attention.flex_attention``) by the attention rule over kept blocks.

A BlockMask splits the Lq x Lk score matrix into Q_BLOCK x KV_BLOCK tiles and lists, per
(batch, head, query block), the kv blocks the kernel visits: *partial* blocks
(``kv_num_blocks`` / ``kv_indices``), where ``mask_mod`` is evaluated on every score, and *full*
blocks (``full_kv_num_blocks`` / ``full_kv_indices``), where it is not. The kernel computes
every score of a kept block and none of a dropped one, so the counts are:

- S = the scores of the kept blocks (a tile at the end of the sequence is clipped to Lq, Lk);
  P = the scores of the partial blocks; R = the queries of query blocks with at least one kept
  block; C = the keys of kv blocks kept by at least one query block; all summed over batch and
  (query) heads. A BlockMask with batch or head dim 1 is shared by every batch or head.
- forward: the attention rule (`attention.forward_of_scores`) with S scores in R rows, no
  additive mask; plus ``score_mod`` on each of the S scores and ``mask_mod`` and one selection
  (1 CMP: the where that sets a masked score to -inf) on each of the P scores.
- backward: the attention backward rule (`attention.backward_of_scores`, the four products and
  the softmax backward over S, R, C) and the GQA sum; plus the gradient of ``score_mod`` (the
  joint graph torch builds for it) on each of the S scores, and ``mask_mod`` and one selection
  on each of the P scores (the backward re-applies the mask).

The per-score costs of score_mod, mask_mod and the joint graph are measured by the counter by
running them on one score (``dispatchprof.count.flex``); this module takes them as `Cost`.
A BlockMask whose index tensors hold no values (meta or fake tensors) counts as dense: every
tile kept and partial, S = P = Lq*Lk per head.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from op_formulas.attention import Scores, backward_of_scores, forward_of_scores, group_sum_cost
from op_formulas.cost import Cost

#: Positions in ``BlockMask.as_tuple()``: (Lq, Lk, kv_num_blocks, kv_indices, full_kv_num_blocks,
#: full_kv_indices, ..., Q_BLOCK_SIZE, KV_BLOCK_SIZE, mask_mod).
Q_LEN, KV_LEN, KV_NUM, KV_IDX, FULL_NUM, FULL_IDX = range(6)
Q_BLOCK, KV_BLOCK, MASK_MOD = -3, -2, -1


class KeptScores(NamedTuple):
    """Scores of the kept blocks, summed over batch and query heads: S, P (partial blocks),
    R (rows with a kept block), C (columns with a kept block); heads = B*H, lq = B*H*Lq."""

    s: int
    partial: int
    rows: int
    cols: int
    heads: int
    lq: int


def dense_scores(b: int, h: int, lq: int, lk: int) -> KeptScores:
    """Every tile kept and partial (a BlockMask without values)."""
    n = b * h
    return KeptScores(n * lq * lk, n * lq * lk, n * lq, n * lk, n, n * lq)


def _tiles(num: torch.Tensor, idx: torch.Tensor, lq: int, lk: int, qb: int, kb: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per (b, h, query block, slot): whether the slot is a kept tile, its kv block, its area."""
    nq, nk = -(-lq // qb), -(-lk // kb)
    num, idx = num[..., :nq].long(), idx[..., :nq, :].long()
    rows = (lq - torch.arange(nq) * qb).clamp(0, qb)
    cols = (lk - torch.arange(nk) * kb).clamp(0, kb)
    valid = (torch.arange(idx.shape[-1]) < num[..., None]) & (idx < nk) & (idx >= 0)
    block = torch.where(valid, idx, nk)
    area = torch.where(valid, cols[block.clamp(max=nk - 1)] * rows[:, None], 0)
    return valid, block, area


def kept_scores(block_mask: tuple, b: int, h: int, lq: int, lk: int) -> KeptScores:
    """The module docstring's S, P, R, C from the BlockMask tuple (real index tensors), for
    queries [b, h, lq] and keys of length lk."""
    qb, kb = int(block_mask[Q_BLOCK]), int(block_mask[KV_BLOCK])
    nq, nk = -(-lq // qb), -(-lk // kb)
    kv_num, kv_idx = block_mask[KV_NUM].cpu(), block_mask[KV_IDX].cpu()
    mb, mh = kv_num.shape[0], kv_num.shape[1]
    share = (b // mb if mb else 0) * (h // mh if mh else 0)
    valid, block, area = _tiles(kv_num, kv_idx, lq, lk, qb, kb)
    partial = int(area.sum())
    kept, full_area = valid, 0
    if block_mask[FULL_NUM] is not None:
        fvalid, fblock, farea = _tiles(block_mask[FULL_NUM].cpu(), block_mask[FULL_IDX].cpu(), lq, lk, qb, kb)
        full_area = int(farea.sum())
        kept = torch.cat([valid, fvalid], -1)
        block = torch.cat([block, fblock], -1)
    rows = (lq - torch.arange(nq) * qb).clamp(0, qb)
    cols = (lk - torch.arange(nk) * kb).clamp(0, kb)
    r = int((kept.any(-1) * rows).sum())
    seen = torch.zeros(*block.shape[:2], nk + 1, dtype=torch.bool)
    seen.scatter_(-1, block.flatten(-2), True)
    c = int((seen[..., :nk] * cols).sum())
    return KeptScores((partial + full_area) * share, partial * share, r * share, c * share, b * h, b * h * lq)


def flex_forward_cost(kept: KeptScores, e: int, ev: int, score_mod: Cost, mask_mod: Cost) -> Cost:
    """The forward rule of the module docstring; score_mod / mask_mod: the cost of one call."""
    return (forward_of_scores(kept.s, kept.rows, e, ev, masked=False, dropout=False)
            + score_mod * kept.s + (mask_mod + Cost(cmp=1)) * kept.partial)


def flex_backward_cost(kept: KeptScores, b: int, h: int, hk: int, lk: int, e: int, ev: int,
                       joint: Cost, mask_mod: Cost) -> Cost:
    """The backward rule of the module docstring; joint: one call of score_mod's joint graph."""
    return (backward_of_scores(Scores(kept.s, kept.rows, kept.cols), kept.lq, e, ev)
            + group_sum_cost(b, h, hk, lk, e, ev)
            + joint * kept.s + (mask_mod + Cost(cmp=1)) * kept.partial)
