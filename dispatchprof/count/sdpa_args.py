"""The calling conventions of ``F.scaled_dot_product_attention``, read from torch's own schema.

Users call attention as ``F.scaled_dot_product_attention(q, k, v)``, with keywords
(``query=q, key=k, value=v``, as diffusers does) or any mix. The counter records the call in one
form: the schema's positional parameters as positional arguments (a gap before the last one given
filled with its default), keyword-only ones (``scale``, ``enable_gqa``) as keywords. The parameter
list comes from ``aten::scaled_dot_product_attention``'s schema, which the Python function is
generated from, so a parameter a new torch adds is known here without a code change (and the
formula's test fails until the formula reads it: tests/test_sdpa_calls.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch


class Parameter(NamedTuple):
    """One parameter of the schema: its name, its default (None where it has none), whether it
    has a default, and whether it is keyword-only."""

    name: str
    default: Any
    has_default: bool
    kwarg_only: bool


def schema_parameters() -> tuple[Parameter, ...]:
    """The parameters of ``aten::scaled_dot_product_attention`` in order."""
    schema = torch.ops.aten.scaled_dot_product_attention.default._schema
    return tuple(Parameter(a.name, a.default_value if a.has_default_value() else None,
                           a.has_default_value(), a.kwarg_only) for a in schema.arguments)


PARAMETERS = schema_parameters()
_POSITIONAL = tuple(p for p in PARAMETERS if not p.kwarg_only)
_INDEX = {p.name: i for i, p in enumerate(_POSITIONAL)}
_KEYWORD_ONLY = frozenset(p.name for p in PARAMETERS if p.kwarg_only)
_REQUIRED = sum(1 for p in _POSITIONAL if not p.has_default)


def sdpa_call(args: tuple, kwargs: dict | None) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of one call in the counter's form (module docstring). A call that does
    not bind to the schema (a missing tensor, an unknown keyword, a parameter given twice) is
    returned as is, so torch's own call raises torch's own error."""
    if not kwargs:
        return args, {}
    if len(args) > len(_POSITIONAL):
        return args, kwargs
    values = list(args)
    rest: dict = {}
    for name, value in kwargs.items():
        i = _INDEX.get(name)
        if i is None:
            if name not in _KEYWORD_ONLY:
                return args, kwargs
            rest[name] = value
        elif i < len(args):
            return args, kwargs            # given twice
        else:
            while len(values) <= i:
                values.append(_MISSING)
            values[i] = value
    if len(values) < _REQUIRED:
        return args, kwargs
    for i, v in enumerate(values):
        if v is _MISSING:
            p = _POSITIONAL[i]
            if not p.has_default:
                return args, kwargs
            values[i] = p.default
    return tuple(values), rest


class _Missing:
    __slots__ = ()


_MISSING = _Missing()
