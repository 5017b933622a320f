"""Formulas added for issue #15, each checked on a real torch call with the arithmetic by hand."""

import torch
import torch.nn.functional as F

from conftest import count, counts


def _records(c, op):
    return [r for r in c.profile.records if r.op == op]


def test_conv_backward_with_stride_above_kernel_never_negative():
    # conv1d, input length 10, kernel 2, stride 4: 3 outputs reach inputs {0,1,4,5,8,9} = 6 of 10.
    # Cout = 2: grad_input has 3 outputs * 2 channels * 2 taps = 12 products, landing on 6 inputs
    # (2 each): 12 - 6 = 6 ADD (the old rule gave 12 - 10 = 2 and, with Cout = 1, 6 - 10 = -4).
    x = torch.randn(1, 1, 10, requires_grad=True)
    w = torch.randn(2, 1, 2, requires_grad=True)
    c = count(lambda: F.conv1d(x, w, stride=4).sum().backward())
    (bwd,) = _records(c, "aten.convolution_backward")
    # grad_weight: 12 products summed into 4 weights: 8 ADD. grad_input: 12 MULT, 6 ADD.
    assert counts(bwd.cost) == {"mult": 24, "add": 6 + 8, "macs": 24}
    w1 = torch.randn(1, 1, 2, requires_grad=True)
    c = count(lambda: F.conv1d(x, w1, stride=4).sum().backward())
    (bwd,) = _records(c, "aten.convolution_backward")
    # grad_input 6 products on 6 inputs: 0 ADD; grad_weight 6 products into 2 weights: 4 ADD
    assert counts(bwd.cost) == {"mult": 12, "add": 4, "macs": 12}
    assert all(getattr(r.cost, k) >= 0 for r in c.profile.records for k in ("add", "mult"))


def test_transposed_conv_with_stride_above_kernel_counts_reached_outputs():
    # conv_transpose1d: 2 inputs, kernel 1, stride 3: 4 outputs, products land on {0, 3}: 0 ADD.
    x, w = torch.randn(1, 1, 2), torch.randn(1, 1, 1)
    c = count(lambda: F.conv_transpose1d(x, w, stride=3))
    (r,) = _records(c, "aten.convolution")
    assert counts(r.cost) == {"mult": 2, "macs": 2}


def _one(c, op):
    (r,) = _records(c, op)
    return counts(r.cost)


def test_activations_by_hand():
    x = torch.randn(3, 4)                                  # 12 elements
    # mish: softplus (1 EXP + 1 ADD + 1 OTHER) + tanh (1 OTHER) + 1 MULT, per element
    assert _one(count(F.mish, x), "aten.mish") == {"exp": 12, "add": 12, "other": 24, "mult": 12}
    # hardswish: x * clamp(x + 3, 0, 6) / 6: 1 ADD + 2 CMP + 1 MULT + 1 DIV
    assert _one(count(F.hardswish, x), "aten.hardswish") == {"add": 12, "cmp": 24, "mult": 12, "div": 12}
    # prelu with 1 weight: 1 CMP + 1 MULT per element
    assert _one(count(F.prelu, x, torch.tensor([0.25])), "aten._prelu_kernel") == {"cmp": 12, "mult": 12}
    # xlogy: x == 0 test, log, product
    assert _one(count(torch.xlogy, x, x.abs()), "aten.xlogy") == {"cmp": 12, "other": 12, "mult": 12}
    assert _one(count(torch.sgn, x), "aten.sgn") == {"cmp": 12}
    # glu over [3, 4] -> [3, 2]: sigmoid (EXP, ADD, DIV) + 1 MULT per output: 6 outputs
    assert _one(count(F.glu, x), "aten.glu") == {"exp": 6, "add": 6, "div": 6, "mult": 6}


def test_activation_backwards_by_hand():
    x = torch.randn(3, 4, requires_grad=True)
    # leaky_relu backward: 1 CMP + 1 MULT per element
    c = count(lambda: F.leaky_relu(x).sum().backward())
    assert _one(c, "aten.leaky_relu_backward") == {"cmp": 12, "mult": 12}
    # softplus backward (beta 1): 1 CMP + sigmoid (EXP, ADD, DIV) + 1 MULT
    c = count(lambda: F.softplus(x).sum().backward())
    assert _one(c, "aten.softplus_backward") == {"cmp": 12, "exp": 12, "add": 12, "div": 12, "mult": 12}
    # elu backward from the input (is_result False): 1 CMP + 1 EXP + 3 MULT
    c = count(lambda: F.elu(x).sum().backward())
    assert _one(c, "aten.elu_backward") == {"cmp": 12, "exp": 12, "mult": 36}
    # hardswish backward: 2 CMP + 2 MULT + 1 ADD + 1 DIV
    c = count(lambda: F.hardswish(x).sum().backward())
    assert _one(c, "aten.hardswish_backward") == {"cmp": 24, "mult": 24, "add": 12, "div": 12}


