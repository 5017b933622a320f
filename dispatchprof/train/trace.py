"""A Perfetto (Chrome trace JSON) timeline of one training step on one GPU of the slowest pipeline
stage: the step's parts (dispatchprof.train.step.TrainingResult.breakdown) laid out in the order
the schedule runs them. Times are microseconds, as the format wants.

Track "compute": each micro-batch's forward, then its backward (recompute first inside it), the
micro-batches one after another, then the optimizer. Tracks "tp comm", "cp comm" and "pp p2p":
each micro-batch's exposed share of them, after its backward. Track "bubble": the pipeline's idle
time, half before the first micro-batch (warm-up) and half after the last (cool-down). Track
"dp comm": the exposed data-parallel communication before the optimizer. The slices of all tracks
end at the step time. A schematic of where the time goes, not a per-kernel trace.
"""

from __future__ import annotations

import json
from typing import Any

from dispatchprof.train.step import TrainingResult

TRACKS = ("compute", "tp comm", "cp comm", "pp p2p", "bubble", "dp comm", "host")


def training_trace(r: TrainingResult) -> dict[str, Any]:
    """The trace events of one step (module docstring)."""
    b, m = r.breakdown, r.layout.grad_accum
    fwd = r.counted.phases["forward"]
    bwd = r.counted.phases["backward"]
    fwd_share = (fwd.layer_s + fwd.other_s) / max(fwd.layer_s + fwd.other_s + bwd.layer_s + bwd.other_s, 1e-30)
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}]
    events += [{"ph": "M", "name": "thread_name", "pid": 0, "tid": i, "args": {"name": t}} for i, t in enumerate(TRACKS)]

    def put(track: str, name: str, start: float, dur: float) -> float:
        if dur > 0:
            events.append({"ph": "X", "pid": 0, "tid": TRACKS.index(track), "name": name, "ts": start * 1e6,
                           "dur": dur * 1e6})
        return start + dur

    t = put("bubble", "warm-up", 0.0, b["bubble"] / 2)
    per = {k: b[k] / m for k in ("compute", "recompute", "tp comm", "cp comm", "pp p2p")}
    for i in range(m):
        t = put("compute", f"forward {i}", t, per["compute"] * fwd_share)
        t = put("compute", f"recompute {i}", t, per["recompute"])
        t = put("compute", f"backward {i}", t, per["compute"] * (1 - fwd_share))
        for track in ("tp comm", "cp comm", "pp p2p"):
            t = put(track, f"{track} {i}", t, per[track])
    t = put("bubble", "cool-down", t, b["bubble"] / 2)
    t = put("dp comm", "exposed", t, b["dp comm exposed"])
    t = put("compute", "optimizer", t, b["optimizer"])
    put("host", "host", t, b["host"])
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def trace_json(r: TrainingResult) -> str:
    return json.dumps(training_trace(r)) + "\n"
