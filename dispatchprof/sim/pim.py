"""A PIM system's organisation: the `PimSpec` a device profile's ``pim`` mapping describes, and its
strict parser.

A device without ``pim`` is timed by the roofline alone (dispatchprof.sim.timing). With it, its
ops are timed per unit (dispatchprof.sim.pim_timing). Units: MOPS are 1e6 operations per second of
ONE unit (a UPMEM DPU, a bank's PIM unit), GB/s are 1e9 bytes/s, MHz 1e6 cycles/s.

Fields of ``pim`` (required unless a default is given):

    units                  processing units of the system as built (DPUs)              int > 0
    ranks                  groups of units the host transfers to at once; units % ranks == 0
    disabled_units         units that do not work and are never used (default 0); the
                           system uses units - disabled_units
    clock_mhz              the units' clock in this system
    measured_mhz           the clock the per-unit figures below were measured at (default clock_mhz);
                           every per-unit rate is scaled by clock_mhz / measured_mhz
    unit_mops              {op class: {dtype: MOPS of one unit}}; op classes: add, mul, div
    tasklets               hardware threads a kernel runs per unit (default pipeline_tasklets)
    max_tasklets           hardware threads a unit has
    pipeline_tasklets      threads needed to fill the pipeline: with t fewer, rates scale by
                           t / pipeline_tasklets
    mram_gb_per_s          sustained bandwidth of one unit's memory bank (DMA to its scratchpad)
    host_to_rank_gb_per_s  parallel host -> units transfer, per rank (ranks add up)
    rank_to_host_gb_per_s  parallel units -> host transfer, per rank
    broadcast_to_rank_gb_per_s  the same bytes to every unit of a rank (default host_to_rank_gb_per_s),
                           counted as bytes written into the rank's units
    host_to_unit_gb_per_s  serial transfer to one unit (default: none; only the validation uses it)
    unit_to_host_gb_per_s  serial transfer from one unit
    host_to_units_max_gb_per_s  the most the host sends to the units in parallel, all ranks together
                           (default: none, the ranks' figures add up without a cap)
    units_to_host_max_gb_per_s  the most the host reads from the units in parallel (default: none)
    serial_transfer_us     fixed cost of each serial transfer to or from one unit (default 0)
    host_concurrent        true: host transfers overlap the units' work; false (UPMEM): they block
    sources                {field: where it comes from}

Op classes map counted categories: ADD and CMP -> add, MULT -> mul, DIV, SQRT, EXP and OTHER ->
div (no published rate for a square root or an exponential exists for UPMEM: one emulated division
each is the charge, as the docs say).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from dispatchprof.errors import DeviceProfileError

OP_CLASSES = ("add", "mul", "div")
#: Counted category -> op class whose per-unit rate times it.
CLASS_OF = {"add": "add", "cmp": "add", "mult": "mul", "div": "div", "sqrt": "div", "exp": "div", "other": "div"}
PIM_DTYPES = ("int8", "int32", "int64", "fp16", "bf16", "fp32", "fp64")

_INT = ("units", "ranks", "tasklets", "max_tasklets", "pipeline_tasklets")
_COUNT = ("disabled_units",)
_RATE = ("clock_mhz", "measured_mhz", "mram_gb_per_s", "host_to_rank_gb_per_s", "rank_to_host_gb_per_s",
         "broadcast_to_rank_gb_per_s", "host_to_unit_gb_per_s", "unit_to_host_gb_per_s",
         "host_to_units_max_gb_per_s", "units_to_host_max_gb_per_s", "serial_transfer_us")
_REQUIRED = ("units", "ranks", "clock_mhz", "unit_mops", "max_tasklets", "pipeline_tasklets", "mram_gb_per_s",
             "host_to_rank_gb_per_s", "rank_to_host_gb_per_s")
FIELDS = _INT + _COUNT + _RATE + ("unit_mops", "host_concurrent", "sources")


class PimSpecError(DeviceProfileError):
    """A ``pim`` mapping that breaks its rules; the message names the field and what is allowed."""


@dataclass(frozen=True)
class PimSpec:
    """A PIM system's organisation (see the module docstring for the fields and units)."""

    units: int
    ranks: int
    clock_mhz: float
    unit_mops: Mapping[str, Mapping[str, float]]
    max_tasklets: int
    pipeline_tasklets: int
    mram_gb_per_s: float
    host_to_rank_gb_per_s: float
    rank_to_host_gb_per_s: float
    measured_mhz: float = 0.0
    tasklets: int = 0
    broadcast_to_rank_gb_per_s: float = 0.0
    host_to_unit_gb_per_s: float | None = None
    unit_to_host_gb_per_s: float | None = None
    host_to_units_max_gb_per_s: float | None = None
    units_to_host_max_gb_per_s: float | None = None
    serial_transfer_us: float = 0.0
    host_concurrent: bool = False
    disabled_units: int = 0
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def usable_units(self) -> int:
        """Units a kernel can run on: units - disabled_units."""
        return self.units - self.disabled_units

    @property
    def clock_scale(self) -> float:
        """clock_mhz / measured_mhz: the factor on every per-unit rate."""
        return self.clock_mhz / (self.measured_mhz or self.clock_mhz)

    @property
    def units_per_rank(self) -> int:
        return self.units // self.ranks

    @property
    def pipeline_fill(self) -> float:
        """Share of the pipeline the kernel's threads fill: min(1, tasklets / pipeline_tasklets)."""
        return min(1.0, (self.tasklets or self.pipeline_tasklets) / self.pipeline_tasklets)

    def dtypes(self, op_class: str) -> tuple[str, ...]:
        """The dtypes the profile has a rate for in ``op_class``."""
        return tuple(self.unit_mops.get(op_class, {}))

    def ops_per_s(self, op_class: str, dtype: str) -> float:
        """Operations per second of one unit: MOPS x 1e6 x clock scale x pipeline fill."""
        table = self.unit_mops.get(op_class, {})
        if dtype not in table:
            raise PimSpecError(f"no {op_class} throughput for dtype {dtype!r} on this PIM unit; it has: "
                               f"{', '.join(table) or 'none'}")
        return table[dtype] * 1e6 * self.clock_scale * self.pipeline_fill

    def mram_bytes_per_s(self) -> float:
        """Sustained bytes/s of one unit's bank, scaled to this clock (DMA runs on the unit's clock)."""
        return self.mram_gb_per_s * 1e9 * self.clock_scale


