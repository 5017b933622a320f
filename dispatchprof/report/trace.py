"""A Chrome / Perfetto trace of a simulated timeline (JSON Trace Event Format).

One process per device, one track in it. On each track: phase slices (prefill, decode, ...)
hold module slices, which hold op slices; each op slice lasts its simulated time (compute or
memory, plus overhead and transfers, in its args). A counter per device plots the cumulative
energy. Ops run one after another: the clock is the running sum of op times, kept in integer
nanoseconds so that every slice nests exactly (trace timestamps are microseconds: ns / 1000).
"""

from __future__ import annotations

import json
import os
from typing import Any

from dispatchprof.results.files import write_atomic
from dispatchprof.sim.simulate import Simulation


def _ancestors(scope: str, parents: dict[str, str | None]) -> list[str]:
    """Root-first chain of scopes containing ``scope`` (the root "" excluded)."""
    chain, seen = [], set()
    while scope and scope not in seen:
        seen.add(scope)
        chain.append(scope)
        scope = parents.get(scope) or ""
    return chain[::-1]


def trace_events(sim: Simulation) -> list[dict[str, Any]]:
    """The trace events of ``sim`` (see the module docstring)."""
    pids = {name: i + 1 for i, name in enumerate(sim.devices)}
    events: list[dict[str, Any]] = []
    for name, pid in pids.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 1, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "ops"}})
    open_slices: dict[str, list[tuple[str, int, str]]] = {n: [] for n in pids}   # (name, start, cat)
    last_end: dict[str, int] = dict.fromkeys(pids, 0)
    energy: dict[str, float] = dict.fromkeys(pids, 0.0)
    clock_s, start_ns = 0.0, 0
    records, parents = sim.records, dict(sim.parents)
    for timing in sim.ops:
        r = records[timing.record]
        dev = timing.device
        clock_s += timing.time_s
        end_ns = round(clock_s * 1e9)
        wanted = [(f"phase: {r.phase}", "phase")] + [(s, "module") for s in _ancestors(r.scope, parents)]
        stack = open_slices[dev]
        keep = 0
        while keep < len(stack) and keep < len(wanted) and stack[keep][0] == wanted[keep][0]:
            keep += 1
        while len(stack) > keep:
            name, began, cat = stack.pop()
            events.append(_slice(name, cat, pids[dev], began, last_end[dev]))
        for name, cat in wanted[keep:]:
            stack.append((name, start_ns, cat))
        events.append(_slice(r.op, "op", pids[dev], start_ns, end_ns, {
            "scope": r.scope or "(root)", "bound": timing.bound, "compute_ns": timing.t_compute * 1e9,
            "memory_ns": timing.t_memory * 1e9, "transfer_ns": timing.t_transfer * 1e9,
            "flops": r.cost.flops, "bytes": timing.traffic_bytes}))
        energy[dev] += timing.energy_j
        events.append({"ph": "C", "name": "energy (J)", "pid": pids[dev], "tid": 1, "ts": end_ns / 1000,
                       "args": {"J": energy[dev]}})
        last_end[dev] = end_ns
        start_ns = end_ns
    for dev, stack in open_slices.items():
        while stack:
            name, began, cat = stack.pop()
            events.append(_slice(name, cat, pids[dev], began, last_end[dev]))
    return events


def _slice(name: str, cat: str, pid: int, start_ns: int, end_ns: int, args: dict | None = None) -> dict:
    event = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": 1,
             "ts": start_ns / 1000, "dur": (end_ns - start_ns) / 1000}
    if args:
        event["args"] = args
    return event


def write_trace(sim: Simulation, path: str | os.PathLike) -> str:
    """Write ``sim``'s timeline as a Chrome/Perfetto JSON trace (atomically)."""
    doc = {"traceEvents": trace_events(sim), "displayTimeUnit": "ns",
           "otherData": {"producer": "dispatchprof", "simulation": sim.name}}
    return write_atomic(path, json.dumps(doc))
