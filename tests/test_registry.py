"""The registry: three op states, one registration per op, clear errors."""

import pytest
import torch

from op_formulas import ZERO_COST, formula, lookup, registered, state_of, zero_cost

aten = torch.ops.aten


def test_three_states():
    assert state_of(aten.mm) == "counted"
    assert state_of(aten.view) == "zero-cost"
    assert state_of(torch.ops.prim.device) == "zero-cost"          # a bookkeeping namespace
    assert state_of(aten._cslt_sparse_mm) == "unknown"          # cuSPARSELt, CUDA only: no rule


def test_no_op_is_both_counted_and_zero_cost():
    assert not set(registered()) & ZERO_COST


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="aten.mm registered twice"):
        formula(aten.mm)(lambda *a, **k: None)
    with pytest.raises(ValueError, match="already registered"):
        zero_cost(aten.mm)
    assert lookup(aten.mm).__name__ == "mm"


def test_registration_takes_packets_only():
    with pytest.raises(TypeError, match=r"OpOverloadPackets such as torch.ops.aten.mm, got 'mm'"):
        formula("mm")
    with pytest.raises(TypeError, match="OpOverloadPackets"):
        zero_cost(aten.mm.default)


def test_every_formula_has_a_docstring_stating_its_rule():
    missing = [str(p) for p, fn in registered().items() if not (fn.__doc__ or "").strip()]
    assert missing == []


def test_every_aten_op_is_counted_zero_cost_decomposed_or_has_a_reason():
    # scripts/op_sweep.py: the residue of torch.ops.aten, each op with a documented reason
    import op_sweep

    residue = op_sweep.sweep()["residue"]
    assert [n for n in residue if op_sweep.reason(n) is None] == []
    assert op_sweep.classify("histc") == "counted" and op_sweep.classify("_grouped_mm") == "counted"
    assert op_sweep.reason("_flash_attention_forward").startswith("attention backend")