def parse_pim(where: str, spec: Any) -> PimSpec:
    """The `PimSpec` of a profile's ``pim`` mapping; `PimSpecError` naming ``where`` and the field."""
    if not isinstance(spec, dict):
        raise PimSpecError(f"{where}: field 'pim' must be a mapping of {', '.join(FIELDS)}")
    for key in spec:
        if key not in FIELDS:
            raise PimSpecError(f"{where}: field 'pim' has unknown key {key!r}; allowed: {', '.join(FIELDS)}")
    for key in _REQUIRED:
        if key not in spec:
            raise PimSpecError(f"{where}: field 'pim' is missing {key!r}")
    for key in _INT:
        if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], int) or spec[key] <= 0):
            raise PimSpecError(f"{where}: field 'pim.{key}' must be a whole number > 0, got {spec[key]!r}")
    for key in _COUNT:
        if key in spec and (isinstance(spec[key], bool) or not isinstance(spec[key], int)
                            or not 0 <= spec[key] < spec["units"]):
            raise PimSpecError(f"{where}: field 'pim.{key}' must be a whole number from 0 to units - 1, "
                               f"got {spec[key]!r}")
    for key in _RATE:
        if key in spec:
            _positive(where, f"pim.{key}", spec[key])
    if spec["units"] % spec["ranks"]:
        raise PimSpecError(f"{where}: field 'pim.units' = {spec['units']} is not divisible by 'pim.ranks' = "
                           f"{spec['ranks']}; every rank holds the same number of units")
    if spec["pipeline_tasklets"] > spec["max_tasklets"]:
        raise PimSpecError(f"{where}: field 'pim.pipeline_tasklets' = {spec['pipeline_tasklets']} is above "
                           f"'pim.max_tasklets' = {spec['max_tasklets']}")
    if spec.get("tasklets", 1) > spec["max_tasklets"]:
        raise PimSpecError(f"{where}: field 'pim.tasklets' = {spec['tasklets']} is above the hardware's "
                           f"{spec['max_tasklets']} threads per unit (allowed: 1 .. {spec['max_tasklets']})")
    if not isinstance(spec.get("host_concurrent", False), bool):
        raise PimSpecError(f"{where}: field 'pim.host_concurrent' must be true or false")
    sources = spec.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items()):
        raise PimSpecError(f"{where}: field 'pim.sources' maps field names to strings")
    values = dict(spec)
    values["unit_mops"] = _mops(where, spec["unit_mops"])
    values.setdefault("broadcast_to_rank_gb_per_s", spec["host_to_rank_gb_per_s"])
    return PimSpec(**values)


def _mops(where: str, table: Any) -> dict[str, dict[str, float]]:
    if not isinstance(table, dict) or not table:
        raise PimSpecError(f"{where}: field 'pim.unit_mops' must map op classes ({', '.join(OP_CLASSES)}) "
                           f"to {{dtype: MOPS}}")
    for op_class, rates in table.items():
        if op_class not in OP_CLASSES:
            raise PimSpecError(f"{where}: field 'pim.unit_mops' has unknown op class {op_class!r}; "
                               f"allowed: {', '.join(OP_CLASSES)}")
        if not isinstance(rates, dict) or not rates:
            raise PimSpecError(f"{where}: field 'pim.unit_mops.{op_class}' must map dtypes to MOPS")
        for dtype, v in rates.items():
            if dtype not in PIM_DTYPES:
                raise PimSpecError(f"{where}: field 'pim.unit_mops.{op_class}' has unknown dtype {dtype!r}; "
                                   f"allowed: {', '.join(PIM_DTYPES)}")
            _positive(where, f"pim.unit_mops.{op_class}.{dtype}", v)
    return {c: dict(r) for c, r in table.items()}


def _positive(where: str, label: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1e6:
        raise PimSpecError(f"{where}: field {label!r} must be a number in (0, 1e6], got {v!r}")
