"""The work of one op of a step, as numbers that are linear in the batch composition, and its
timing at a composition through the simulator's one formula (`dispatchprof.sim.timing.time_op`).

An op of the step's op stream has a fixed **form** (`OpForm`: the aten op, scope, dtype, device,
what the runtime decided about its kernel and host launch, its tensor-parallel share) and
**quantities** that follow the batch: its seven counts, MACs, bytes read and written, bytes sent,
output elements, parameter bytes and elements, the traffic the runtime removed, the bytes
all-reduced after it, the sequences its host launch prepares (serving), the bytes it reads whole
under tensor parallelism (`dispatchprof.sim.parallel`), a GEMM's (batch, M, N, K)
and the bytes of each input moved from the host or another device. Those quantities are what the
cost model fits; `op_timing` rebuilds the op's record and plan from them and asks `time_op`, so
the GEMM tile and wave efficiency is that of the step's own M, N, K (not a line through the
counted ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from op_formulas.cost import Cost

from dispatchprof.results.records import COUNT_FIELDS, HOST, UNRECORDED, OpRecord, counts_of
from dispatchprof.sim.device import Device
from dispatchprof.sim.kernels import gemm_dims
from dispatchprof.sim.timing import OpPlan, OpTiming, time_op

#: The quantities of an op, in order (a Cost's count fields first); a GEMM adds (batch, M, N, K), then
#: one entry per moved input.
QUANTITIES = (*COUNT_FIELDS, "out_elements", "param_bytes", "param_elements", "removed_bytes", "allreduce_bytes",
              "sequences", "whole_bytes")
_DIMS = len(QUANTITIES)
#: Where the quantities after the cost fields sit, in QUANTITIES order.
_OUT, _PARAM_BYTES, _PARAM_ELEMENTS, _REMOVED, _ALLREDUCE, _SEQUENCES, _WHOLE = range(len(COUNT_FIELDS), _DIMS)


@dataclass(frozen=True)
class OpForm:
    """What stays fixed of one op of the step across batch compositions."""

    op: str
    scope: str
    dtype: str
    device: str                     # the device that runs it
    in_rms_norm: bool               # inside a module whose class name ends in "RMSNorm"
    kernel: bool                    # launches its own kernel (runtime)
    host: str                       # "op", "graph" or "" (runtime)
    share: float                    # tensor-parallel share of this device
    group: int                      # tensor-parallel group size
    gemm: bool                      # has GEMM dims
    sources: tuple[str, ...] = ()   # per moved input: the device it comes from, "" for the host
    flash: bool = False             # a causal flash kernel: computes the step's share of its work
                                    # (`dispatchprof.sim.runtime.skips_masked_tiles`)
    grouped: bool = False           # a GEMM of a routed-experts grouped kernel (`OpPlan.grouped`)


def op_form(r: OpRecord, device: str, in_rms_norm: bool, plan: OpPlan, sources: Sequence[str],
            flash: bool = False) -> OpForm:
    return OpForm(r.op, r.scope, r.dtype, device, in_rms_norm, plan.kernel, plan.host, plan.share, plan.group,
                  gemm_dims(r) is not None, tuple(sources), flash, plan.grouped)


def quantities(r: OpRecord, plan: OpPlan, moved: Sequence[int]) -> tuple[float, ...]:
    """The op's quantities (QUANTITIES, GEMM dims, bytes of each moved input)."""
    values = [v or 0 for v in counts_of(r.cost)]
    values += [r.out_elements, r.param_bytes, r.param_elements, plan.removed_bytes, plan.allreduce_bytes,
               plan.sequences, plan.whole_bytes]
    dims = gemm_dims(r)
    return (*values, *(dims or ()), *moved)


