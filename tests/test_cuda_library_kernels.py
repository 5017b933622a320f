"""The kernels torch calls on CUDA (and ROCm) in place of the CPU's: cuDNN's batch norm and whole-LSTM
call. A lent H100 counted the zoo's ResNet and LSTM with outputs and op streams identical to the
uncounted run but these two ops unknown (scripts/cuda_identity.py, scripts/data/h100_lent/
run7_cuda_identity_diff.csv). Their formulas are checked here against the CPU's ops of the same
module, counted on this machine: the same arithmetic, whichever library runs it."""

import torch
from torch import nn

from conftest import count
from op_formulas import lookup
from op_formulas.cost import TensorMeta

aten = torch.ops.aten
B, T, I, H, LAYERS = 3, 4, 6, 5, 2
ARITH = ("add", "mult", "div", "sqrt", "exp", "cmp", "other", "macs")


def arith(cost) -> dict[str, int]:
    return {k: getattr(cost, k) for k in ARITH}


def summed(c, op: str) -> dict[str, int]:
    costs = [r.cost for r in c.profile.records if r.op == op]
    assert costs, f"no {op} recorded"
    return {k: sum(getattr(x, k) for x in costs) for k in ARITH}


def cudnn_lstm_args(bidirectional: bool):
    """The arguments nn.LSTM(I, H, LAYERS, batch_first=True) passes to aten._cudnn_rnn on CUDA,
    as shapes (torch/nn/modules/rnn.py: flat weights w_ih, w_hh, b_ih, b_hh per layer and direction)."""
    dirs = 1 + int(bidirectional)
    weights = []
    for layer in range(LAYERS):
        i = I if layer == 0 else H * dirs
        for _ in range(dirs):
            weights += [TensorMeta((4 * H, i)), TensorMeta((4 * H, H)), TensorMeta((4 * H,)), TensorMeta((4 * H,))]
    buf = TensorMeta((sum(w.numel for w in weights),))
    state = TensorMeta((LAYERS * dirs, B, H))
    x = TensorMeta((B, T, I))
    return (x, weights, 4, buf, state, state, 2, H, 0, LAYERS, True, 0.0, True, bidirectional, [], None), state


def test_cudnn_lstm_counts_as_the_cpu_layers():
    for bidirectional in (False, True):
        torch.manual_seed(0)
        lstm = nn.LSTM(I, H, LAYERS, batch_first=True, bidirectional=bidirectional)
        x = torch.randn(B, T, I, requires_grad=True)
        c = count(lambda: lstm(x)[0].sum().backward())
        args, state = cudnn_lstm_args(bidirectional)
        dirs = 1 + int(bidirectional)
        out = TensorMeta((B, T, H * dirs))
        forward = lookup(aten._cudnn_rnn)(*args, result=(out, state, state, TensorMeta((0,)), args[3]))
        assert arith(forward) == summed(c, "aten.mkldnn_rnn_layer")
        # by hand: 4H(I_layer + H) MACs per row (B*T rows), per layer and direction
        assert forward.macs == B * T * dirs * (4 * H * (I + H) + 4 * H * (H * dirs + H))
        assert forward.bytes_written == (out.numel + 2 * state.numel) * 4        # output, hy, cy
        backward = lookup(aten._cudnn_rnn_backward)(
            *args[:6], out, out, state, state, *args[6:15], None, TensorMeta((0,)), [True, True, True, True],
            result=(TensorMeta((B, T, I)), state, state, args[1]))
        assert arith(backward) == summed(c, "aten.mkldnn_rnn_layer_backward")


def test_cudnn_lstm_other_modes_are_unknown_calls():
    import pytest

    from op_formulas.registry import UnsupportedCall
    args, state = cudnn_lstm_args(False)
    gru = args[:6] + (3,) + args[7:]
    with pytest.raises(UnsupportedCall, match="mode 3"):
        lookup(aten._cudnn_rnn)(*gru, result=(state,) * 5)
    projected = args[:8] + (2,) + args[9:]
    with pytest.raises(UnsupportedCall, match="proj_size 2"):
        lookup(aten._cudnn_rnn)(*projected, result=(state,) * 5)


def test_cudnn_and_miopen_batch_norm_count_as_native():
    x, c = TensorMeta((2, 3, 4, 4)), TensorMeta((3,))
    torch.manual_seed(0)
    for training in (False, True):
        bn = nn.BatchNorm2d(3).train(training)
        xt = torch.randn(2, 3, 4, 4, requires_grad=True)
        counted = count(lambda: bn(xt).sum().backward())
        native = summed(counted, "aten.native_batch_norm")
        saved = (c, c) if training else (TensorMeta((0,)), TensorMeta((0,)))
        for op in (aten.cudnn_batch_norm, aten.miopen_batch_norm):
            cost = lookup(op)(x, c, c, c, c, training, 0.1, 1e-5, result=(x, *saved, TensorMeta((0,), torch.uint8)))
            assert arith(cost) == native
            assert cost.bytes_written == x.numel * 4 + (2 * 3 * 4 if training else 0)
        if training:      # cuDNN's backward exists for training only: the CPU's with every gradient
            grads = summed(counted, "aten.native_batch_norm_backward")
            for op in (aten.cudnn_batch_norm_backward, aten.miopen_batch_norm_backward):
                cost = lookup(op)(x, x, c, c, c, c, c, 1e-5, TensorMeta((0,), torch.uint8), result=(x, c, c))
                assert arith(cost) == grads
