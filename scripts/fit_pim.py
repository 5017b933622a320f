"""Fit the UPMEM profile's host-transfer, bank and int32-multiply figures on the FIT rows of
scripts/data/prim_rows.csv (never on held-out rows), and print them for devices/upmem.yaml.

    python scripts/fit_pim.py

Rules (each figure a median over the fit rows it names, so one odd run moves it little):

    host_to_unit_gb_per_s        bytes sent / CPU-DPU time, rows on one DPU (a transfer to one DPU
                                 is limited by that DPU's own figure, pim_timing.scatter_s); the
                                 one-DPU rows take part in this fit only
    host_to_rank_gb_per_s        bytes sent / CPU-DPU time, rows on one rank (2 .. 64 DPUs)
    host_to_units_max_gb_per_s   the same, rows on more than one rank (the host's ceiling)
    rank_to_host_gb_per_s        bytes read back / DPU-CPU time, one-rank rows read in parallel
                                 with DPU-CPU >= 10 ms (smaller reads are latency, not bandwidth)
    units_to_host_max_gb_per_s   the same, rows on more than one rank
    unit_to_host_gb_per_s,       least squares of t = bytes / B + DPUs * L over the rows read back
    serial_transfer_us           one DPU after another (SEL, UNI): B and L
    mram_gb_per_s                shipped figure x (the shipped model's summed bank time / measured
                                 DPU time), rows other than GEMV: the rate at which a DPU program
                                 streams its bank, its loop included
    unit_mops.mul.int32          GEMV rows: multiplies per DPU / (measured DPU time - the time of
                                 its additions at the shipped int32 add rate)

Every figure but host_to_unit_gb_per_s is fitted on the rows on more than one DPU (the
one-DPU rows were added after those figures were fitted; they leave them as they were).
Bytes sent and read back are each workload's (scripts/prim_workloads.py); times are the rows'.
TRNS rows take part in none of these fits: its measured CPU-DPU part is mostly the host's own
rearrangement of the matrix into per-DPU buffers (vPIM's TRNS host/app.c step 1), not a transfer,
its read-back is one of many rounds, and its DPU time is its emulated index arithmetic, not a
streaming loop (`STREAMING`).
"""

from __future__ import annotations

import statistics
import sys

import prim_workloads
import validate_pim as vp

from dispatchprof import OpCounter
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.pim_timing import on_units

ONE_RANK = 64            # DPUs of one rank (devices/upmem.yaml: units / ranks)
#: Workloads whose fit rows the figures are fitted on (module docstring: not TRNS).
FITTED_ON = ("VA", "RED", "SCAN-SSA", "SCAN-RSS", "SEL", "UNI", "GEMV")


def fit_rows() -> list[dict[str, str]]:
    """The fit rows of the workloads in FITTED_ON."""
    return [r for r in vp.read_rows() if r["split"] == "fit" and r["workload"] in FITTED_ON]


def _bank_ratio(row: dict[str, str]) -> float:
    """The shipped model's summed bank time of ``row``'s ops over its measured DPU time."""
    dpus = int(row["dpus"])
    device = on_units(load_device(vp.PROFILE), dpus)
    w = prim_workloads.workload(row["workload"], dpus, vp.size_of(row["size"]))
    inputs = w.inputs()
    with OpCounter(devices=device, runtime=vp.RUNTIME) as counter:
        w.module(*inputs)
    return sum(t.t_memory for t in counter.simulated(device.name).ops) / (float(row["dpu_ms"]) * 1e-3)


def _rate(rows: list[dict[str, str]], nbytes: str, part: str) -> float:
    """Median of bytes / seconds of ``part`` over ``rows`` (GB/s)."""
    rates = []
    for row in rows:
        w = prim_workloads.workload(row["workload"], int(row["dpus"]), vp.size_of(row["size"]))
        rates.append(getattr(w, nbytes) / (float(row[part]) * 1e-3) / 1e9)
    return statistics.median(rates)


def _serial(rows: list[dict[str, str]]) -> tuple[float, float]:
    """(GB/s, us per DPU) of t = bytes / B + dpus * L, least squares over ``rows``."""
    xs, ys, ts = [], [], []
    for row in rows:
        w = prim_workloads.workload(row["workload"], int(row["dpus"]), vp.size_of(row["size"]))
        xs.append(w.bytes_out)
        ys.append(int(row["dpus"]))
        ts.append(float(row["dpu_cpu_ms"]) * 1e-3)
    sxx, sxy, syy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys)), sum(y * y for y in ys)
    sxt, syt = sum(x * t for x, t in zip(xs, ts)), sum(y * t for y, t in zip(ys, ts))
    det = sxx * syy - sxy * sxy
    inv_b, lat = (sxt * syy - syt * sxy) / det, (syt * sxx - sxt * sxy) / det
    return 1 / inv_b / 1e9, lat * 1e6


def _mul_int32(rows: list[dict[str, str]]) -> float:
    """Median MOPS of one DPU's int32 multiply over the GEMV rows."""
    spec = load_device(vp.PROFILE).pim
    rates = []
    for row in rows:
        size, dpus = vp.size_of(row["size"]), int(row["dpus"])
        mult, add = size["m"] * size["n"] / dpus, size["m"] * (size["n"] - 1) / dpus   # y = A x, per DPU
        mul_s = float(row["dpu_ms"]) * 1e-3 - add / spec.ops_per_s("add", "int32")
        rates.append(mult / mul_s / 1e6)
    return statistics.median(rates)


def fitted() -> dict[str, float]:
    """Every fitted figure, by its name in devices/upmem.yaml's ``pim`` mapping."""
    single = [r for r in fit_rows() if int(r["dpus"]) == 1]
    rows = [r for r in fit_rows() if int(r["dpus"]) > 1]
    one = [r for r in rows if int(r["dpus"]) <= ONE_RANK]
    many = [r for r in rows if int(r["dpus"]) > ONE_RANK]
    serial = [r for r in rows if prim_workloads.workload(r["workload"], 1, vp.size_of(r["size"])).serial_out]
    read = [r for r in rows if r not in serial and float(r["dpu_cpu_ms"]) >= 10]
    b, lat = _serial(serial)
    mram = load_device(vp.PROFILE).pim.mram_gb_per_s
    return {
        "host_to_unit_gb_per_s": _rate(single, "bytes_in", "cpu_dpu_ms"),
        "host_to_rank_gb_per_s": _rate(one, "bytes_in", "cpu_dpu_ms"),
        "host_to_units_max_gb_per_s": _rate(many, "bytes_in", "cpu_dpu_ms"),
        "rank_to_host_gb_per_s": _rate([r for r in read if r in one], "bytes_out", "dpu_cpu_ms"),
        "units_to_host_max_gb_per_s": _rate([r for r in read if r in many], "bytes_out", "dpu_cpu_ms"),
        "unit_to_host_gb_per_s": b,
        "serial_transfer_us": lat,
        "mram_gb_per_s": mram * statistics.median(_bank_ratio(r) for r in rows if r["workload"] != "GEMV"),
        "unit_mops.mul.int32": _mul_int32([r for r in rows if r["workload"] == "GEMV"]),
    }


def main() -> int:
    rows = fit_rows()
    print(f"fitted on the {len(rows)} fit rows of {vp.ROWS} ({', '.join(FITTED_ON)}):")
    for name, value in fitted().items():
        print(f"  {name:28} {value:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
