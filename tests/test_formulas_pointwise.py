"""Element-wise formulas: hand arithmetic per rule of COUNTING.md, then real torch calls."""

import pytest
import torch

from conftest import count, counts, only_record
from op_formulas import T, lookup

aten = torch.ops.aten


@pytest.mark.parametrize("packet, args, kwargs, expected", [
    (aten.add, (T(2, 3), T(2, 3)), {}, {"add": 6}),                          # 1 ADD x 6
    (aten.add, (T(2, 3), T(3)), {"alpha": 2}, {"add": 6, "mult": 6}),        # alpha != 1: +1 MULT
    (aten.sub, (T(4), 1.0), {}, {"add": 4}),
    (aten.mul, (T(5, 2), T(5, 2)), {}, {"mult": 10}),
    (aten.div, (T(3), T(3)), {}, {"div": 3}),
    (aten.div, (T(3), T(3)), {"rounding_mode": "floor"}, {"div": 3, "other": 3}),
    (aten.neg, (T(7),), {}, {"add": 7}),
    (aten.reciprocal, (T(7),), {}, {"div": 7}),
    (aten.rsqrt, (T(4),), {}, {"sqrt": 4, "div": 4}),
    (aten.sqrt, (T(4),), {}, {"sqrt": 4}),
    (aten.exp, (T(4),), {}, {"exp": 4}),
    (aten.sigmoid, (T(4),), {}, {"exp": 4, "add": 4, "div": 4}),
    (aten.silu, (T(4),), {}, {"exp": 4, "add": 4, "div": 4, "mult": 4}),
    (aten.gelu, (T(2),), {}, {"mult": 6, "add": 2, "other": 2}),             # 3 MULT + 1 ADD + 1 OTHER each
    (aten.gelu, (T(2),), {"approximate": "tanh"}, {"mult": 12, "add": 4, "other": 2}),
    (aten.tanh, (T(3),), {}, {"other": 3}),
    (aten.relu, (T(3),), {}, {"cmp": 3}),
    (aten.where, (T(3, dtype=torch.bool), T(3), T(3)), {}, {"cmp": 3}),
    (aten.masked_fill, (T(3), T(3, dtype=torch.bool), 0.0), {}, {"cmp": 3}),
    (aten.lt, (T(3), T(3)), {}, {"cmp": 3}),
    (aten.clamp, (T(5), 0.0, 1.0), {}, {"cmp": 10}),                          # two bounds
    (aten.clamp, (T(5), 0.0), {}, {"cmp": 5}),                                # one bound
    (aten.pow, (T(6), 2), {}, {"mult": 6}),
    (aten.pow, (T(6), 0.5), {}, {"sqrt": 6}),
    (aten.pow, (T(6), 4), {}, {"mult": 18}),                                  # k-1 = 3 MULT each
    (aten.pow, (T(6), 1.7), {}, {"other": 6}),
    (aten.pow, (T(6), -2), {}, {"mult": 6, "div": 6}),
    (aten.addcmul, (T(3), T(3), T(3)), {"value": 0.5}, {"add": 3, "mult": 6}),
    (aten.lerp, (T(3), T(3), 0.1), {}, {"add": 6, "mult": 3}),
])
def test_pointwise_rules(packet, args, kwargs, expected):
    out = T(*max((a for a in args if hasattr(a, "shape")), key=lambda a: len(a.shape)).shape)
    assert counts(lookup(packet)(*args, result=out, **kwargs)) == expected


def test_real_calls_reach_pointwise_formulas():
    x, y = torch.randn(4, 5), torch.randn(5)
    c = count(lambda: (x + y, torch.nn.functional.silu(x), torch.clamp(x, -1, 1)))
    assert counts(only_record(c, "aten.add").cost) == {"add": 20}            # broadcast: 4*5 outputs
    assert counts(only_record(c, "aten.silu").cost) == {"exp": 20, "add": 20, "div": 20, "mult": 20}
    assert counts(only_record(c, "aten.clamp").cost) == {"cmp": 40}


def test_broadcast_input_reads_only_stored_elements():
    x, b = torch.randn(4, 5), torch.randn(5).expand(4, 5)                    # b stores 5 floats
    r = only_record(count(lambda: x * b), "aten.mul")
    assert r.cost.bytes_read == (20 + 5) * 4 and r.cost.bytes_written == 20 * 4


def test_in_place_op_reads_and_writes_the_mutated_tensor():
    x, y = torch.randn(8), torch.randn(8)
    r = only_record(count(lambda: x.add_(y)), "aten.add_")
    assert counts(r.cost) == {"add": 8}
    assert (r.cost.bytes_read, r.cost.bytes_written) == (64, 32)


def test_fill_writes_without_reading():
    x = torch.empty(10)
    r = only_record(count(lambda: x.fill_(1.0)), "aten.fill_")
    assert (r.cost.bytes_read, r.cost.bytes_written) == (0, 40)


def test_out_variant_does_not_read_the_out_tensor():
    x, y, out = torch.randn(6), torch.randn(6), torch.empty(6)
    r = only_record(count(lambda: torch.mul(x, y, out=out)), "aten.mul")
    assert (r.cost.bytes_read, r.cost.bytes_written) == (48, 24)