def moved_inputs(records: Sequence[OpRecord], devices_of: Sequence[Device], a: int, b: int,
                 moved: set) -> list[tuple[list[str], list[int]]]:
    """Per record of [a, b): (source devices, bytes) of the inputs the simulator moves to its
    device (a host input, or one made on another device; once per tensor and destination over
    the count, as `time_op` remembers them in ``moved``)."""
    out = []
    for i in range(a, b):
        d = devices_of[i]
        sources, sizes = [], []
        for producer, nbytes, tensor in records[i].inputs:
            if producer == UNRECORDED or not nbytes:          # nothing to move (an empty cache at first)
                continue
            src = "" if producer == HOST else devices_of[producer].name
            key = (producer, tensor, d.name)
            if src == d.name or key in moved:
                continue
            moved.add(key)
            sources.append(src)
            sizes.append(nbytes)
        out.append((sources, sizes))
    return out


def gemm_shapes(op: str, batch: int, m: int, n: int, k: int) -> tuple[tuple[int, ...], ...]:
    """Argument shapes of a GEMM record with these dims (`gemm_dims` reads them back)."""
    a, b = ((m, k), (k, n)) if op in ("aten.mm", "aten.addmm") else ((batch, m, k), (batch, k, n))
    return ((n,), a, b) if op in ("aten.addmm", "aten.baddbmm") else (a, b)


def scaled(form: OpForm, values: Sequence[float], work: float, weights: float) -> list[float]:
    """The quantities of ``form``'s op with its work and activation traffic times ``work`` and
    its weights times ``weights`` (an expert op on one device of an expert-parallel group,
    `dispatchprof.serving.layout`): the seven counts, MACs, output elements, removed, all-reduced
    and moved bytes times ``work``; parameter bytes and elements times ``weights``; bytes read =
    (read - parameter bytes) x work + parameter bytes x weights; the bytes read whole times
    ``work``; the sequences and a GEMM's (batch, M, N, K) kept (its tile efficiency stays that of
    the counted shape)."""
    v = list(values)
    params = v[_PARAM_BYTES]
    out = [x * work for x in v[:_OUT]]
    read = COUNT_FIELDS.index("bytes_read")
    out[read] = (v[read] - params) * work + params * weights
    out += [v[_OUT] * work, params * weights, v[_PARAM_ELEMENTS] * weights, v[_REMOVED] * work,
            v[_ALLREDUCE] * work, v[_SEQUENCES], v[_WHOLE] * work]
    rest = v[_DIMS:]
    dims = rest[:4] if form.gemm else []
    return out + dims + [x * work for x in rest[len(dims):]]


def op_timing(form: OpForm, values: Sequence[float], devices: dict[str, Device], weight_dtype: str | None,
              work_share: float = 1.0) -> OpTiming:
    """`time_op` of the op of ``form`` with these quantities (the record and plan rebuilt), computing
    ``work_share`` of its work where ``form.flash`` (the step's `Composition.flash_share`)."""
    v = values
    cost = Cost(*v[:_OUT])                        # the cost fields, in Cost's own order
    rest = v[_DIMS:]
    shapes: tuple[tuple[int, ...], ...] = ()
    if form.gemm:
        dims = [max(0, round(x)) for x in rest[:4]]
        shapes = gemm_shapes(form.op, *dims)
        rest = rest[4:]
    device = devices[form.device]
    devices_of = [device] + [devices[s] for s in form.sources if s]
    inputs, j = [], 1
    for n, (src, nbytes) in enumerate(zip(form.sources, rest)):
        inputs.append((j if src else HOST, nbytes, n))
        j += bool(src)
    record = OpRecord(form.op, form.scope, "decode", form.dtype, cost, None, tuple(inputs),
                      param_bytes=round(v[_PARAM_BYTES]), param_elements=round(v[_PARAM_ELEMENTS]),
                      out_elements=v[_OUT], shapes=shapes)
    plan = OpPlan(removed_bytes=v[_REMOVED], kernel=form.kernel, host=form.host, share=form.share,
                  allreduce_bytes=v[_ALLREDUCE], group=form.group, sequences=round(v[_SEQUENCES]),
                  work_share=work_share if form.flash else 1.0, whole_bytes=v[_WHOLE], grouped=form.grouped)
    return time_op(0, record, devices_of, set(), weight_dtype, form.in_rms_norm, plan)


__all__ = ["QUANTITIES", "OpForm", "gemm_shapes", "moved_inputs", "op_form",
           "op_timing", "quantities", "scaled"]
