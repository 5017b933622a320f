"""Formulas of issue #40's unknown ops, each reached by a real torch call, numbers by hand."""

import pytest
import torch
import torch.nn.functional as F

from conftest import count, counts, only_record

X = torch.rand(3, 4) * 0.8 + 0.1          # 12 elements in (0.1, 0.9)


def _one(fn, op, *args, **kwargs):
    return counts(only_record(count(fn, *args, **kwargs), op).cost)


@pytest.mark.parametrize("fn, op, expected", [
    (torch.digamma, "aten.digamma", {"other": 12}),
    (torch.lgamma, "aten.lgamma", {"other": 12}),
    (torch.i0, "aten.i0", {"other": 12}),
    (torch.special.i0e, "aten.special_i0e", {"other": 12}),
    (torch.special.i1, "aten.special_i1", {"other": 12}),
    (lambda x: torch.polygamma(1, x), "aten.polygamma", {"other": 12}),
    # mvlgamma with p = 3 on x > 1: 3 OTHER + 5 ADD per element
    (lambda x: torch.mvlgamma(x + 2, 3), "aten.mvlgamma", {"other": 36, "add": 60}),
    # sqrt(a*a + b*b): 2 MULT + 1 ADD + 1 SQRT
    (lambda x: torch.hypot(x, x), "aten.hypot", {"mult": 24, "add": 12, "sqrt": 12}),
    # log(exp(a) + exp(b)): 2 EXP + 1 ADD + 1 OTHER
    (lambda x: torch.logaddexp(x, x), "aten.logaddexp", {"exp": 24, "add": 12, "other": 12}),
    (lambda x: torch.logaddexp2(x, x), "aten.logaddexp2", {"exp": 24, "add": 12, "other": 12}),
    # log(x / (1 - x)): 1 ADD + 1 DIV + 1 OTHER, + 2 CMP with eps
    (torch.logit, "aten.logit", {"add": 12, "div": 12, "other": 12}),
    (lambda x: torch.logit(x, eps=1e-3), "aten.logit", {"add": 12, "div": 12, "other": 12, "cmp": 24}),
    # log(cumsum(exp)) over rows of 4: per row 4 EXP + 3 ADD + 4 OTHER, 3 rows
    (lambda x: torch.logcumsumexp(x, 1), "aten.logcumsumexp", {"exp": 12, "add": 9, "other": 12}),
    (lambda x: torch.complex(x, x), "aten.complex", {}),
    (torch.diag_embed, "aten.diag_embed", {}),
])
def test_special_functions_by_hand(fn, op, expected):
    assert _one(fn, op, X) == expected


def test_logit_backward_by_hand():
    x = X.clone().requires_grad_()
    c = count(lambda: torch.logit(x, eps=1e-3).sum().backward())
    # g / (x * (1 - x)): 1 ADD + 1 MULT + 1 DIV, + 2 CMP (the eps range), 12 elements
    assert counts(only_record(c, "aten.logit_backward").cost) == {"add": 12, "mult": 12, "div": 12, "cmp": 24}


def test_isin_by_hand():
    e, t = torch.arange(6), torch.tensor([1, 4, 7])
    # 6 elements x 3 tests: 18 CMP + 6*2 = 12 ors = 30; invert: +6
    assert _one(torch.isin, "aten.isin", e, t) == {"cmp": 30}
    assert _one(lambda: torch.isin(e, t, invert=True), "aten.isin") == {"cmp": 36}
    assert _one(lambda: torch.isin(e, 4), "aten.isin") == {"cmp": 6}       # one test element


def test_masked_scatter_backward_and_movement_ops_move_data_only():
    x = torch.zeros(2, 3, requires_grad=True)
    src = torch.randn(6, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, True, True]])
    c = count(lambda: x.masked_scatter(mask, src).sum().backward())
    r = only_record(c, "aten.masked_scatter_backward")
    # reads the gradient (sum's: one float expanded to [2,3], 4 bytes stored) and the mask [2,3]
    # bool (6 bytes); writes the source's gradient [6] float (24 bytes)
    assert counts(r.cost) == {} and r.cost.bytes_read == 4 + 6 and r.cost.bytes_written == 24
    lu, piv = torch.linalg.lu_factor(torch.randn(3, 3))
    assert _one(torch.lu_unpack, "aten.lu_unpack", lu, piv) == {}


