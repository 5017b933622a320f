"""Movement, embedding, losses, pooling, LSTM and optimizer formulas."""

import torch
import torch.nn.functional as F

from conftest import count, counts, only_record
from op_formulas import T, lookup
from op_formulas.optim import PER_TENSOR, adam_element
from op_formulas.pool import adaptive_windows

aten = torch.ops.aten


def test_views_are_zero_cost_and_copies_move_bytes():
    x = torch.randn(4, 6)
    c = count(lambda: x.t().contiguous())
    assert [r.op for r in c.profile.records] == ["aten.clone"]          # t is zero-cost
    r = c.profile.records[0]
    assert counts(r.cost) == {} and (r.cost.bytes_read, r.cost.bytes_written) == (96, 96)
    assert dict(c.profile.zero_cost_calls)["aten.t"] == 1


def test_embedding_reads_gathered_rows_not_the_table():
    emb = torch.nn.Embedding(1000, 16)
    ids = torch.tensor([[1, 2, 3]])
    r = only_record(count(emb, ids), "aten.embedding")
    assert counts(r.cost) == {}
    assert r.cost.bytes_read == 3 * 8 + 3 * 16 * 4 and r.cost.bytes_written == 3 * 16 * 4


def test_cross_entropy_is_log_softmax_plus_nll():
    logits, target = torch.randn(4, 10), torch.tensor([1, 2, 3, 4])
    c = count(F.cross_entropy, logits, target)
    # nll over 4 targets, mean: 4 CMP, 3 ADD + 1 ADD (negation), 1 DIV
    assert counts(only_record(c, "aten.nll_loss_forward").cost) == {"cmp": 4, "add": 4, "div": 1}
    assert counts(only_record(c, "aten._log_softmax").cost) == {"cmp": 36, "add": 4 * 29, "exp": 40, "other": 4}


def test_pooling():
    x = torch.randn(1, 2, 4, 4)
    c = count(lambda: (F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 3)))
    assert counts(only_record(c, "aten.max_pool2d_with_indices").cost) == {"cmp": 8 * 3}   # 8 outputs x 3
    assert counts(only_record(c, "aten.avg_pool2d").cost) == {"add": 8 * 3, "div": 8}
    # adaptive 4 -> 3: windows [0,2), [1,3), [2,4) = 2,2,2 per dim: 9 outputs of 4 per plane
    assert adaptive_windows(4, 3) == [2, 2, 2]
    assert counts(only_record(c, "aten._adaptive_avg_pool2d").cost) == {"add": 2 * 9 * 3, "div": 2 * 9}


def test_lstm_layer_forward():
    lstm = torch.nn.LSTM(3, 4)                                         # I=3, H=4, one layer
    with torch.no_grad():
        c = count(lstm, torch.randn(5, 2, 3))                          # T=5, B=2
    r = only_record(c, "aten.mkldnn_rnn_layer")
    i, h, steps = 3, 4, 10
    gates_mult = 4 * h * (i + h)                                       # 112
    per_step_add = 4 * h * (i - 1) + 4 * h * (h - 1) + 4 * h + 8 * h + 3 * h + h   # 32+48+16+32+12+4
    assert counts(r.cost) == {
        "mult": steps * (gates_mult + 2 * h + h), "macs": steps * gates_mult,
        "add": steps * per_step_add, "exp": steps * 3 * h, "div": steps * 3 * h, "other": steps * 2 * h}


def test_fused_adamw_step():
    params = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(4))]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.AdamW(params, lr=0.1, weight_decay=0.01, fused=True)
    r = only_record(count(opt.step), "aten._fused_adamw_")
    element = adam_element(True, 0.01, False)
    # per element: decay 1 MULT; lerp 2 ADD + 1 MULT; v 1 ADD + 3 MULT; denom SQRT DIV ADD; update ADD DIV MULT
    assert counts(element) == {"mult": 6, "add": 5, "div": 2, "sqrt": 1}
    assert counts(r.cost) == counts(element * 10 + PER_TENSOR * 2)
    # reads and writes params, grads, exp_avg, exp_avg_sq (+ the two step counters read)
    assert r.cost.bytes_written >= 3 * 10 * 4


def test_foreach_applies_the_base_formula_per_tensor():
    xs, ys = [T(3), T(2, 2)], [T(3), T(2, 2)]
    assert counts(lookup(aten._foreach_add)(xs, ys, result=[T(3), T(2, 2)], alpha=2)) == {"add": 7, "mult": 7}
    assert counts(lookup(aten._foreach_addcmul_)(xs, ys, ys, 0.5, result=None)) == {"add": 7, "mult": 14}
