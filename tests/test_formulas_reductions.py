"""Reductions, softmax and normalisation: hand arithmetic, then real torch calls."""

import pytest
import torch

from conftest import count, counts, only_record
from op_formulas import T, lookup

aten = torch.ops.aten


@pytest.mark.parametrize("packet, args, expected", [
    (aten.sum, (T(4, 5), [1]), {"add": 16}),                        # 4 rows x (5-1)
    (aten.sum, (T(4, 5),), {"add": 19}),                            # all 20 -> 19
    (aten.mean, (T(4, 5), [1]), {"add": 16, "div": 4}),
    (aten.prod, (T(4, 5), 1), {"mult": 16}),
    (aten.amax, (T(4, 5), [0]), {"cmp": 15}),                       # 5 columns x (4-1)
    (aten.argmax, (T(4, 5), 1), {"cmp": 16}),
    # var over 5, 4 rows: mean 4+1, 5 ADD, 5 MULT, 4 ADD, 1 DIV -> per row 13 ADD, 5 MULT, 2 DIV
    (aten.var, (T(4, 5), [1]), {"add": 52, "mult": 20, "div": 8}),
    (aten.std, (T(4, 5), [1]), {"add": 52, "mult": 20, "div": 8, "sqrt": 4}),
    # softmax over 5, 3 rows: 4 CMP, 5+4 ADD, 5 EXP, 5 DIV per row
    (aten._softmax, (T(3, 5), 1, False), {"cmp": 12, "add": 27, "exp": 15, "div": 15}),
    # log_softmax over 5: 4 CMP, 5+4+5 ADD, 5 EXP, 1 OTHER per row
    (aten._log_softmax, (T(3, 5), 1, False), {"cmp": 12, "add": 42, "exp": 15, "other": 3}),
    (aten.cumsum, (T(3, 5), 1), {"add": 12}),
    (aten.sort, (T(2, 8), -1), {"cmp": 2 * 8 * 3}),                 # n*ceil(log2 n) = 8*3
    (aten.topk, (T(2, 8), 3), {"cmp": 2 * 8 * 2}),                  # n*ceil(log2 3) = 8*2
])
def test_reduction_rules(packet, args, expected):
    assert counts(lookup(packet)(*args, result=T(1))) == expected


def test_layer_norm_rule():
    # rows 6 of n=4, affine: per row ADD 3+4+3+1 +4(bias)=15, MULT 4+4+4(weight)=12, DIV 3, SQRT 1
    cost = lookup(aten.native_layer_norm)(T(6, 4), [4], T(4), T(4), 1e-5, result=T(6, 4))
    assert counts(cost) == {"add": 6 * 15, "mult": 6 * 12, "div": 6 * 3, "sqrt": 6}


def test_rms_norm_rule():
    # rows 2 of n=8 with weight: MULT 8+8+8, ADD 7+1, DIV 1+1, SQRT 1
    cost = lookup(aten._fused_rms_norm)(T(2, 8), [8], T(8), 1e-6, result=(T(2, 8), T(2, 1)))
    assert counts(cost) == {"mult": 48, "add": 16, "div": 4, "sqrt": 2}


def test_real_layer_norm_and_softmax_calls():
    ln = torch.nn.LayerNorm(4)
    x = torch.randn(6, 4)
    c = count(lambda: (ln(x), torch.softmax(x, -1)))
    assert counts(only_record(c, "aten.native_layer_norm").cost) == {"add": 90, "mult": 72, "div": 18, "sqrt": 6}
    assert counts(only_record(c, "aten._softmax").cost) == {"cmp": 18, "add": 42, "exp": 24, "div": 24}


def test_batch_norm_training_with_running_stats():
    bn = torch.nn.BatchNorm2d(3).train()
    r = only_record(count(bn, torch.randn(2, 3, 2, 2)), "aten.native_batch_norm")
    m = 8   # elements per channel
    per_channel_add = (m - 1) + m + (m - 1) + 1 + 2 + m + m      # stats, eps, running update, normalise, bias
    per_channel_mult = m + 5 + m + m                              # square, running update, normalise, weight
    assert counts(r.cost) == {"add": 3 * per_channel_add, "mult": 3 * per_channel_mult,
                              "div": 3 * 3, "sqrt": 3}