def test_pack_padded_sequence_moves_data():
    x = torch.randn(3, 2, 4, requires_grad=True)
    c = count(lambda: torch.nn.utils.rnn.pad_packed_sequence(
        torch.nn.utils.rnn.pack_padded_sequence(x, [3, 2]))[0].sum().backward())
    assert counts(only_record(c, "aten._pack_padded_sequence").cost) == {}


def test_gamma_and_dirichlet_draws():
    alpha = torch.full((2, 5), 2.0)
    assert _one(torch._standard_gamma, "aten._standard_gamma", alpha) == {"other": 10}
    # per row of 5: 5 gamma draws, 4 ADD, 5 DIV; 2 rows
    assert _one(torch._sample_dirichlet, "aten._sample_dirichlet", alpha) == {"other": 10, "add": 8, "div": 10}
    a = alpha.clone().requires_grad_()
    c = count(lambda: torch.distributions.Gamma(a, 1.0).rsample().sum().backward())
    assert counts(only_record(c, "aten._standard_gamma_grad").cost) == {"other": 10}


def test_matrix_exp_by_hand():
    # n = 3, batch 2: 17 products of 27 MULT and 18 ADD; 18*9 = 162 DIV; 18*3 = 54 ADD
    assert _one(torch.linalg.matrix_exp, "aten.linalg_matrix_exp", torch.randn(2, 3, 3) * 0.1) == {
        "mult": 2 * 17 * 27, "add": 2 * (17 * 18 + 54), "div": 2 * 162}


def test_affine_grid_and_3d_grid_sampling_by_hand():
    theta = torch.randn(2, 2, 3)
    # out [2,4,5,2] = 80 coordinates, each 3 MULT + 2 ADD
    assert _one(F.affine_grid, "aten.affine_grid_generator", theta, [2, 1, 4, 5], align_corners=False) == {
        "mult": 240, "add": 160}
    x, grid = torch.randn(1, 2, 3, 3, 3, requires_grad=True), torch.rand(1, 2, 2, 2, 3, requires_grad=True)
    c = count(lambda: F.grid_sample(x, grid, align_corners=False).sum().backward())
    # 8 grid points: 24 MULT + 48 ADD + 24 OTHER; 16 outputs (2 channels): 14*16 MULT + 7*16 ADD
    assert counts(only_record(c, "aten.grid_sampler_3d").cost) == {"mult": 24 + 224, "add": 48 + 112, "other": 24}
    # backward: 16 grad elements x (72 MULT + 32 ADD); 8 points x (6 MULT + 6 ADD + 3 OTHER)
    assert counts(only_record(c, "aten.grid_sampler_3d_backward").cost) == {
        "mult": 16 * 72 + 48, "add": 16 * 32 + 48, "other": 24}


def test_antialiased_downsampling_by_hand():
    # W 10 -> 4 (scale 2.5, support 2.5): outputs take inputs 0-3, 1-5, 4-8, 6-9 = 4+5+5+4 = 18 taps
    # (checked against torch's weights below); H 2 -> 2 is skipped. Planes N*C*H = 1*1*2.
    x = torch.randn(1, 1, 2, 10)
    assert _one(F.interpolate, "aten._upsample_bilinear2d_aa", x, size=(2, 4), mode="bilinear", antialias=True) == {
        "mult": 2 * 18, "add": 2 * (18 - 4)}
    taps = []
    for i in range(10):
        onehot = torch.zeros(1, 1, 1, 10)
        onehot[..., i] = 1
        taps.append((F.interpolate(onehot, size=(1, 4), mode="bilinear", antialias=True)[0, 0, 0] != 0).int())
    assert int(torch.stack(taps).sum()) == 18
    # backward (not separable, no pass skipped): H 2 -> 2 at scale 1 (support 1): output 0 covers
    # inputs 0-1 (the second of weight 0), output 1 input 1: 3 taps; products 3 * 18 = 54, 2 MULT
    # each; all 2*10 inputs reached: 54 - 20 = 34 ADD
    xg = x.clone().requires_grad_()
    c = count(lambda: F.interpolate(xg, size=(2, 4), mode="bilinear", antialias=True).sum().backward())
    assert counts(only_record(c, "aten._upsample_bilinear2d_aa_backward").cost) == {"mult": 108, "add": 34}


