"""What one aten op call reads and writes, by the generic byte rule of docs/counting.md: every tensor
input read once (write-only ``out=`` arguments and overwritten targets not), every output and
mutated argument written once; which reads are parameters, where the others came from, and which
storages existed before the op (an output in one of them is not a new allocation). ``info`` is the
op's dispatchprof.count.recorder.OpInfo (its schema facts: skips_first, write_only,
mutated_positions, mutated_names, func)."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from dispatchprof.count.aliasing import returns_only_mutated
from dispatchprof.count.ledger import storage_key
from dispatchprof.count.shared_reads import read_once
from dispatchprof.count.tensors import iter_tensors, stored_bytes
from dispatchprof.results.records import HOST

Tensor = torch.Tensor
#: Argument containers whose tensors an op reads.
CONTAINERS = (list, tuple, dict)


def bytes_read(info: Any, args: tuple, kwargs: dict, resident: set[int],
               producer_of: Callable[[int | None], int], host_identity: Callable[[Tensor], int]) -> tuple:
    """The generic read rule and where each read tensor comes from: every tensor input once
    (stride-0 dims once), except write-only ``out=`` arguments and overwritten targets; an attention
    call's inputs that share a storage (MLA's key and value, views of one latent) read once
    (`dispatchprof.count.shared_reads`). One
    walk over the arguments; returns (bytes read, sources, parameter bytes, parameter elements,
    the storages that existed before the op, the first tensor of ``args``). ``resident``: the
    storages of parameters and buffers; ``producer_of``: the record that wrote a storage;
    ``host_identity``: a tensor read from the host by its storage's serial (TensorLedger.host_identity),
    where a source names other tensors by their storage's address."""
    total = param_bytes = param_elements = 0
    sources: list[tuple[int, int, int]] = []     # (producer record, bytes, storage id)
    first = None
    inputs: set[int | None] = set()
    skip = 0 if info.skips_first else -1
    read: list[tuple[Tensor, int | None]] = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            tensors: Any = (a,)
        elif isinstance(a, CONTAINERS):
            tensors = iter_tensors(a)
        else:
            continue
        for t in tensors:
            if first is None:
                first = t
            key = storage_key(t)
            inputs.add(key)
            if i != skip:
                read.append((t, key))
    if kwargs:
        write_only = info.write_only
        for k, v in kwargs.items():
            for t in iter_tensors(v):
                key = storage_key(t)
                inputs.add(key)
                if k not in write_only:
                    read.append((t, key))
    shared = info.attention and len({key for _, key in read}) < len(read)
    charged = read_once([t for t, _ in read]) if shared else None
    for i, (t, key) in enumerate(read):
        nbytes = stored_bytes(t) if charged is None else charged[i]
        total += nbytes
        if key in resident or is_parameter(t):
            param_bytes += nbytes
            size = t.element_size()
            param_elements += nbytes // size if size else 0
        else:
            producer = producer_of(key)
            sources.append((producer, nbytes, host_identity(t) if producer == HOST and key is not None else key or 0))
    return total, sources, param_bytes, param_elements, Existing(inputs, resident), first


def parameter_share(total: int, param_bytes: int, param_elements: int, formula_read: int,
                    table: Any, resident: set[int]) -> tuple[int, int]:
    """The parameter bytes and elements read by an op that gathers from the parameter ``table``
    (op_formulas.registry.PARAMETER_GATHERS: ``embedding`` reads some rows of a table,
    ``_grouped_mm`` the experts its tokens route to), whose formula reads ``formula_read`` bytes
    where the generic rule reads ``total``, ``param_bytes`` of them parameters. Rule: every other
    input is read whole, so the difference is the table's: it comes off (or, where rows repeat,
    adds to) the parameter bytes and, in the table's element size, the parameter elements. A table
    that is not a parameter or buffer (``resident``: their storages) leaves them as they are."""
    if (not isinstance(table, Tensor) or not param_bytes
            or not (storage_key(table) in resident or is_parameter(table))):
        return param_bytes, param_elements
    unread = min(total - formula_read, param_bytes)
    return param_bytes - unread, max(0, param_elements - unread // table.element_size())


def is_parameter(t: Tensor) -> bool:
    """``isinstance(t, nn.Parameter)`` without Parameter's Python ``__instancecheck__``."""
    return issubclass(type(t), nn.Parameter) or getattr(t, "_is_param", False)


class Existing:
    """Storages that existed before an op: its inputs (read or not) and every parameter."""

    __slots__ = ("inputs", "resident")

    def __init__(self, inputs: set[int | None], resident: set[int]) -> None:
        self.inputs, self.resident = inputs, resident

    def __contains__(self, key: object) -> bool:
        return key in self.inputs or key in self.resident


class _Everything:
    """A set that contains every key: views never allocate."""

    def __contains__(self, key: object) -> bool:
        return True


#: The storages that existed before a view: all of them (views never allocate).
EVERYTHING = _Everything()


def input_keys(args: tuple, kwargs: dict) -> set[int | None]:
    """The storages of every tensor in ``args`` and ``kwargs``."""
    return {storage_key(t) for t in iter_tensors((args, kwargs))}


def bytes_written(info: Any, args: tuple, kwargs: dict, out_tensors: list[Tensor]) -> tuple[int, int]:
    """(bytes, elements) written: every output and mutated argument, each tensor once."""
    targets = out_tensors
    if info.mutated_positions or info.mutated_names:
        mutated = iter_tensors([args[i] for i in info.mutated_positions if i < len(args)]
                               + [kwargs.get(k) for k in info.mutated_names])
        # an op that returns only its mutated arguments (``copy_``, ``add_``, ``out=``) writes them once,
        # even where a fake kernel returns a new object for a real tensor it mutated
        targets = mutated if returns_only_mutated(info.func) else out_tensors + mutated
    seen: set[int] = set()
    nbytes = elements = 0
    for t in targets:
        if id(t) not in seen:
            seen.add(id(t))
            nbytes += stored_bytes(t)
            elements += t.numel()
    return nbytes, elements
