"""Live-tensor accounting for ACT, CACHE and PEAK (COUNTING.md, tensor quantities).

Every tensor an op returns is followed with a weak reference; a storage is live while
any tensor object seen on it is alive. Live bytes are the sum of the live storages'
sizes; parameters, buffers and user inputs are never op outputs, so they are excluded.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch


@dataclass
class _Storage:
    nbytes: int
    born: int          # op index that allocated it
    refs: int = 0


@dataclass
class LiveMemory:
    """Bytes of live op outputs, the running peak, and each storage's birth op."""

    live_bytes: int = 0
    peak_bytes: int = 0
    produced_elements: int = 0
    _storages: dict[int, _Storage] = field(default_factory=dict)

    def track(self, t: torch.Tensor, op_index: int) -> None:
        """Follow ``t``; a storage first seen here counts as allocated by ``op_index``."""
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse, nested: no plain storage
            return
        key = storage._cdata
        entry = self._storages.get(key)
        if entry is None:
            entry = self._storages[key] = _Storage(storage.nbytes(), op_index)
            self.live_bytes += entry.nbytes
            self.produced_elements += t.numel()
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
        entry.refs += 1
        weakref.finalize(t, self._release, key)

    def _release(self, key: int) -> None:
        entry = self._storages.get(key)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs == 0:
            del self._storages[key]
            self.live_bytes -= entry.nbytes

    def born_at(self, t: torch.Tensor) -> int | None:
        """Op index that allocated ``t``'s storage, or None if no op of ours did."""
        try:
            entry = self._storages.get(t.untyped_storage()._cdata)
        except (RuntimeError, NotImplementedError):
            return None
        return None if entry is None else entry.born

    def close(self) -> None:
        """Forget everything; finalizers that fire later find nothing to release."""
        self._storages.clear()
