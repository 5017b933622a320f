"""DeepSpeed's flops-profiler conventions: its number strings and its FLOP rules, as data.

DeepSpeed (deepspeed/profiling/flops_profiler/profiler.py, v0.19.6) counts by patching
``torch.nn.functional`` and a few ``torch`` functions; we count aten ops. ``deepspeed_cost`` maps
one of our op records (and the type of the module it ran in) to the (FLOPs, MACs) DeepSpeed
gives the call that produced it. The rules, DeepSpeed's and ours side by side, are in
docs/deepspeed.md:

- contractions (linear, matmul family, conv, attention): FLOPs = 2 x MACs, MACs as ours;
  a Linear's bias is not counted (F.linear, also inside MultiheadAttention); ``torch.addmm`` /
  ``baddbmm`` elsewhere add one FLOP per element of the added input; a convolution with bias adds one FLOP per output element;
- relu, prelu, elu, leaky_relu, relu6 (hardtanh), silu, gelu, softmax, upsampling: one FLOP per
  output element; pools: one FLOP per input element;
- layer/group norm: 5 FLOPs per element with affine weights, 4 without; batch norm in eval:
  2 (affine) or 1, in training 5 or 4;
- every other op (``+``, ``*``, tanh, sigmoid, exp, embedding, copies, ...): 0.
"""

from __future__ import annotations

from math import prod

from dispatchprof.results.records import OpRecord

DEFAULT_PRECISION = 2

_MAGNITUDES = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3))
_SMALL = (("m", 1e-3), ("u", 1e-6))


def number_to_string(num: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    """DeepSpeed's format: 152580 -> '152.58 K', 0 -> '0 ' (a space always follows the number)."""
    if units is None:
        magnitude, units = next(((m, u) for u, m in _MAGNITUDES if num >= m), (None, None))
        if magnitude is None:
            if num >= 1 or num == 0:
                magnitude, units = 1, ""
            else:
                units, magnitude = next(((u, m) for u, m in _SMALL if num >= m), _SMALL[-1])
    else:
        magnitude = dict(_MAGNITUDES + _SMALL).get(units, 1)
    return f"{round(num / magnitude, precision):g} {units}"


def macs_to_string(macs: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    """75776 -> '75.78 KMACs'."""
    return f"{number_to_string(macs, units=units, precision=precision)}MACs"


def flops_to_string(flops: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    """A rate: 13.52e9 -> '13.52 GFLOPS'."""
    return f"{number_to_string(flops, units=units, precision=precision)}FLOPS"


def bytes_to_string(b: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    return f"{number_to_string(b, units=units, precision=precision)}B"


def params_to_string(params_num: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    """61706 -> '61.71 K'; billions are 'B' (1.5e9 -> '1.5 B'); no trailing space."""
    units = units.replace("B", "G") if units else units
    return number_to_string(params_num, units=units, precision=precision).replace("G", "B").strip()


def duration_to_string(duration: float, units: str | None = None, precision: int = DEFAULT_PRECISION) -> str:
    """0.5 -> '500 ms'."""
    return f"{number_to_string(duration, units=units, precision=precision)}s"


# --- the FLOP rules ---------------------------------------------------------------------------
#: One FLOP per output element (DeepSpeed patches these functionals with ``input.numel()``).
PER_OUTPUT = frozenset({
    "aten.relu", "aten.relu_", "aten.prelu", "aten._prelu_kernel", "aten.elu", "aten.elu_",
    "aten.leaky_relu", "aten.leaky_relu_", "aten.hardtanh", "aten.hardtanh_", "aten.silu",
    "aten.silu_", "aten.gelu", "aten.gelu_", "aten._softmax", "aten.softmax",
})
#: Pools: one FLOP per input element.
POOLS = frozenset({
    "aten.avg_pool1d", "aten.avg_pool2d", "aten.avg_pool3d", "aten.max_pool1d", "aten.max_pool2d",
    "aten.max_pool3d", "aten.max_pool2d_with_indices", "aten.max_pool3d_with_indices",
    "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool3d", "aten.adaptive_max_pool1d",
    "aten.adaptive_max_pool2d", "aten.adaptive_max_pool3d", "aten.adaptive_avg_pool1d",
})
#: FLOPs per element with / without affine weights (DeepSpeed's "estimation").
NORMS = {"aten.native_layer_norm": (5, 4), "aten.native_group_norm": (5, 4),
         "aten._native_batch_norm_legit": (5, 4), "aten.native_batch_norm": (5, 4),
         "aten._native_batch_norm_legit_no_training": (2, 1)}
#: Contractions whose first tensor argument is added to the product (DeepSpeed's addmm rule).
ADDED_INPUT = frozenset({"aten.addmm", "aten.baddbmm", "aten.addbmm"})
#: Modules whose addmm comes from F.linear, whose bias DeepSpeed does not count. (An addmm
#: elsewhere is taken for a direct torch.addmm, as GPT-2's Conv1D calls it: its bias counts.)
LINEAR_MODULES = frozenset({"Linear", "LazyLinear", "NonDynamicallyQuantizableLinear", "MultiheadAttention"})
RULES = ("deepspeed", "dispatchprof")


def deepspeed_cost(record: OpRecord, module_type: str) -> tuple[int, int]:
    """(FLOPs, MACs) DeepSpeed's profiler gives the call behind ``record``, run in a module of
    class ``module_type``; ops DeepSpeed does not patch cost (0, 0)."""
    op, macs, shapes = record.op, record.cost.macs, record.shapes
    if macs:
        flops = 2 * macs
        if op in ADDED_INPUT and module_type not in LINEAR_MODULES and shapes:
            flops += prod(shapes[0])              # the added input, as given (before broadcasting)
        elif op == "aten.convolution" and len(shapes) >= 3:
            flops += record.out_elements          # bias: one add per output element
        return flops, macs
    if op in PER_OUTPUT or op.startswith("aten.upsample"):
        return record.out_elements, 0
    if op in POOLS:
        return (prod(shapes[0]) if shapes else 0), 0
    if op in NORMS:
        affine, plain = NORMS[op]
        n = prod(shapes[0]) if shapes else 0
        with_weight = len(shapes) >= 2 if "norm_legit" not in op and op != "aten.native_batch_norm" \
            else len(shapes) in (3, 5)
        return n * (affine if with_weight else plain), 0
    return 0, 0


def record_cost(record: OpRecord, module_type: str, rules: str) -> tuple[int, int]:
    """(FLOPs, MACs) of ``record`` under ``rules``: "deepspeed" (its rules above) or
    "dispatchprof" (ours: FLOPs = ADD + MULT of the op's reference algorithm)."""
    if rules == "deepspeed":
        return deepspeed_cost(record, module_type)
    return record.cost.add + record.cost.mult, record.cost.macs


def check_rules(rules: str) -> None:
    if rules not in RULES:
        raise ValueError(f"flop_rules must be one of {RULES}, got {rules!r}")