def test_group_norm_backward_by_hand():
    # N=2, C=4, HxW=9, G=2: rows N*G = 4 of n = 2*9 = 18; per channel m = N*HxW = 18.
    # grad_input per row (normalise_backward_row, weight): ADD n + 2(n-1) + 2n = 18+34+36 = 88,
    #   MULT n + n + 4n = 108, DIV 1 -> x4 rows: 352 ADD, 432 MULT, 4 DIV
    # grad_weight: numel 72 MULT + (18-1)*4 = 68 ADD; grad_bias: 68 ADD
    x = torch.randn(2, 4, 3, 3, requires_grad=True)
    w, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    c = count(lambda: F.group_norm(x, 2, w, b).sum().backward())
    assert _one(c, "aten.native_group_norm_backward") == {"add": 352 + 68 + 68, "mult": 432 + 72, "div": 4}


def test_losses_by_hand():
    x, y = torch.randn(3, 4), torch.rand(3, 4)
    # BCE with logits, mean: per element 2 CMP, 1 MULT, 4 ADD, 1 EXP, 1 OTHER; then 11 ADD + 1 DIV
    assert _one(count(F.binary_cross_entropy_with_logits, x, y), "aten.binary_cross_entropy_with_logits") == {
        "cmp": 24, "mult": 12, "add": 48 + 11, "exp": 12, "other": 12, "div": 1}
    # smooth L1, mean: 2 ADD, 2 CMP, 2 MULT, 1 DIV per element; 11 ADD + 1 DIV
    assert _one(count(F.smooth_l1_loss, x, y), "aten.smooth_l1_loss") == {
        "add": 24 + 11, "cmp": 24, "mult": 24, "div": 12 + 1}
    # Huber, sum: 2 ADD, 2 CMP, 3 MULT per element; 11 ADD
    assert _one(count(F.huber_loss, x, y, reduction="sum"), "aten.huber_loss") == {
        "add": 24 + 11, "cmp": 24, "mult": 36}
    xg = x.clone().requires_grad_()
    c = count(lambda: F.huber_loss(xg, y).backward())
    # backward, mean: 1 ADD, 3 CMP, 2 MULT, +1 DIV per element
    assert _one(c, "aten.huber_loss_backward") == {"add": 12, "cmp": 36, "mult": 24, "div": 12}


def test_upsampling_by_hand():
    x = torch.randn(1, 2, 4, 4, requires_grad=True)
    # bilinear 4x4 -> 8x8, 2 channels: 128 outputs * (6 MULT + 3 ADD)
    c = count(lambda: F.interpolate(x, scale_factor=2, mode="bilinear").sum().backward())
    assert _one(c, "aten.upsample_bilinear2d") == {"mult": 768, "add": 384}
    # backward: 4 taps per output, 2 MULT each: 128*8 = 1024 MULT; ADD = 512 products - 32 inputs
    assert _one(c, "aten.upsample_bilinear2d_backward") == {"mult": 1024, "add": 480}
    # nearest 4x4 -> 8x8: movement; backward adds 128 gradients into 32 inputs: 96 ADD
    c = count(lambda: F.interpolate(x, scale_factor=2, mode="nearest").sum().backward())
    assert _one(c, "aten.upsample_nearest2d") == {}
    assert _one(c, "aten.upsample_nearest2d_backward") == {"add": 96}
    # nearest downsampling 4 -> 2 per dim: 8 gradients into 8 distinct inputs: 0 ADD
    c = count(lambda: F.interpolate(x, size=(2, 2), mode="nearest").sum().backward())
    assert _one(c, "aten.upsample_nearest2d_backward") == {}


def test_interpolation_reached_inputs_when_shrinking():
    # linear 1d, 8 -> 2, align_corners False: sources (i + .5) * 4 - .5 = 1.5, 5.5 -> taps {1,2,5,6}
    x = torch.randn(1, 1, 8, requires_grad=True)
    c = count(lambda: F.interpolate(x, size=2, mode="linear").sum().backward())
    # 2 outputs * 2 taps = 4 products (1 MULT each), landing on 4 distinct inputs: 0 ADD
    assert _one(c, "aten.upsample_linear1d_backward") == {"mult": 4}


