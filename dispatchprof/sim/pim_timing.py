"""PIM timing beyond the roofline: an op on a device whose profile has a ``pim`` mapping
(`dispatchprof.sim.pim.PimSpec`) is timed per unit, with the host transfers its layout needs.

For op o with dtype t on a PIM system of U usable units in R ranks (its units / R per rank), rates
per unit (`PimSpec.ops_per_s`: MOPS x clock scale x pipeline fill, where the fill is
min(1, tasklets / pipeline_tasklets)):

    P          = for a GEMM [M, K] @ [K, N]: the larger operand stays resident in the units' banks,
                 split along its output dimension: batch * N when [K, N] is the larger (a layer's
                 weights), batch * M when [M, K] is (a matrix times a vector); for any other op the
                 larger of its output elements and its largest argument
    u          = min(U, P)                    units the op can use; ranks used r = ceil(u / (U / R))
    t_compute  = sum over categories c of count_c * scale / (u * rate(class(c), t))
                 classes: ADD, CMP -> add; MULT -> mul; DIV, SQRT, EXP, OTHER -> div
    t_memory   = traffic / (u * mram_bytes_per_s)          (the roofline's traffic, spread over u banks)
    exchange   = every exchange between units goes through the host:
                 a GEMM with u > 1 broadcasts its streamed operand (the smaller one; its bytes are
                 its elements' share of the bytes the op reads) to the u units and gathers its output:
                     broadcast(A bytes, u) + gather(output bytes, u)
                 an op whose output has fewer elements than u (a reduction over the split dimension)
                 gathers u partial results per output element: gather(u * output bytes, u); a row
                 lookup (`ROW_LOOKUPS`: an embedding) reduces nothing, its rows are read where they
                 lie, so it exchanges nothing however few elements it returns;
                 the host's own arithmetic on them is not charged (no published host rate here)
    broadcast(b, u) = b * u / (broadcast_to_rank * r)
    scatter(b, u)   = b / min(host_to_units_max, r * min(host_to_rank, u / r * host_to_unit))
    gather(b, u)    = b / min(units_to_host_max, r * min(rank_to_host, u / r * unit_to_host))
                      (a rank's figure is that of its units all at once; fewer units reach at most
                      their serial per-unit figures; the ranks add up to at most the host's ceiling;
                      a figure the profile leaves out does not limit)
    serial transfers (one unit after another, u of them): b / the per-unit figure
                      + u * serial_transfer_us
    host_concurrent: the exchange hides under the units' busy time: max(0, exchange - busy)

t_compute and t_memory take the place of the roofline's in `dispatchprof.sim.timing.OpTiming`
(busy = max of the two: a unit's DMA engine runs beside its pipeline); the exchange is the op's
t_comm (communication among the units, like a collective's), so a simulation's ``comm_s`` is the
inter-unit time and ``transfer_s`` the host's inputs. Dtypes narrower than 32-bit integers (bool,
int8, int16) run on the 32-bit ALU (`ALIASES`); the rounding of an integer division is part of the
division (`charged_counts`: its OTHER is not charged). A dtype the profile has no rate for raises, naming
the ones it has.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from dispatchprof.results.records import OpRecord
from dispatchprof.sim.device import Device
from dispatchprof.sim.kernels import gemm_dims
from dispatchprof.sim.pim import CLASS_OF, PimSpec, PimSpecError

#: Integer dtypes narrower than 32 bits run as 32-bit ALU operations when the profile lists int32 only.
ALIASES = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32"}
#: Integer dtypes (a division in them gives a rounded quotient: `charged_counts`).
INTEGER_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: Ops that return rows of a table as they are (no partial results to gather): of the parameter
#: gathers (op_formulas.registry.PARAMETER_GATHERS), the ones that neither sum rows (an embedding
#: bag) nor multiply them (grouped GEMMs, timed as GEMMs).
ROW_LOOKUPS = ("aten.embedding",)
#: Ops that divide and round: the count adds an OTHER per element for the rounding.
ROUNDING_DIVISIONS = ("aten.floor_divide", "aten.div")


@dataclass(frozen=True, slots=True)
class PimTimes:
    """Seconds of one op on a PIM system, and the bytes it exchanged with the host."""

    t_compute: float
    t_memory: float
    t_exchange: float
    exchange_bytes: float
    units: int


def ranks_used(spec: PimSpec, units: int) -> int:
    """Ranks holding ``units`` units (filled rank by rank)."""
    return max(1, math.ceil(units / spec.units_per_rank))


def _parallel_gb_per_s(spec: PimSpec, units: int, per_rank: float, per_unit: float | None,
                       ceiling: float | None) -> float:
    """Bandwidth of a parallel transfer to or from ``units`` units: each rank used gives
    min(per_rank, its units x per_unit), a rank's figure being that of its units all at once; the
    ranks' sum is capped at the host's ``ceiling`` (None: no cap)."""
    ranks = ranks_used(spec, units)
    rank = per_rank if per_unit is None else min(per_rank, units / ranks * per_unit)
    return min(rank * ranks, ceiling if ceiling is not None else math.inf)


def scatter_s(spec: PimSpec, nbytes: float, units: int) -> float:
    """Seconds to send ``nbytes`` in total, split over ``units`` units, in parallel per rank."""
    return nbytes / (_parallel_gb_per_s(spec, units, spec.host_to_rank_gb_per_s, spec.host_to_unit_gb_per_s,
                                        spec.host_to_units_max_gb_per_s) * 1e9)


def gather_s(spec: PimSpec, nbytes: float, units: int) -> float:
    """Seconds to read ``nbytes`` in total back from ``units`` units, in parallel per rank."""
    return nbytes / (_parallel_gb_per_s(spec, units, spec.rank_to_host_gb_per_s, spec.unit_to_host_gb_per_s,
                                        spec.units_to_host_max_gb_per_s) * 1e9)


def broadcast_s(spec: PimSpec, nbytes: float, units: int) -> float:
    """Seconds to write the same ``nbytes`` into each of ``units`` units (bytes written count once
    per unit against the broadcast bandwidth of each rank used)."""
    return nbytes * units / (spec.broadcast_to_rank_gb_per_s * 1e9 * ranks_used(spec, units))


def serial_gather_s(spec: PimSpec, nbytes: float, units: int, where: str = "") -> float:
    """Seconds to read ``nbytes`` in total back from ``units`` units one after another (outputs of
    different sizes per unit): nbytes / unit_to_host + units * serial_transfer_us."""
    if spec.unit_to_host_gb_per_s is None:
        raise PimSpecError(f"{where or 'this PIM profile'} gives no serial unit -> host bandwidth "
                           f"('pim.unit_to_host_gb_per_s')")
    return nbytes / (spec.unit_to_host_gb_per_s * 1e9) + units * spec.serial_transfer_us * 1e-6


def _operands(r: OpRecord) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The two matrix operands' shapes of a GEMM record (an addmm's bias left out)."""
    shapes = r.shapes[1:] if r.op in ("aten.addmm", "aten.baddbmm") else r.shapes
    return shapes[0], shapes[1]


