"""Optimizer ops: the ``_foreach_*`` family and fused Adam/AdamW.

A ``_foreach_X`` op applies ``aten.X``'s formula to each tensor of its lists (list
arguments and scalar lists are taken element by element), and costs the sum.

Fused Adam/AdamW (``_fused_adam_``, ``_fused_adamw_``) follow torch's single-tensor
reference algorithm, per parameter element:
AdamW decay p *= 1 - lr*wd (1 MULT) | Adam decay g += wd*p (1 MULT + 1 ADD), when wd != 0;
m.lerp_(g, 1-b1) (2 ADD + 1 MULT); v = b2*v + (1-b2)*g*g (1 ADD + 3 MULT);
denom = sqrt(v) / sqrt(bc2) + eps (1 SQRT + 1 DIV + 1 ADD);
p += -step_size * m / denom (1 ADD + 1 DIV + 1 MULT); amsgrad: v_max = max(v_max, v) (1 CMP).
Per parameter tensor: step += 1 (1 ADD); bc1 = 1 - b1**step, bc2 = 1 - b2**step
(2 OTHER + 2 ADD); step_size = lr / bc1 (1 DIV); sqrt(bc2) (1 SQRT).
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.registry import Formula, formula, lookup

aten = torch.ops.aten

FOREACH_BASES = (
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "rsqrt", "neg", "exp",
    "log", "pow", "maximum", "minimum", "clamp_min", "clamp_max", "reciprocal", "sign", "abs",
    "sigmoid", "tanh", "copy", "zero", "norm",
)


def _element(value: Any, i: int) -> Any:
    if isinstance(value, (list, tuple)) and value and not isinstance(value, TensorMeta):
        return value[i]
    return value


def foreach_of(base_packet: Any) -> Formula:
    """Formula of a ``_foreach_`` op: ``base_packet``'s formula (looked up when first called,
    so registration order does not matter) applied to each element and summed."""

    def count(tensors: list[TensorMeta], *args: Any, result: Any, **kwargs: Any) -> Cost:
        base = _zero_or_copy if base_packet is None else lookup(base_packet)
        total = Cost()
        for i, t in enumerate(tensors):
            out = result[i] if isinstance(result, (list, tuple)) and result else t
            elem_args = [_element(a, i) for a in args]
            total += base(t, *elem_args, result=out, **kwargs)
        return total.with_bytes()

    count.__doc__ = f"Sum over the list of the formula of {base_packet or 'a copy'}."
    return count


def _zero_or_copy(*args: Any, result: Any, **kwargs: Any) -> Cost:
    """No arithmetic."""
    return Cost()


def _register_foreach() -> None:
    for name in FOREACH_BASES:
        base = None if name in ("copy", "zero") else (
            aten.linalg_vector_norm if name == "norm" else getattr(aten, name))
        packets = [getattr(aten, f"_foreach_{name}{suffix}") for suffix in ("", "_")
                   if hasattr(aten, f"_foreach_{name}{suffix}")]
        formula(*packets)(foreach_of(base))


_register_foreach()


def adam_element(decoupled: bool, weight_decay: float, amsgrad: bool) -> Cost:
    """Per parameter element (module docstring)."""
    decay = Cost()
    if weight_decay:
        decay = Cost(mult=1) if decoupled else Cost(mult=1, add=1)
    moments = Cost(add=2, mult=1) + Cost(add=1, mult=3)
    update = Cost(sqrt=1, div=1, add=1) + Cost(add=1, div=1, mult=1)
    return decay + moments + update + Cost(cmp=int(amsgrad))


PER_TENSOR = Cost(add=1 + 2, other=2, div=1, sqrt=1)


def _fused_adam(decoupled: bool) -> Formula:
    def count(params: list[TensorMeta], *args: Any, result: Any, weight_decay: float = 0.0,
              amsgrad: bool = False, **kwargs: Any) -> Cost:
        per_element = adam_element(decoupled, weight_decay, amsgrad)
        return sum((per_element * p.numel + PER_TENSOR for p in params), Cost())

    count.__doc__ = ("AdamW" if decoupled else "Adam") + ": see module docstring."
    return count


formula(aten._fused_adamw_, aten._fused_adamw)(_fused_adam(True))
formula(aten._fused_adam_, aten._fused_adam)(_fused_adam(False))
