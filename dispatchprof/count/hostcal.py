"""The counter's residual cost per gap, calibrated once per process on code of known cost.

What the host clock measures between two ops includes a little of the counter's own work that no
timestamp can exclude: the counter's torch-function mode that every torch call passes through,
torch entering the Python dispatch key, and the slow path ``nn.Module.__call__`` takes while global
hooks are installed. It is calibrated on two loops whose model time is known (one-element CPU
tensors: a meta op runs torch's Python meta kernels and is slow):

- ``x + x`` repeated n times: the model code between ops is one loop step (a few tens of ns);
  the median raw gap of the counted loop is the op floor (so this loop's model time reads 0).
  It is calibrated for each kind of tensor a count can run on (``OP_FLOOR_KINDS``: real CPU, fake
  and meta): an op on a fake or meta tensor returns through more of torch's Python (the fake
  tensor's wrapping, the meta kernels), 5-15 us more per op than on a CPU tensor on the project's
  machine, and a count takes the floor of the kind its first op runs on (`HostClock.use_kind`).
  The CPU floor is always calibrated, the model's own kind too when it is another;
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

#: The tensor kinds an op floor can be calibrated for (dispatchprof.count.recorder's tensor kinds).
OP_FLOOR_KINDS = ("real", "fake", "meta")
_OP_FLOORS: dict[str, int] = {}
_HOOK_FLOOR: int | None = None


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


def counter_floors(counter: Callable[..., Any], kind: str = "real") -> tuple[dict[str, int], int]:
    """(op floor by tensor kind, hook floor) in ns: the CPU floor and that of ``kind`` (the
    model's tensors), each calibrated at its first need in this process with ``counter`` (the
    OpCounter class, passed in by it: this module sits below the counter)."""
    global _HOOK_FLOOR
    for k in dict.fromkeys(("real", kind)):
        if k not in _OP_FLOORS:
            _OP_FLOORS[k] = calibrate_op_floor(counter, k)
    if _HOOK_FLOOR is None:
        _HOOK_FLOOR = calibrate_hook_floor(counter, _OP_FLOORS["real"])
    return dict(_OP_FLOORS), _HOOK_FLOOR


def _one(kind: str) -> Any:
    """A one-element tensor of ``kind``: "real" (CPU), "fake" or "meta"."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    if kind not in OP_FLOOR_KINDS:
        raise ValueError(f"unknown tensor kind {kind!r}; allowed: {', '.join(OP_FLOOR_KINDS)}")
    if kind == "fake":
        with FakeTensorMode():
            return torch.ones(1)
    return torch.ones(1, device="meta" if kind == "meta" else "cpu")


def _counted_gap_ns(counter: Callable[..., Any], body: Callable[[], None]) -> float:
    """The median raw gap (ns) between the ops ``body`` runs, counted with host_time="raw"."""
    import torch

    with torch.no_grad(), counter(host_time="raw") as c:
        body()
    return statistics.median(r.host_loops for r in c.profile.records[1:]) * c.profile.host_loop_ns


def _plain_ns(body: Callable[[], None], steps: int) -> float:
    """ns per step of ``body`` run uncounted."""
    import torch

    with torch.no_grad():
        t = now_ns()
        body()
        return (now_ns() - t) / steps


def calibrate_op_floor(counter: Callable[..., Any], kind: str = "real", steps: int = 100, repeats: int = 3) -> int:
    """The op floor (ns) of tensors of ``kind``: the median counted gap of ``x + x`` repeated
    (module docstring)."""
    x = _one(kind)

    def bare() -> None:
        for _ in range(steps):
            x + x

    bare()
    return int(statistics.median(_counted_gap_ns(counter, bare) for _ in range(repeats)))


def calibrate_hook_floor(counter: Callable[..., Any], op_floor_ns: int, steps: int = 100, repeats: int = 3) -> int:
    """The hook floor (ns), on CPU tensors whose op floor is ``op_floor_ns`` (module docstring):
    its uncounted reference, the module call's own cost, is not measurable on fake tensors, whose
    ops are slower than it."""
    from torch import nn

    class One(nn.Module):
        def forward(self, x: Any) -> Any:
            return x + x

    one, x = One(), _one("real")

    def bare() -> None:
        for _ in range(steps):
            x + x

    def module() -> None:
        for _ in range(steps):
            one(x)

    bare()
    module()
    gap_module = statistics.median(_counted_gap_ns(counter, module) for _ in range(repeats))
    t_bare = min(_plain_ns(bare, steps) for _ in range(repeats))
    t_module = min(_plain_ns(module, steps) for _ in range(repeats))
    return max(0, int(((gap_module - op_floor_ns) - (t_module - t_bare)) / 2))