def parallelism(r: OpRecord) -> int:
    """P of the module docstring: the independent pieces an op can be split into."""
    dims = gemm_dims(r)
    if dims is not None:
        batch, m, n, _ = dims
        a, b = _operands(r)
        return max(1, batch * (n if math.prod(b) >= math.prod(a) else m))
    largest = max((math.prod(s) for s in r.shapes), default=0)
    return max(1, r.out_elements, largest)


def charged_counts(r: OpRecord, dtype: str) -> dict[str, int]:
    """The counted categories of ``r`` the units are charged for, by category name (CLASS_OF's
    keys). One rule beyond the count: a rounding division of integers (``aten.floor_divide``, or
    ``aten.div`` with a rounding mode, in an integer dtype) counts a DIV and an OTHER (its rounding)
    per element, but an integer division already gives the rounded quotient (UPMEM's runtime
    divides unsigned integers in one emulated routine), so those OTHERs are not charged."""
    c = r.cost
    other = c.other
    if r.op in ROUNDING_DIVISIONS and dtype in INTEGER_DTYPES:
        other = max(0, other - (c.div or 0))
    return {"add": c.add, "cmp": c.cmp, "mult": c.mult, "div": c.div, "sqrt": c.sqrt, "exp": c.exp, "other": other}


def rate_dtype(spec: PimSpec, dtype: str) -> str:
    """The dtype whose rates time an op of ``dtype`` (`ALIASES` where the profile lacks it)."""
    if dtype in spec.dtypes("add") or dtype not in ALIASES:
        return dtype
    return ALIASES[dtype]