def test_ctc_loss_by_hand():
    t, n, classes, s = 5, 2, 4, 2                 # L = 2*2+1 = 5 extended states
    lp = torch.randn(t, n, classes).log_softmax(-1).requires_grad_()
    targets = torch.tensor([[1, 2], [3, 1]])
    c = count(lambda: F.ctc_loss(lp, targets, [5, 5], [2, 2], reduction="sum").backward())
    steps = n * (t - 1) * 5                       # 40 recursion states
    fwd = {"cmp": 2 * steps + n, "add": 7 * steps + 5 * n, "exp": 3 * steps + 2 * n, "other": steps + n}
    assert counts(only_record(c, "aten._ctc_loss").cost) == fwd
    # backward: 40 beta states, 50 state-steps (2 ADD + 2 EXP + 1 OTHER), 40 step-classes
    bwd = {"cmp": 80, "add": 7 * 40 + 2 * 50 + 3 * 40, "exp": 3 * 40 + 2 * 50 + 2 * 40, "other": 40 + 50,
           "mult": 40}
    assert counts(only_record(c, "aten._ctc_loss_backward").cost) == bwd


def test_quantized_lstm_counts_the_float_lstm_steps():
    from op_formulas.rnn import lstm_step
    lstm = torch.ao.nn.quantized.dynamic.LSTM(4, 3, num_layers=2)
    c = count(lstm, torch.randn(5, 2, 4))
    # 5 steps x 2 rows: layer 0 input 4, layer 1 input 3
    expected = lstm_step(4, 3, True) * 10 + lstm_step(3, 3, True) * 10
    assert counts(only_record(c, "aten.quantized_lstm").cost) == counts(expected)


def test_transformer_encoder_mask_check():
    t, mask = torch.randn(2, 3, 4), torch.tensor([[False, False, True], [False, True, True]])
    c = count(torch._nested_tensor_from_mask_left_aligned, t, mask)
    r = only_record(c, "aten._nested_tensor_from_mask_left_aligned")
    assert counts(r.cost) == {"cmp": 6} and (r.cost.bytes_read, r.cost.bytes_written) == (6, 0)


Y = torch.randn(3, 8)


@pytest.mark.parametrize("fn, op, expected", [
    (lambda: torch.median(Y, 1), "aten.median", {"cmp": 3 * 8 * 3}),          # 3 rows of 8: 8*log2(8) CMP
    (lambda: torch.median(Y), "aten.median", {"cmp": 24 * 5}),                 # one row of 24: ceil(log2 24) = 5
    (lambda: torch.kthvalue(Y, 2, 1), "aten.kthvalue", {"cmp": 72}),
    (lambda: torch.mode(Y, 1), "aten.mode", {"cmp": 72 + 3 * 7}),              # + n-1 run tests per row
    (lambda: torch.nanmedian(Y, 0), "aten.nanmedian", {"cmp": 8 * (3 * 2 + 2)}),   # 8 rows of 3
    (lambda: torch.count_nonzero(Y, 1), "aten.count_nonzero", {"cmp": 24, "add": 21}),
    (lambda: torch.dist(Y, Y), "aten.dist", {"add": 24 + 23, "mult": 24, "sqrt": 1}),
    (lambda: torch.linalg.cross(Y[:, :3], Y[:, 3:6]), "aten.linalg_cross", {"mult": 18, "add": 9}),
    (lambda: torch.trace(Y), "aten.trace", {"add": 2}),                        # min(3, 8) - 1
    (lambda: torch.sinc(Y), "aten.sinc", {"mult": 24, "other": 24, "div": 24, "cmp": 24}),
    (lambda: torch.special.bessel_j0(Y), "aten.special_bessel_j0", {"other": 24}),
    (lambda: torch.nan_to_num(Y), "aten.nan_to_num", {"cmp": 72}),
    (lambda: torch.asinh(Y), "aten.asinh", {"other": 24}),
    (lambda: Y.clone().floor_(), "aten.floor_", {"other": 24}),              # an in-place twin
    (lambda: Y.clone().cauchy_(), "aten.cauchy_", {"other": 24}),
])
def test_sweep_rules_by_hand(fn, op, expected):
    assert _one(fn, op) == expected


def test_inplace_twins_share_the_functional_formula():
    from op_formulas import lookup
    from op_formulas.families import INPLACE_TWINS
    aten = torch.ops.aten
    assert "floor_" in INPLACE_TWINS
    assert all(lookup(getattr(aten, n)) is lookup(getattr(aten, n[:-1])) for n in INPLACE_TWINS)


def test_aminmax_by_hand():
    # 3 rows of 8: 2*7 CMP per row; all 24 elements: 2*23
    assert _one(lambda: torch.ops.aten._aminmax(Y, 1), "aten._aminmax") == {"cmp": 42}
    assert _one(lambda: torch.ops.aten._aminmax(Y), "aten._aminmax") == {"cmp": 46}
