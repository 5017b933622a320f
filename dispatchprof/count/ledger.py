"""The tensor ledger: which op produced each live storage, and how many bytes are live.

Every storage an op allocates is followed with one weak reference to its Python object, which
torch keeps for as long as the storage lives (PyObject preservation): the storage is live until
the last tensor on it (a view, or one autograd saved for the backward) is gone, and views need
no bookkeeping of their own. Live bytes are the sum of the live storages' sizes (ACT, CACHE and
PEAK in COUNTING.md); parameters, buffers and user inputs are never op outputs, so they are
excluded. Each storage also remembers the record that last wrote it, which tells the simulator
where a tensor lives when another op reads it.

A storage no op of ours wrote (a user input, an optimizer's step counter made before the count) is
read from the host; the simulator moves each such tensor once. Its address can be taken by another
storage once it dies, so a read names it by a serial number that stays the same while it lives and
is never given again (`host_identity`): the same count always moves the same bytes.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from dispatchprof.results.records import HOST, UNRECORDED


@dataclass
class _Storage:
    nbytes: int
    born: int          # op index that allocated it; -1: written by an uncounted op (`TensorLedger.mark`)
    producer: int      # record index that last wrote it, or UNRECORDED


def _storage_of(t: torch.Tensor) -> torch.UntypedStorage | None:
    """``t``'s storage, or None where it has none (sparse, nested)."""
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def storage_key(t: torch.Tensor) -> int | None:
    """Identity of a tensor's storage (views share it); None for layouts without one."""
    storage = _storage_of(t)
    return None if storage is None else storage._cdata


@dataclass
class TensorLedger:
    """Bytes of live op outputs, the running peak, and each storage's birth and producer."""

    live_bytes: int = 0
    peak_bytes: int = 0
    produced_elements: int = 0
    _storages: dict[int, _Storage] = field(default_factory=dict)
    _closed: bool = False
    _refs: dict[int, tuple[weakref.ref, int]] = field(default_factory=dict)   # id(ref) -> (ref, key)
    _host: dict[int, int] = field(default_factory=dict)          # live host storage key -> its serial
    _host_refs: dict[int, tuple[weakref.ref, int]] = field(default_factory=dict)
    _serials: int = 0

    def track(self, t: torch.Tensor, op_index: int, producer: int, not_new: Any) -> None:
        """Follow ``t``'s storage, written by ``producer``. A storage seen for the first time
        counts as allocated at ``op_index`` unless its key is in ``not_new`` (the op's inputs,
        parameters: a view or an in-place write of a tensor that existed before, which is not
        followed)."""
        storage = _storage_of(t)
        if storage is None:
            return
        key = storage._cdata
        entry = self._storages.get(key)
        if entry is None:
            if key in not_new:
                return
            entry = self._follow(storage, key, _Storage(storage.nbytes(), op_index, producer))
            self.live_bytes += entry.nbytes
            self.produced_elements += t.numel()
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
        elif producer != UNRECORDED:
            entry.producer = producer       # an in-place write moves the tensor to its writer

    def mark(self, t: torch.Tensor, producer: int) -> None:
        """Note that record ``producer`` wrote ``t``'s storage through an op that is not counted on
        its own (an op inside a fused attention call's backward, which that call's one backward
        record stands for): a later op reading it finds its producer, not the host. Its bytes are
        not added to the live bytes (the fused call's own buffers are not counted, whatever backend
        ran it), and a storage already followed only changes its producer."""
        storage = _storage_of(t)
        if storage is None:
            return
        entry = self._storages.get(storage._cdata)
        if entry is not None:
            entry.producer = producer
        else:
            self._follow(storage, storage._cdata, _Storage(0, -1, producer))

    def _follow(self, storage: torch.UntypedStorage, key: int, entry: _Storage) -> _Storage:
        """Enter ``entry`` for ``storage`` (key ``key``), released when the storage dies (a
        cheaper weakref.finalize: the ledger keeps the reference alive until it is closed)."""
        self._storages[key] = entry
        ref = weakref.ref(storage, self._on_death)
        self._refs[id(ref)] = (ref, key)
        return entry

    def _on_death(self, ref: weakref.ref) -> None:
        held = self._refs.pop(id(ref), None)
        if held is not None and not self._closed:
            entry = self._storages.pop(held[1], None)
            if entry is not None:
                self.live_bytes -= entry.nbytes

    def host_identity(self, t: torch.Tensor) -> int:
        """The serial number of ``t``'s storage, read from the host: the same for every read while
        the storage lives, a new one for a storage that later takes its address (module docstring).
        Serials count down from -2, so they never equal a storage's address."""
        storage = t.untyped_storage()
        key = storage._cdata
        serial = self._host.get(key)
        if serial is None:
            self._serials += 1
            serial = self._host[key] = -1 - self._serials
            ref = weakref.ref(storage, self._on_host_death)
            self._host_refs[id(ref)] = (ref, key)
        return serial

    def _on_host_death(self, ref: weakref.ref) -> None:
        held = self._host_refs.pop(id(ref), None)
        if held is not None:
            self._host.pop(held[1], None)

    def born_at(self, t: torch.Tensor) -> int | None:
        """Op index that allocated ``t``'s storage, or None if no op of ours did."""
        entry = self._storages.get(storage_key(t))
        return None if entry is None or entry.born < 0 else entry.born

    def producer_of(self, key: int | None) -> int:
        """Record index that last wrote storage ``key``; HOST if no op of ours made it."""
        entry = self._storages.get(key)
        return HOST if entry is None else entry.producer

    def close(self) -> None:
        """Forget everything; finalizers that fire later find nothing to release."""
        self._closed = True
        self._storages.clear()
        self._refs.clear()
        self._host.clear()
        self._host_refs.clear()
