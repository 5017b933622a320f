"""A Chrome / Perfetto trace of a simulated timeline (JSON Trace Event Format).

One process per device (per device of a tensor-parallel group: "H100-SXM #0", "#1", ...), one
track in it, and a "host" process when the runtime gives the host work (its launch slices). On
each device track: phase slices (prefill, decode, ...) hold module slices, which hold op slices;
each op slice starts when the host/device timeline (dispatchprof.sim.timeline) starts it and lasts
its simulated time (compute or memory, plus overhead, transfers and collectives, in its args). A
counter per device plots the cumulative energy (dynamic + static power x time), "energy (J)"; where
the device's profile could not source its static power the counter is the dynamic part alone, named
"dynamic energy (J), static UNKNOWN", and where it could not source its dynamic energy there is no
counter (dispatchprof.sim.energy_known: never a silent zero). Times are kept in
integer nanoseconds so that every slice nests exactly (trace timestamps are microseconds: ns / 1000).
"""

from __future__ import annotations

import json
import os
from typing import Any

from dispatchprof.results.files import write_atomic
from dispatchprof.sim.energy_known import UNKNOWN, known_energy
from dispatchprof.sim.simulate import Simulation
from dispatchprof.sim.timeline import schedule


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
    tracks = _device_tracks(sim)
    pids = {track: i + 1 for i, track in enumerate(t for group in tracks.values() for t in group)}
    events: list[dict[str, Any]] = []
    for track, pid in pids.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 1, "args": {"name": track}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "args": {"name": "ops"}})
    host_pid = len(pids) + 1
    with_host = any(t.t_host for t in sim.ops)
    if with_host:
        events.append({"ph": "M", "name": "process_name", "pid": host_pid, "tid": 1, "args": {"name": "host"}})
        events.append({"ph": "M", "name": "thread_name", "pid": host_pid, "tid": 1, "args": {"name": "launches"}})
    open_slices: dict[str, list[tuple[str, int, str]]] = {n: [] for n in pids}   # (name, start, cat)
    last_end: dict[str, int] = dict.fromkeys(pids, 0)
    dynamic: dict[str, float] = dict.fromkeys(pids, 0.0)
    static = {d.name: d.static_power_w for d in sim.placement.devices}
    known = {d.name: known_energy([d]) for d in sim.placement.devices}
    records, parents = sim.records, dict(sim.parents)
    for timing, (issued_s, start_s, end_s) in zip(sim.ops, timeline_of(sim.ops, sim.step_starts)):
        r = records[timing.record]
        start_ns, end_ns = round(start_s * 1e9), round(end_s * 1e9)
        if with_host and timing.t_host:
            events.append(_slice(f"launch {r.op}", "host", host_pid, round((issued_s - timing.t_host) * 1e9),
                                 round(issued_s * 1e9)))
        wanted = [(f"phase: {r.phase}", "phase")] + [(s, "module") for s in _ancestors(r.scope, parents)]
        for track in tracks[timing.device]:
            stack = open_slices[track]
            keep = 0
            while keep < len(stack) and keep < len(wanted) and stack[keep][0] == wanted[keep][0]:
                keep += 1
            while len(stack) > keep:
                name, began, cat = stack.pop()
                events.append(_slice(name, cat, pids[track], began, last_end[track]))
            for name, cat in wanted[keep:]:
                stack.append((name, start_ns, cat))
            events.append(_slice(r.op, "op", pids[track], start_ns, end_ns, {
                "scope": r.scope or "(root)", "bound": timing.bound, "compute_ns": timing.t_compute * 1e9,
                "memory_ns": timing.t_memory * 1e9, "transfer_ns": timing.t_transfer * 1e9,
                "comm_ns": timing.t_comm * 1e9, "flops": r.cost.flops, "bytes": timing.traffic_bytes}))
            dynamic[track] += timing.dynamic_j
            last_end[track] = end_ns
            part = known[_device_of(track)]
            if not part.dynamic:
                continue                    # nothing known to plot
            joules = dynamic[track] + (static[_device_of(track)] * end_s if part.static else 0.0)  # static drawn all along
            name = "energy (J)" if part.static else f"dynamic energy (J), static {UNKNOWN}"
            events.append({"ph": "C", "name": name, "pid": pids[track], "tid": 1, "ts": end_ns / 1000,
                           "args": {"J": joules}})
    for track, stack in open_slices.items():
        while stack:
            name, began, cat = stack.pop()
            events.append(_slice(name, cat, pids[track], began, last_end[track]))
    return events


def _device_tracks(sim: Simulation) -> dict[str, list[str]]:
    """device -> its tracks: one, or one per device of a tensor-parallel group ("H100-SXM #1")."""
    if sim.tp == 1:
        return {name: [name] for name in sim.devices}
    return {name: [f"{name} #{k}" for k in range(sim.tp)] for name in sim.devices}


def _device_of(track: str) -> str:
    return track.split(" #", 1)[0]


def timeline_of(ops, step_starts) -> list[tuple[float, float, float]]:
    """(issued, start, end) of every op in seconds from the run's start: each step's schedule
    (dispatchprof.sim.timeline) after the previous step's end."""
    cuts = sorted(set(step_starts) | {0, len(ops)})
    out, offset = [], 0.0
    for a, b in zip(cuts, cuts[1:]):
        steps = schedule(ops[a:b])
        out.extend((i + offset, s + offset, e + offset) for i, s, e in steps)
        if steps:
            offset += steps[-1][2]
    return out


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
