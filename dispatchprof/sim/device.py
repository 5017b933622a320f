"""A device's figures: the `Device` dataclass, the dtype keys of its peak tables, and the
storage bits of the dtypes weights can be simulated in.

Units are in the field names: GB/s are 1e9 bytes/s, GB are 1e9 bytes, TFLOPS are 1e12 FLOP/s,
pJ/bit, pJ/FLOP, microseconds, watts, ns/element. A figure's source is the device's ``source``
(or its file's), unless ``sources`` names one for that field. Profiles load strictly
(``dispatchprof.sim.loader``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np

from dispatchprof.sim.hostprofile import HostProfile
from dispatchprof.sim.pim import PimSpec

Kind = Literal["pim", "gpu", "soc", "cpu", "other"]
DTYPE_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
#: Storage bits per element of the dtypes weights can be simulated in (``weight_dtype``). "fp4" is
#: stored as NVFP4, Blackwell's 4-bit format: 16 E2M1 elements share one FP8 E4M3 block scale,
#: 72 bits per 16 elements (modal.com/llm-almanac/block-quants: "blocks are 16 elements (vs. 32 for
#: MXFP4), and the block scale uses full FP8 E4M3"; its per-tensor FP32 scale is negligible).
#: "mxfp4" is OCP MXFP4 weights beside 16-bit activations (W4A16), as gpt-oss-120b's checkpoint
#: runs on Hopper: 32 E2M1 elements share one E8M0 scale, 4.25 bits each; no profile lists an mxfp4
#: peak, so its matrix ops run at the model dtype's (the weights are dequantised to it).
WEIGHT_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4.5, "mxfp4": 4.25}
WEIGHT_CATEGORIES = ("div", "sqrt", "exp", "cmp", "other")
OVERRIDE_OPS = ("softmax", "silu", "rms_norm")


def dtype_key(dtype: str) -> str:
    """Profile table key of a torch dtype name: 'bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8'."""
    if dtype.startswith("float8"):
        return "fp8"
    return {"float32": "fp32", "float64": "fp64", "bfloat16": "bf16", "float16": "fp16",
            "int8": "int8", "uint8": "int8"}.get(dtype, dtype)


@dataclass(frozen=True)
class Device:
    """One device's figures, in the units their names say (see the module docstring)."""

    name: str
    source: str
    memory_capacity_gb: float | None
    memory_bandwidth_gb_per_s: float
    memory_pj_per_bit: float
    host_to_device_gb_per_s: float
    host_to_device_pj_per_bit: float
    device_to_host_gb_per_s: float
    device_to_host_pj_per_bit: float
    matrix_tflops: Mapping[str, float]
    vector_tflops: Mapping[str, float]
    pj_per_flop: float
    kind: str = "other"
    family: str = ""
    product: str = ""
    cost_weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(WEIGHT_CATEGORIES, 1.0))
    compute_efficiency: float = 1.0
    #: per matrix dtype ("fp8", "fp4"): the fraction of that dtype's matrix peak a large GEMM
    #: reaches, in place of compute_efficiency for matrix ops timed at that peak; absent: compute_efficiency
    matrix_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: per matrix dtype: the fraction of that dtype's matrix peak an engine's grouped GEMMs of a
    #: mixture-of-experts layer's routed experts reach (compiled and serving runtimes: `OpPlan.grouped`),
    #: in place of matrix_efficiency; absent: matrix_efficiency's
    expert_matrix_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: per matrix dtype: the fraction of that dtype's matrix peak a fused attention kernel reaches
    #: (an op `dispatchprof.sim.attention.is_attention` names, any runtime), in place of
    #: matrix_efficiency; absent: matrix_efficiency's
    attention_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: per matrix dtype: a fused attention kernel's fraction of that dtype's matrix peak by its work,
    #: as points ((GFLOP, fraction), ...) with GFLOP rising; an op's fraction is interpolated in log
    #: GFLOP at its own work on one device (`dispatchprof.sim.timing.work_fraction`), the end points'
    #: fractions held beyond them; for its dtypes it wins over attention_efficiency
    attention_work_curve: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    memory_efficiency: float = 1.0
    launch_overhead_us: float = 0.0
    static_power_w: float = 0.0
    ns_per_element: Mapping[str, float] = field(default_factory=dict)
    cache_capacity_mb: float | None = None       # last-level cache: ops whose traffic fits run at
    cache_bandwidth_gb_per_s: float | None = None  # cache bandwidth instead of memory bandwidth
    interconnect_gb_per_s: float | None = None
    interconnect_pj_per_bit: float | None = None
    interconnect_latency_us: float = 0.0          # per all-reduce over two devices (tensor parallelism's)
    interconnect_step_us: float = 0.0             # per further ring step of a small all-reduce (sim.links)
    host_overhead_us: float = 0.0                 # host cost per op launched one by one (runtime "eager")
    graph_launch_us: float = 0.0                  # host cost per step launched as one graph (compiled, serving)
    sequence_host_us: float = 0.0                 # host cost per sequence of a step (serving: schedule, inputs, sample)
    compute_units: int | None = None              # SMs / CUs: GEMM waves (dispatchprof.sim.kernels)
    gemm_tile: tuple[int, int] | None = None      # output tile (rows, cols) of one GEMM work unit
    matrix_memory_efficiency: float | None = None   # achieved fraction of bandwidth for GEMM/GEMV streams
    #: the fraction of the shorter of an op's compute and memory times that its kernel does not
    #: hide under the longer: busy = max + this * min (0: the roofline's perfect overlap)
    unoverlapped_fraction: float = 0.0
    #: the host CPU driving it (dispatchprof.sim.hostprofile), set by ``--host`` / `with_host`;
    #: None: no measured host time is used (`host_profile`)
    host: HostProfile | None = None
    #: False: no measured host time (the pure roofline bound), the fixed host_overhead_us applies
    host_measured: bool = True
    #: per weight dtype ("int8", "int4"): the share of the bandwidth above that a matrix kernel
    #: reading weights stored in it (and dequantising them on the fly) reaches; absent: 1
    weight_only_efficiency: Mapping[str, float] = field(default_factory=dict)
    #: per weight dtype: device time each such matrix kernel costs on top of its stream and
    #: launch_overhead_us (scales and zeros loaded, split-K partial sums reduced); absent: 0
    weight_only_kernel_us: Mapping[str, float] = field(default_factory=dict)
    matrix_pj_per_flop: Mapping[str, float] = field(default_factory=dict)   # per dtype; else pj_per_flop
    tdp_w: float | None = None
    price_usd_per_hour: float | None = None       # renting one device (serving's $ per token)
    sources: Mapping[str, str] = field(default_factory=dict)
    file: str = ""
    #: a PIM system's units, ranks and per-unit rates (dispatchprof.sim.pim); None: the roofline alone
    pim: PimSpec | None = None

    def __hash__(self) -> int:
        return hash((self.name, self.file))

    def peak_flops(self, dtype_key: str, matrix: bool) -> float:
        """Peak FLOP/s for an op of ``dtype_key`` ("bf16", ...): the matrix table for matrix ops,
        else the vector table; a dtype missing from the matrix table falls back to the vector
        table, and one missing there to the vector fp32 peak (always present)."""
        if matrix and dtype_key in self.matrix_tflops:
            return self.matrix_tflops[dtype_key] * 1e12
        return self.vector_tflops.get(dtype_key, self.vector_tflops["fp32"]) * 1e12

    def as_bound(self) -> Device:
        """This device with the pure roofline bound: efficiencies 1, no launch, host or collective
        latency, no shape-dependent GEMM efficiency, compute and memory fully overlapped, no static
        power, no per-unit PIM timing."""
        return dataclasses.replace(self, compute_efficiency=1.0, matrix_efficiency={}, expert_matrix_efficiency={},
                                   attention_efficiency={}, attention_work_curve={},
                                   memory_efficiency=1.0, launch_overhead_us=0.0, host_overhead_us=0.0,
                                   graph_launch_us=0.0, sequence_host_us=0.0,
                                   interconnect_latency_us=0.0, interconnect_step_us=0.0, compute_units=None, gemm_tile=None,
                                   matrix_memory_efficiency=None, weight_only_efficiency={}, weight_only_kernel_us={},
                                   unoverlapped_fraction=0.0, static_power_w=0.0, host_measured=False, pim=None)

    def host_profile(self) -> HostProfile | None:
        """The host whose measured-time figures apply: ``host`` where one was given (``--host``,
        `with_host`); None without one (the fixed host_overhead_us applies: the validated default),
        or for the bound. ``--host auto`` picks each GPU's usual host (`dispatchprof.sim.hostprofile.default_host`)."""
        if not self.host_measured:
            return None
        return self.host

    def with_host(self, host: HostProfile) -> Device:
        """This device driven by ``host`` (``--host``)."""
        return dataclasses.replace(self, host=host)

    def flop_pj(self, dtype_key: str, matrix: bool) -> float:
        """pJ per FLOP of an op: ``matrix_pj_per_flop[dtype]`` for matrix ops where listed, else
        ``pj_per_flop``."""
        if matrix and dtype_key in self.matrix_pj_per_flop:
            return self.matrix_pj_per_flop[dtype_key]
        return self.pj_per_flop

    def bandwidth_for(self, traffic_bytes: float, matrix: bool = False) -> float:
        """Bytes/s an op with this much traffic gets: the cache's when it fits in the last-level
        cache (when the profile has one), else the memory's; times memory_efficiency (for a
        matrix op, matrix_memory_efficiency where the profile gives one). Elementwise for a numpy
        array of traffic (an op at several shapes, dispatchprof.sim.vector)."""
        eff = self.matrix_memory_efficiency if matrix and self.matrix_memory_efficiency else self.memory_efficiency
        memory = self.memory_bandwidth_gb_per_s * 1e9 * eff
        if self.cache_capacity_mb is None or self.cache_bandwidth_gb_per_s is None:
            return memory
        fits = traffic_bytes <= self.cache_capacity_mb * 1e6
        cache = self.cache_bandwidth_gb_per_s * 1e9 * eff
        return np.where(fits, cache, memory) if isinstance(fits, np.ndarray) else (cache if fits else memory)

    def source_of(self, field_name: str) -> str:
        """Where the figure ``field_name`` comes from."""
        return self.sources.get(field_name, self.source)
