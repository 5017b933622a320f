"""The counter's residual cost per gap, calibrated once per process on code of known cost.

What the host clock measures between two ops includes a little of the counter's own work that no
timestamp can exclude: the counter's torch-function mode that every torch call passes through,
torch entering the Python dispatch key, and the slow path ``nn.Module.__call__`` takes while global
hooks are installed. It is calibrated on two loops whose model time is known (one-element CPU
tensors: a meta op runs torch's Python meta kernels and is slow):

- ``x + x`` repeated n times: the model code between ops is one loop step (a few tens of ns);
  the median raw gap of the counted loop is the op floor (so this loop's model time reads 0);
- ``one(x)`` repeated, ``one`` a module whose forward is ``x + x``: its genuine cost over the bare
  loop is the module call, measured uncounted (t_module - t_bare per step, minimum over repeats);
  each step's counted record holds one op gap and two hook gaps, so
  ``hook_floor = ((gap_module - gap_bare) - (t_module - t_bare)) / 2``, clamped at 0.

Medians over ``repeats`` runs of n steps each (the counting machine may be shared and noisy).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from dispatchprof.count.hostclock import now_ns

_FLOORS: tuple[int, int] | None = None


class _Box:
    def __init__(self) -> None:
        self.value = 0


def _step(box: _Box, table: dict, i: int) -> int:
    box.value += i & 7
    table[i & 15] = box.value
    return len(table)


def _loop(n: int) -> int:
    """The calibration loop: attribute reads and writes, a dict store and a call per iteration,
    the mix of a model's Python between ops."""
    box, table, total = _Box(), {}, 0
    for i in range(n):
        total += _step(box, table, i)
    return total


def python_loop_ns(iterations: int = 2000, repeats: int = 5) -> float:
    """ns per iteration of the calibration loop on this machine now (the host clock's timer): the
    median of ``repeats`` runs (a few ms), measured at the start of every count, so that a
    shared machine's changing speed divides out of OpRecord.host_loops."""
    return measure_loop_ns(iterations, repeats)


def measure_loop_ns(iterations: int = 4000, repeats: int = 5) -> float:
    """One measurement of the calibration loop's ns per iteration (median of ``repeats``)."""
    _loop(1000)
    times = []
    for _ in range(repeats):
        t = now_ns()
        _loop(iterations)
        times.append((now_ns() - t) / iterations)
    return statistics.median(times)


def counter_floors(counter: Callable[..., Any]) -> tuple[int, int]:
    """(op floor, hook floor) in ns, calibrated at the first call in this process with ``counter``
    (the OpCounter class, passed in by it: this module sits below the counter)."""
    global _FLOORS
    if _FLOORS is None:
        _FLOORS = calibrate_floors(counter)
    return _FLOORS


def calibrate_floors(counter: Callable[..., Any], steps: int = 100, repeats: int = 3) -> tuple[int, int]:
    """(op floor, hook floor) in ns, counted with ``counter`` (OpCounter): see the module docstring."""
    import torch
    from torch import nn

    class One(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + x

    one = One()
    x = torch.ones(1)

    def bare() -> None:
        for _ in range(steps):
            x + x

    def module() -> None:
        for _ in range(steps):
            one(x)

    def counted_gap(body: Callable[[], None]) -> float:
        with torch.no_grad(), counter(host_time="raw") as c:
            body()
        return statistics.median(r.host_loops for r in c.profile.records[1:]) * c.profile.host_loop_ns

    def plain(body: Callable[[], None]) -> float:
        with torch.no_grad():
            t = now_ns()
            body()
            return (now_ns() - t) / steps

    bare()
    module()
    gap_bare = statistics.median(counted_gap(bare) for _ in range(repeats))
    gap_module = statistics.median(counted_gap(module) for _ in range(repeats))
    t_bare = min(plain(bare) for _ in range(repeats))
    t_module = min(plain(module) for _ in range(repeats))
    hook = ((gap_module - gap_bare) - (t_module - t_bare)) / 2
    return int(gap_bare), max(0, int(hook))
