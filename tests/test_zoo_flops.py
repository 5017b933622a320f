"""scripts/zoo_flops.py: 2 x MACs against FlopCounterMode by op family, and the two places where
torch's figure is not the model's arithmetic (grouped convolution backward, fused attention
backward's recomputed Q K^T), each worked by hand."""

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count

import zoo_flops
from conftest import count, only_record


def _depthwise(x, w):
    return F.conv2d(x, w, padding=1, groups=4)


def _flop_counter(fn):
    with FlopCounterMode(display=False) as f:
        fn()
    return {str(op): flops for op, flops in f.get_flop_counts()["Global"].items()}


def test_depthwise_conv_backward_by_hand_and_as_one_convolution_per_group():
    x = torch.randn(1, 4, 5, 5, requires_grad=True)
    w = torch.randn(4, 1, 3, 3, requires_grad=True)
    c = count(lambda: _depthwise(x, w).sum().backward())
    # 4 channels x 25 positions x 9 taps = 900 MACs forward; backward: the input gradient
    # (900) and the weight gradient (4 x 9 weights x 25 positions = 900)
    assert only_record(c, "aten.convolution").cost.macs == 900
    assert only_record(c, "aten.convolution_backward").cost.macs == 1800
    # FlopCounterMode on the same layer written as 4 one-channel convolutions: 2 x 1800
    split = _flop_counter(lambda: sum(F.conv2d(x[:, i:i + 1], w[i:i + 1], padding=1).sum()
                                      for i in range(4)).backward())
    assert split["aten.convolution_backward"] == 2 * 1800
    # torch's own formula ignores groups in the weight gradient: 2 x (900 + 4 x 900)
    assert _flop_counter(lambda: _depthwise(x, w).sum().backward())["aten.convolution_backward"] == 2 * 4500
    # the script's per-group formula gives the split figure
    with FlopCounterMode(display=False, custom_mapping=zoo_flops.TORCH_FORMULAS) as f:
        _depthwise(x, w).sum().backward()
    assert f.get_flop_counts()["Global"][torch.ops.aten.convolution_backward] == 2 * 1800


def test_fused_attention_backward_less_the_recomputed_product():
    q, k = (1, 2, 4, 8), (1, 2, 6, 8)             # B 1, H 2, Lq 4, Lk 6, E = Ev = 8
    # 4 products of B*H*Lq*Lk*E = 384 MACs each (dV, dP, dQ, dK): 2 x 1536 FLOPs
    assert zoo_flops._fused_backward(q, q, k, k) == 2 * 4 * 384
    assert sdpa_backward_flop_count(q, q, k, k) == 2 * 5 * 384      # torch's: Q K^T recomputed too


def test_a_family_that_differs_is_reported_and_one_torch_does_not_count_is_listed():
    same, uncounted, differ = zoo_flops.compare({"aten.mm": 10, "aten._grouped_mm": 8, "attention + bmm": 6},
                                                {"aten.mm": 12, "attention + bmm": 6})
    assert (same, uncounted, differ) == (1, {"aten._grouped_mm": 4}, ["aten.mm: ours 10, FlopCounterMode 12"])


def test_zoo_models_equal_flop_counter_on_every_family_it_counts(capsys):
    # SAM: attention on the fused kernel and on the math path (a relative-position mask) in one
    # model; Wav2Vec2: a grouped convolution; LSTM, Mixtral: kernels FlopCounterMode has no formula for
    assert zoo_flops.main(["--models", "sam", "wav2vec2", "lstm", "mixtral"]) == 0
    out = capsys.readouterr().out
    assert "aten.mkldnn_rnn_layer 143,360" in out and "aten._grouped_mm 1,179,648" in out