def test_pad_backward_and_pixel_shuffle():
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    # reflect pad 1 on each side: 2*7*7 = 98 grads into 50 inputs: 48 ADD
    c = count(lambda: F.pad(x, (1, 1, 1, 1), mode="reflect").sum().backward())
    assert _one(c, "aten.reflection_pad2d_backward") == {"add": 48}
    c = count(lambda: F.pad(x, (1, 1, 1, 1), mode="replicate").sum().backward())
    assert _one(c, "aten.replication_pad2d_backward") == {"add": 48}
    c = count(F.pixel_shuffle, torch.randn(1, 8, 3, 3), 2)
    r = _records(c, "aten.pixel_shuffle")[0]
    assert counts(r.cost) == {} and r.cost.bytes_read == r.cost.bytes_written == 72 * 4


def test_embedding_bag_by_hand():
    # 6 indices in 2 bags of 3, rows of D=3: sum merges 4 rows per column: (6-2)*3 = 12 ADD;
    # mean adds 2*3 DIV; reads 6 gathered rows (72 bytes) + indices (48) + offsets (16)
    w = torch.randn(10, 3, requires_grad=True)
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3])
    c = count(lambda: F.embedding_bag(idx, w, off, mode="mean").sum().backward())
    (r,) = _records(c, "aten._embedding_bag")
    assert counts(r.cost) == {"add": 12, "div": 6} and r.cost.bytes_read == 72 + 48 + 16
    # backward: every index adds its bag's row: 18 ADD, mean 18 DIV
    assert _one(c, "aten._embedding_bag_backward") == {"add": 18, "div": 18}


def test_fft_by_hand():
    # fft of 4 signals of n=8: complex N = 32 elements, log2 8 = 3 stages: 2*32*3 MULT, 3*32*3 ADD
    c = count(torch.fft.fft, torch.randn(4, 8))
    assert _one(c, "aten._fft_r2c") == {"mult": 192, "add": 288}
    # "ortho" scales each of the 32 complex outputs: +64 MULT
    c = count(torch.fft.fft, torch.randn(4, 8, dtype=torch.complex64), norm="ortho")
    assert _one(c, "aten._fft_c2c") == {"mult": 192 + 64, "add": 288}
    # irfft back to n=8 reals (default "backward" norm scales 1/n: 32 real outputs, 32 MULT)
    c = count(torch.fft.irfft, torch.randn(4, 5, dtype=torch.complex64))
    assert _one(c, "aten._fft_c2r") == {"mult": 192 + 32, "add": 288}
    # n = 6 rounds up to 3 stages
    c = count(torch.fft.fft, torch.randn(6))
    assert _one(c, "aten._fft_r2c") == {"mult": 2 * 6 * 3, "add": 3 * 6 * 3}


def test_linalg_by_hand():
    a = torch.randn(4, 4) + 4 * torch.eye(4)
    # LU of n=4: CMP = DIV = 4*3/2 = 6, MULT = ADD = 3*4*7/6 = 14
    # solve with 2 rhs: unit lower 2*(6 MULT, 6 ADD), upper 2*(6 MULT, 6 ADD, 4 DIV)
    c = count(torch.linalg.solve, a, torch.randn(4, 2))
    assert _one(c, "aten._linalg_solve_ex") == {"cmp": 6, "div": 6 + 8, "mult": 14 + 24, "add": 14 + 24}
    # cholesky n=4: products 6 + 4 = 10 MULT and ADD, 6 DIV, 4 SQRT
    spd = a @ a.T
    assert _one(count(torch.linalg.cholesky, spd), "aten.linalg_cholesky_ex") == {
        "mult": 10, "add": 10, "div": 6, "sqrt": 4}
    # det: LU + 3 MULT
    assert _one(count(torch.linalg.det, a), "aten._linalg_det") == {"cmp": 6, "div": 6, "mult": 17, "add": 14}
    # symmetric eig with vectors: 9 * 64 = 576 flops: 288 MULT + 288 ADD
    assert _one(count(torch.linalg.eigh, spd), "aten._linalg_eigh") == {"mult": 288, "add": 288}
    # thin SVD of 4x3: 6*4*9 + 11*27 = 216 + 297 = 513 flops: 256 MULT, 257 ADD
    assert _one(count(torch.linalg.svd, torch.randn(4, 3), full_matrices=False), "aten._linalg_svd") == {
        "mult": 256, "add": 257}


def test_cholesky_closed_form_matches_the_loop():
    from op_formulas.linalg import cholesky_cost, lu_cost
    for n in range(1, 9):
        products = sum(j for j in range(n)) + sum(j * (n - 1 - j) for j in range(n))
        assert cholesky_cost(n).mult == products
        assert lu_cost(n).mult == sum((n - k - 1) ** 2 for k in range(n))


