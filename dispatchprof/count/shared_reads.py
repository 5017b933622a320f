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
        first = tensors[members[0]]
        spans, whole = [_span(first)], [not _dims(first)[0]]
        runs: list[tuple[np.ndarray, np.ndarray]] | None = None
        covered = 0
        for i in members[1:]:
            lo, hi = span = _span(tensors[i])
            if any(w and a <= lo and hi <= b for w, (a, b) in zip(whole, spans)):
                charged[i] = 0           # inside an earlier tensor that covers every byte of its span
            elif runs is not None or any(lo < b and a < hi for a, b in spans):
                if runs is None:         # spans overlap: the exact union of the runs
                    runs = [_runs(tensors[j]) for j in members[:len(spans)]]
                    covered = _union(runs)
                runs.append(_runs(tensors[i]))
                now = _union(runs)
                charged[i] = min(charged[i], now - covered)
                covered = now
            spans.append(span)           # else disjoint from every earlier span: its own bytes
            whole.append(not _dims(tensors[i])[0])
    return charged


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first byte, one past the last byte) of its storage that ``t`` can touch."""
    size = t.element_size()
    lo = t.storage_offset() * size
    if t.numel() == 0:
        return lo, lo
    return lo, lo + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * size


def _dims(t: torch.Tensor) -> tuple[list[list[int]], int]:
    """(outer dims [size, stride] in elements, bytes of one contiguous run): broadcast (stride 0)
    and size-1 dims dropped, the rest ordered by stride and merged where one dim continues the
    next, so a contiguous tensor is one run and no outer dim, a slice of the last dim one run per
    row."""
    dims = sorted(((n, s) for n, s in zip(t.shape, t.stride()) if n > 1 and s != 0), key=lambda d: -d[1])
    merged: list[list[int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    run = t.element_size()
    if merged and merged[-1][1] == 1:
        run *= merged.pop()[0]
    return merged, run


def _runs(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends): the byte ranges of its storage that ``t`` covers, one per contiguous run
    (`_dims`)."""
    if t.numel() == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    size = t.element_size()
    merged, run = _dims(t)
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
