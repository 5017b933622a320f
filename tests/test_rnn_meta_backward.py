"""docs/counting.md, 'Where real and fake op streams differ': an LSTM on meta tensors runs
autograd's decomposition, which skips the gradients nobody needs (the model input's when it does
not require grad, the zero initial states'), while the fused oneDNN backward computes them all.
The backward MACs on meta are the real ones less exactly those products, worked out by hand."""

import pytest
import torch
from torch import nn

from conftest import count

B, T, I, H = 2, 5, 16, 32


def _backward_macs(layers: int, device: str, input_grad: bool) -> int:
    torch.manual_seed(0)
    lstm = nn.LSTM(I, H, num_layers=layers, batch_first=True).to(device)
    x = torch.randn(B, T, I, device=device, requires_grad=input_grad)

    def step():
        lstm(x)[0].sum().backward()

    return sum(r.cost.macs for r in count(step).profile.records if r.phase == "backward")


@pytest.mark.parametrize("layers, input_grad", [(2, False), (1, True), (2, True)])
def test_meta_lstm_backward_skips_the_unneeded_gradients(layers, input_grad):
    real, meta = _backward_macs(layers, "cpu", input_grad), _backward_macs(layers, "meta", input_grad)
    # the fused backward: dX and dW of the input and recurrent products of every step and layer
    fused = 2 * B * T * 4 * H * (I + H) + (layers - 1) * 2 * B * T * 4 * H * (H + H)
    assert real == fused
    skipped = layers * B * 4 * H * H                 # dh0 of each layer: h0 is a constant zero
    if not input_grad:
        skipped += B * T * 4 * H * I                 # layer 1's dX: the input needs no gradient
    assert real - meta == skipped
