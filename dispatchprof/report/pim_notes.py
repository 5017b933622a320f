"""Where a PIM system's time goes, as a note under a generation's device tables.

For a scenario whose devices include one with a ``pim`` mapping (dispatchprof.sim.pim), the
prefill + decode time splits into: the time of ops whose units' compute was the longer side
(DPU compute), of ops whose bank memory (MRAM) was, and the rest: host transfers and the exchanges
between units that go through the host (dispatchprof.sim.pim_timing), plus any host time the
timeline adds. Seconds come from the scenario's `PhaseTiming` sums, so the three parts add up to
its total time.
"""

from __future__ import annotations

from typing import Sequence

from dispatchprof import units
from dispatchprof.results.generation import DeviceGeneration
from dispatchprof.sim.device import Device


def pim_time_note(d: DeviceGeneration, devices: Sequence[Device]) -> str:
    """'NAME: where the time goes ...' for a PIM scenario; '' for any other."""
    if not any(dev.pim is not None for dev in devices):
        return ""
    total = d.total_time_s
    compute = d.prefill.compute_bound_s + d.decode.compute_bound_s
    memory = d.prefill.memory_bound_s + d.decode.memory_bound_s
    rest = max(0.0, total - compute - memory)
    parts = ", ".join(f"{label} {units.seconds(s)} ({units.percent(s, total)})" for label, s in
                      (("DPU compute", compute), ("MRAM", memory),
                       ("host transfers and exchanges between DPUs through the host", rest)))
    return f"{d.name}: where the time goes (prefill + decode): {parts}"
