"""What an op's schema says about the tensors it returns (read once per overload, cached)."""

from __future__ import annotations

import functools

import torch


@functools.cache
def returns_only_mutated(func: torch._ops.OpOverload) -> bool:
    """True when every tensor ``func`` returns is one of its mutated arguments (``Tensor(a!)``
    returns: ``copy_``, ``add_``, the ``out=`` variants), so the outputs are those arguments and
    are written once; False when it returns nothing or any fresh tensor (``native_batch_norm``
    updates its running statistics in place but returns new tensors)."""
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and r.alias_info.is_write for r in returns)
