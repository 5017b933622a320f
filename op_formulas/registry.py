"""The one registry of op formulas, and the named set of zero-cost ops.

Every aten op ends in exactly one state:
- counted: a formula registered here with ``@formula(aten.x, ...)``;
- zero-cost: its packet is in ``ZERO_COST`` (views and metadata: no arithmetic, no bytes);
- unknown: neither; the counter keeps it in the result and warns once.

Formulas are keyed on ``OpOverloadPacket`` (``aten.add``, not ``aten.add.Tensor``)
and receive shapes, dtypes and scalars, never tensors: each tensor argument arrives as a
``TensorMeta``, lists of tensors as lists of ``TensorMeta``, and the op's output(s) as the
keyword ``result``.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from op_formulas.cost import Cost, UnsupportedCall  # noqa: F401  (re-exported: formulas raise it)

Formula = Callable[..., Cost]
Packet = torch._ops.OpOverloadPacket

_FORMULAS: dict[Packet, Formula] = {}
ZERO_COST: set[Packet] = set()
#: Ops that read only some of a parameter (rows of a table, the experts a batch routes to), with
#: the position of that argument: their formulas' bytes_read say how much is read, and the counter
#: takes what is not read off that parameter's bytes.
PARAMETER_GATHERS: dict[Packet, int] = {}
#: Namespaces whose every op is bookkeeping (``prim.device``, ``profiler._record_function_*``).
ZERO_COST_NAMESPACES = frozenset({"prim", "profiler"})


def formula(*packets: Packet) -> Callable[[Formula], Formula]:
    """Register ``fn`` as the formula of each packet; a second registration raises."""
    _check_packets(packets, "formula")

    def register(fn: Formula) -> Formula:
        for p in packets:
            if p in _FORMULAS or p in ZERO_COST:
                raise ValueError(f"formula for {p} registered twice (second: {fn.__qualname__})")
            _FORMULAS[p] = fn
        return fn

    return register


def zero_cost(*packets: Packet) -> None:
    """Declare ops that do no arithmetic and move no bytes (views, metadata)."""
    _check_packets(packets, "zero_cost")
    for p in packets:
        if p in _FORMULAS or p in ZERO_COST:
            raise ValueError(f"{p} is already registered; an op has exactly one state")
        ZERO_COST.add(p)


def gathers_parameters(position: int, *packets: Packet) -> None:
    """Declare ops whose formulas read only part of their argument at ``position``, a parameter
    (``PARAMETER_GATHERS``); each must have a formula that gives its bytes_read."""
    _check_packets(packets, "gathers_parameters")
    PARAMETER_GATHERS.update(dict.fromkeys(packets, position))


def _check_packets(packets: Iterable[object], where: str) -> None:
    for p in packets:
        if not isinstance(p, Packet):
            raise TypeError(f"{where}() takes OpOverloadPackets such as torch.ops.aten.mm, "
                            f"got {p!r} of type {type(p).__name__}")


def lookup(packet: Packet) -> Formula | None:
    """The formula of ``packet``, or None if it has none."""
    return _FORMULAS.get(packet)


def state_of(packet: Packet) -> str:
    """'counted', 'zero-cost' or 'unknown'."""
    if packet in _FORMULAS:
        return "counted"
    if packet in ZERO_COST or _namespace(packet) in ZERO_COST_NAMESPACES:
        return "zero-cost"
    return "unknown"


def _namespace(packet: Packet) -> str:
    return getattr(packet, "_qualified_op_name", str(packet)).split("::")[0].split(".")[0]


def registered() -> dict[Packet, Formula]:
    """A copy of the registry (for tests and coverage reports)."""
    return dict(_FORMULAS)


#: In-place ops that overwrite their first argument without reading it (fill_, copy_ dst):
#: the counter leaves that argument out of bytes_read.
OVERWRITES_SELF: set[Packet] = set()


def overwrites_self(*packets: Packet) -> None:
    """Declare in-place ops whose first argument is written but not read."""
    _check_packets(packets, "overwrites_self")
    OVERWRITES_SELF.update(packets)


def wrap(packet: Packet, wrapper: Callable[[Formula], Formula]) -> None:
    """Replace the formula of ``packet`` by ``wrapper(formula)`` (a refinement such as complex
    arithmetic that applies to a family of already registered formulas)."""
    _FORMULAS[packet] = wrapper(_FORMULAS[packet])
