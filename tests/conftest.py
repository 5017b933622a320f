"""Shared helpers: the zoo (scripts/zoo.py) on the path, and a one-call counter."""

from __future__ import annotations

import os
import sys
import warnings

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from dispatchprof import OpCounter  # noqa: E402
from op_formulas import CATEGORIES  # noqa: E402


def count(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` under a fresh OpCounter; return the counter."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            fn(*args, **kwargs)
    return c


def counts(cost_or_totals) -> dict[str, int]:
    """The non-zero arithmetic categories and MACs, as a dict (for compact asserts)."""
    keys = CATEGORIES + ("macs",)
    return {k: getattr(cost_or_totals, k) for k in keys if getattr(cost_or_totals, k)}


def only_record(c, op: str):
    """The single record of ``op`` in a counter (asserts there is exactly one)."""
    records = [r for r in c.profile.records if r.op == op]
    assert len(records) == 1, f"expected one {op}, got {[r.op for r in c.profile.records]}"
    return records[0]


@pytest.fixture(autouse=True)
def _nothing_left_behind():
    """Every test must leave torch as it found it: no modes, no global module hooks."""
    yield
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o
    assert not m._global_forward_pre_hooks and not m._global_forward_hooks
    assert not o._global_optimizer_pre_hooks and not o._global_optimizer_post_hooks
    assert torch._C._len_torch_dispatch_stack() == 0
    assert torch._C._len_torch_function_stack() == 0