def pim_op_times(r: OpRecord, d: Device, dtype: str, work_scale: float, traffic: float) -> PimTimes:
    """The per-unit times of record ``r`` on PIM device ``d`` (its ``pim`` set) in ``dtype``;
    ``work_scale`` is the share of the counted work kept (the runtime's and tensor-parallel
    shares), ``traffic`` the op's memory traffic in bytes (see the module docstring)."""
    spec = d.pim
    assert spec is not None
    units = min(spec.usable_units, parallelism(r))
    key = rate_dtype(spec, dtype)
    counts = charged_counts(r, dtype)
    t_compute = 0.0
    for category, n in counts.items():
        if n:
            try:
                rate = spec.ops_per_s(CLASS_OF[category], key)
            except PimSpecError as e:
                raise PimSpecError(f"device {d.name!r} ({r.op}, {category.upper()} in {dtype}): {e}") from None
            t_compute += n * work_scale / (units * rate)
    t_memory = traffic / (units * spec.mram_bytes_per_s())
    exchange, nbytes = _exchange(r, spec, units)
    if spec.host_concurrent:
        exchange = max(0.0, exchange - max(t_compute, t_memory))
    return PimTimes(t_compute, t_memory, exchange, nbytes, units)


def _exchange(r: OpRecord, spec: PimSpec, units: int) -> tuple[float, float]:
    """(seconds, bytes) the op exchanges with the host (module docstring)."""
    if units <= 1:
        return 0.0, 0.0
    out_bytes = float(r.cost.bytes_written or 0)
    if gemm_dims(r) is not None:
        a, b = (math.prod(s) for s in _operands(r))
        streamed = (r.cost.bytes_read or 0) * min(a, b) / (a + b)     # its share of the operands' bytes
        return broadcast_s(spec, streamed, units) + gather_s(spec, out_bytes, units), streamed * units + out_bytes
    if r.out_elements and r.out_elements < units and r.op not in ROW_LOOKUPS:
        partials = units * out_bytes
        return gather_s(spec, partials, units), partials
    return 0.0, 0.0


def on_units(d: Device, units: int) -> Device:
    """``d`` (a PIM device) with only ``units`` of its units allocated, as a program that allocates
    that many DPUs runs: ceil(units / units per rank) ranks, the rest of the last rank unused, the
    device's host links those ranks' sum, capped at the host's ceilings; named 'NAME@units'."""
    spec = d.pim
    if spec is None:
        raise ValueError(f"device {d.name!r} has no 'pim' mapping: it has no units to allocate")
    if not 0 < units <= spec.usable_units:
        raise ValueError(f"device {d.name!r} has {spec.usable_units} usable units; asked for {units}")
    ranks = ranks_used(spec, units)
    pim = dataclasses.replace(spec, units=ranks * spec.units_per_rank, ranks=ranks,
                              disabled_units=ranks * spec.units_per_rank - units)
    cap_in, cap_out = (c if c is not None else math.inf
                       for c in (spec.host_to_units_max_gb_per_s, spec.units_to_host_max_gb_per_s))
    return dataclasses.replace(d, name=f"{d.name}@{units}", pim=pim,
                               host_to_device_gb_per_s=min(ranks * spec.host_to_rank_gb_per_s, cap_in),
                               device_to_host_gb_per_s=min(ranks * spec.rank_to_host_gb_per_s, cap_out))