def test_complex_matmul_counts_real_arithmetic():
    # [3,4] @ [4,5] complex: per output 4 complex products (16 MULT + 8 ADD) and 3 complex adds
    # (6 ADD): 15 outputs -> 240 MULT, 210 ADD (not 60 MULT / 45 ADD); MACs 4 real per complex
    a, b = torch.randn(3, 4, dtype=torch.complex64), torch.randn(4, 5, dtype=torch.complex64)
    assert _one(count(torch.mm, a, b), "aten.mm") == {"mult": 240, "add": 210, "macs": 240}
    # complex * complex elementwise: 4 MULT + 2 ADD each; complex * real: 2 MULT each
    assert _one(count(torch.mul, a, a), "aten.mul") == {"mult": 48, "add": 24}
    assert _one(count(torch.mul, a, torch.randn(3, 4)), "aten.mul") == {"mult": 24}


def test_quantized_dynamic_linear_by_hand():
    model = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 5)),
                                                   {torch.nn.Linear}, dtype=torch.qint8)
    x = torch.randn(2, 4)
    c = count(model, x)
    (r,) = _records(c, "quantized.linear_dynamic")
    # input range: 2*(8-1) = 14 CMP + 2 ADD + 1 DIV + 1 OTHER; quantise 8 elements: 8 DIV, 8 ADD,
    # 8 OTHER, 16 CMP; int8 [2,4] x [5,4]^T: 40 MULT, 30 ADD, 40 MACs; per output 2 MULT + 2 ADD
    assert counts(r.cost) == {"cmp": 30, "add": 2 + 8 + 30 + 20, "div": 9, "other": 9,
                              "mult": 40 + 20, "macs": 40}
    # bytes: float input 32 + int8 weight 20 + float bias 20; output 40
    assert (r.cost.bytes_read, r.cost.bytes_written) == (72, 40)
    assert list(c.unknown_ops()) == []


def test_is_all_true_and_cdist():
    assert _one(count(lambda: torch.ones(5, dtype=torch.bool)._is_all_true()), "aten._is_all_true") == {"cmp": 4}
    # 3 x 5 pairs of 4 features, p=2: 4 ADD + 4 MULT + 3 ADD + 1 SQRT per pair
    c = count(torch.cdist, torch.randn(3, 4), torch.randn(5, 4))
    assert _one(c, "aten._cdist_forward") == {"add": 105, "mult": 60, "sqrt": 15}


def test_inv_and_qr_by_hand():
    # inv of 2x2: LU (1 CMP, 1 DIV, 1 MULT, 1 ADD) + unit-lower solves of 2 rhs (2 MULT, 2 ADD)
    # + upper solves of 2 rhs (2 MULT, 2 ADD, 4 DIV)
    a = torch.tensor([[4.0, 1.0], [2.0, 3.0]])
    assert _one(count(torch.linalg.inv, a), "aten.linalg_inv_ex") == {"cmp": 1, "div": 5, "mult": 5, "add": 5}
    # Householder QR of 3x2, reduced Q. Column 0 (l=3): reflector 3 MULT + 3 ADD + SQRT + CMP + DIV,
    # applied to 1 column (7 MULT, 5 ADD), Q formed over 2 columns (14 MULT, 10 ADD).
    # Column 1 (l=2): reflector 2 MULT + 2 ADD + SQRT + CMP + DIV, Q over 1 column (5 MULT, 3 ADD).
    c = count(torch.linalg.qr, torch.randn(3, 2))
    assert _one(c, "aten.linalg_qr") == {"mult": 31, "add": 23, "sqrt": 2, "cmp": 2, "div": 2}


def test_lstm_bytes_written_are_the_same_on_real_and_fake_tensors():
    from dispatchprof import fake_mode, fake_model

    torch.manual_seed(0)
    real = torch.nn.LSTM(16, 32, batch_first=True)
    c_real = count(real, torch.randn(2, 5, 16))
    fake = fake_model(lambda: torch.nn.LSTM(16, 32, batch_first=True))
    with fake_mode(fake):
        x = torch.randn(2, 5, 16)
    c_fake = count(fake, x)
    (r,), (f,) = _records(c_real, "aten.mkldnn_rnn_layer"), _records(c_fake, "aten.mkldnn_rnn_layer")
    # output [2,5,32] + hy [1,2,32] + cy [1,2,32] in float32: (320 + 64 + 64) * 4 = 1792 bytes
    # (the real kernel's 32 KiB oneDNN workspace used to be counted: 34,560 vs 1,792)
    assert r.cost.bytes_written == f.cost.bytes_written == 1792
    assert r.cost == f.cost
