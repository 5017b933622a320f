"""Inputs of one attention call that share a storage are read once (docs/counting.md, Attention).

Multi-head latent attention passes one cached latent as key (all of it) and value (its first
``kv_lora_rank`` columns): two views of one storage, which a kernel such as FlashMLA reads once.
Such inputs are charged the union of the bytes they cover in their storage: each input the bytes
that no earlier input of the call covers. Inputs alone in their storage are charged
`stored_bytes`, as every op's inputs are. Only shapes, strides and storage offsets are used, so the
rule is the same on real, fake and meta tensors. The ranges are numpy arrays: the counter runs
inside torch's dispatch modes, where a torch tensor made here would be a fake or meta one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dispatchprof.count.ledger import storage_key
from dispatchprof.count.tensors import stored_bytes


def read_once(tensors: Sequence[torch.Tensor]) -> list[int]:
    """The bytes each of ``tensors`` (in order) is charged: `stored_bytes` for a tensor alone in its
    storage; for one that shares its storage with an earlier tensor of the list, the bytes it covers
    that none of those earlier tensors covers."""
    charged = [stored_bytes(t) for t in tensors]
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(tensors):
        key = storage_key(t) if t.layout is torch.strided else None
        if key is not None:
            groups.setdefault(key, []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        runs: list[tuple[np.ndarray, np.ndarray]] = [_runs(tensors[members[0]])]
        covered = _union(runs)
        for i in members[1:]:
            runs.append(_runs(tensors[i]))
            now = _union(runs)
            charged[i] = min(charged[i], now - covered)
            covered = now
    return charged


def _runs(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends): the byte ranges of its storage that ``t`` covers, one per contiguous run.
    Broadcast (stride 0) and size-1 dims are dropped, the rest ordered by stride and merged where
    one dim continues the next, so a contiguous tensor is one run and a slice of the last dim one
    run per row."""
    size = t.element_size()
    if t.numel() == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    dims = sorted(((n, s) for n, s in zip(t.shape, t.stride()) if n > 1 and s != 0), key=lambda d: -abs(d[1]))
    merged: list[list[int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    run = size
    if merged and merged[-1][1] == 1:
        run = merged.pop()[0] * size
    starts = np.array([t.storage_offset() * size], np.int64)
    for n, s in merged:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64)[None, :] * (s * size)).reshape(-1)
    return starts, starts + run


def _union(runs: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """Bytes covered by the union of the ranges [start, end) of every entry of ``runs``."""
    starts = np.concatenate([s for s, _ in runs])
    ends = np.concatenate([e for _, e in runs])
    if not starts.size:
        return 0
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)                    # furthest end among ranges starting so far
    before = np.concatenate([starts[:1], reach[:-1]])
    return int(np.clip(ends - np.maximum(starts, before), 0, None).sum())


__all__ = ["read_once"]
