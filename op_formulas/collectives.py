"""Collective communication (torch.distributed's ``c10d`` ops), per process.

With n processes, S the bytes and E the elements of this process's tensor(s), and the
reduction work of a collective split evenly over the ranks (rank r takes
``total*(r+1)//n - total*r//n``, so the ranks add up exactly):

- all_reduce: ADD = this rank's share of (n-1)*E; sends 2*(n-1)*S/n bytes (ring);
- all_gather: sends (n-1)*S_in; reduce_scatter: ADD = (n-1)*E_out, sends (n-1)*S_in/n;
- broadcast: sends S; reduce: the root adds (n-1)*E, every other rank sends S;
- all_to_all: sends (n-1)*S_in/n; gather: non-roots send S_in; scatter: the root sends (n-1)*S_in/n;
- send: sends S; recv, barrier: nothing.
Local memory traffic follows the generic rule. The counter passes ``world_size`` and ``rank``.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import formula

c10d = torch.ops.c10d


def _flat(value: Any) -> list[TensorMeta]:
    if isinstance(value, TensorMeta):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    return []


def _bytes(value: Any) -> int:
    return sum(t.nbytes for t in _flat(value))


def _elements(value: Any) -> int:
    return sum(t.numel for t in _flat(value))


def share(total: int, world_size: int, rank: int) -> int:
    """Rank ``rank``'s share of ``total`` split evenly over ``world_size`` ranks."""
    return total * (rank + 1) // world_size - total * rank // world_size


@formula(c10d.allreduce_, c10d.allreduce_coalesced_)
def all_reduce(tensors: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0, **kwargs: Any) -> Cost:
    """ADD: share of (n-1)*E; sends 2*(n-1)*S/n bytes."""
    n = world_size
    return Cost(add=share((n - 1) * _elements(tensors), n, rank), comm_bytes=2 * (n - 1) * _bytes(tensors) // n)


@formula(c10d.allgather_, c10d._allgather_base_, c10d.allgather_into_tensor_coalesced_)
def all_gather(outputs: Any, inputs: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0,
               **kwargs: Any) -> Cost:
    """Sends (n-1)*S_in bytes; no arithmetic."""
    return Cost(comm_bytes=(world_size - 1) * _bytes(inputs))


@formula(c10d.reduce_scatter_, c10d._reduce_scatter_base_, c10d.reduce_scatter_tensor_coalesced_)
def reduce_scatter(outputs: Any, inputs: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0,
                   **kwargs: Any) -> Cost:
    """ADD = (n-1)*E_out; sends (n-1)*S_in/n bytes."""
    n = world_size
    return Cost(add=(n - 1) * _elements(outputs), comm_bytes=(n - 1) * _bytes(inputs) // n)


@formula(c10d.broadcast_)
def broadcast(tensors: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0, **kwargs: Any) -> Cost:
    """Sends S bytes (a pipelined broadcast: every rank forwards the tensor once)."""
    return Cost(comm_bytes=_bytes(tensors) if world_size > 1 else 0)


@formula(c10d.reduce_)
def reduce(tensors: Any, pg: Any, op: Any, root_rank: int, *args: Any, result: Any, world_size: int = 1,
           rank: int = 0, **kwargs: Any) -> Cost:
    """The root adds (n-1)*E; every other rank sends S bytes."""
    if rank == root_rank:
        return Cost(add=(world_size - 1) * _elements(tensors))
    return Cost(comm_bytes=_bytes(tensors))


@formula(c10d.alltoall_, c10d.alltoall_base_)
def all_to_all(outputs: Any, inputs: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0,
               **kwargs: Any) -> Cost:
    """Sends (n-1)*S_in/n bytes."""
    return Cost(comm_bytes=(world_size - 1) * _bytes(inputs) // world_size)


@formula(c10d.gather_)
def gather(outputs: Any, inputs: Any, pg: Any, root_rank: int, *args: Any, result: Any, world_size: int = 1,
           rank: int = 0, **kwargs: Any) -> Cost:
    """Non-roots send S_in bytes."""
    return Cost(comm_bytes=0 if rank == root_rank else _bytes(inputs))


@formula(c10d.scatter_)
def scatter(outputs: Any, inputs: Any, pg: Any, root_rank: int, *args: Any, result: Any, world_size: int = 1,
            rank: int = 0, **kwargs: Any) -> Cost:
    """The root sends (n-1)*S_in/n bytes."""
    return Cost(comm_bytes=(world_size - 1) * _bytes(inputs) // world_size if rank == root_rank else 0)


@formula(c10d.send)
def send(tensors: Any, *args: Any, result: Any, world_size: int = 1, rank: int = 0, **kwargs: Any) -> Cost:
    """Sends S bytes."""
    return Cost(comm_bytes=_bytes(tensors))


@formula(c10d.recv_, c10d.recv_any_source_, c10d.barrier)
def receive(*args: Any, result: Any, world_size: int = 1, rank: int = 0, **kwargs: Any) -> Cost:
    """Receiving and waiting send nothing."""
    return Cost()


COLLECTIVES = frozenset({c10d.allreduce_, c10d.allreduce_coalesced_, c10d.allgather_, c10d._allgather_base_,
                         c10d.allgather_into_tensor_coalesced_, c10d.reduce_scatter_, c10d._reduce_scatter_base_,
                         c10d.reduce_scatter_tensor_coalesced_, c10d.broadcast_, c10d.reduce_, c10d.alltoall_,
                         c10d.alltoall_base_, c10d.gather_, c10d.scatter_, c10d.send, c10d.recv_,
                         c10d.recv_any_source_, c10d.barrier})
