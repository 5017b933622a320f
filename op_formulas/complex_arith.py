"""Complex tensors count real arithmetic (COUNTING.md).

A formula counts an op as if its elements were real; on complex tensors each count becomes the
real arithmetic it stands for. With every tensor operand complex: a multiply is 4 MULT + 2 ADD
((a+bi)(c+di) = (ac-bd) + (ad+bc)i), an add 2 ADD, a divide 6 MULT + 3 ADD + 2 DIV
((ac+bd) / (c^2+d^2) and (bc-ad) / (c^2+d^2)), and a multiply-accumulate 4 real MACs. With
one operand real: a multiply is 2 MULT, an add 1 ADD (the real parts), a divide 2 DIV.
Other categories stay as counted. So a complex [3,4] @ [4,5] costs 15*4*4 = 240 MULT and
15*(4*2 + 3*2) = 210 ADD. Bytes already use the complex element size.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import Formula, wrap

aten = torch.ops.aten
#: Ops whose real formula is a count of multiplies, adds and divides of their operands.
COMPLEX_AWARE = (
    aten.mm, aten.bmm, aten.addmm, aten.addmm_, aten.baddbmm, aten.baddbmm_, aten.addbmm, aten.addbmm_,
    aten.mv, aten.addmv, aten.addmv_, aten.dot, aten.vdot, aten.outer, aten.ger,
    aten.mul, aten.mul_, aten.add, aten.add_, aten.sub, aten.sub_, aten.rsub, aten.div, aten.div_,
    aten.neg, aten.neg_, aten.reciprocal, aten.sum, aten.cumsum, aten.addcmul, aten.addcmul_,
    aten.convolution, aten.convolution_backward, aten.square,
)


def as_complex(cost: Cost, all_complex: bool) -> Cost:
    """The real arithmetic of ``cost`` counted on complex elements (module docstring)."""
    if all_complex:
        return Cost(mult=4 * cost.mult + 6 * cost.div, add=2 * cost.mult + 2 * cost.add + 3 * cost.div,
                    div=2 * cost.div, sqrt=cost.sqrt, exp=cost.exp, cmp=cost.cmp, other=cost.other,
                    macs=4 * cost.macs, bytes_read=cost.bytes_read, bytes_written=cost.bytes_written,
                    comm_bytes=cost.comm_bytes)
    return Cost(mult=2 * cost.mult, add=cost.add, div=2 * cost.div, sqrt=cost.sqrt, exp=cost.exp,
                cmp=cost.cmp, other=cost.other, macs=2 * cost.macs, bytes_read=cost.bytes_read,
                bytes_written=cost.bytes_written, comm_bytes=cost.comm_bytes)


def _operands(args: tuple) -> list[TensorMeta]:
    found: list[TensorMeta] = []
    for a in args:
        if isinstance(a, TensorMeta):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if isinstance(x, TensorMeta))
    return found


def complex_aware(fn: Formula) -> Formula:
    """``fn``, with its counts turned into real arithmetic when an operand is complex."""

    @functools.wraps(fn)
    def count(*args: Any, result: Any, **kwargs: Any) -> Cost:
        cost = fn(*args, result=result, **kwargs)
        flags = [t.dtype.is_complex for t in _operands(args)]
        if True not in flags:          # the rule: real operands count as the formula says
            return cost
        return as_complex(cost, False not in flags)

    return count


for _p in COMPLEX_AWARE:
    wrap(_p, complex_aware)
