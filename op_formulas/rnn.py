"""Recurrent layers fused by oneDNN on CPU (``mkldnn_rnn_layer``, one layer and direction a call) and
by cuDNN on CUDA (``_cudnn_rnn``, every layer and direction in one call): LSTM, forward and backward.

LSTM, per time step and batch row, with input size I and hidden size H:
gates = W_ih x + W_hh h (+ b_ih + b_hh): 4H*(I+H) MULT and MACs, 4H*(I-1) + 4H*(H-1) ADD,
    4H ADD to join the two products, 8H ADD for the biases;
i, f, o = sigmoid (3H sigmoids), g = tanh (H OTHER);
c = f*c + i*g: 2H MULT + H ADD;  h = o * tanh(c): H OTHER + H MULT.
Other modes (GRU, plain RNN) are reported as unknown calls. The dynamically quantized LSTM
(``quantized_lstm``) counts the same steps per layer and direction.
"""

from __future__ import annotations

from typing import Any

import torch

from op_formulas.cost import Cost, TensorMeta
from op_formulas.pointwise import SIGMOID
from op_formulas.registry import UnsupportedCall, formula

aten = torch.ops.aten
LSTM_MODE = 2  # cudnn/oneDNN mode numbering: 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU


def lstm_step(i: int, h: int, biases: bool) -> Cost:
    """One time step of one batch row (module docstring)."""
    gates = Cost(mult=4 * h * (i + h), macs=4 * h * (i + h),
                 add=4 * h * (i - 1) + 4 * h * (h - 1) + 4 * h + 8 * h * int(biases))
    cell = SIGMOID * (3 * h) + Cost(other=h) + Cost(mult=2 * h, add=h) + Cost(other=h, mult=h)
    return gates + cell


def lstm_step_backward(i: int, h: int) -> Cost:
    """Backpropagation through one step of one row (reference algorithm):
    dh = grad + dh_next (H ADD); tanh(c) again (H OTHER); do = dh*tanh(c) (H MULT);
    dc = dc_next + dh*o*(1 - tanh(c)^2) (3H MULT + 2H ADD); di, dg, df, dc_prev
    (4H MULT); sigmoid' of i, f, o: d*s*(1-s) (3H * (2 MULT + 1 ADD)); tanh' of g:
    d*(1-g^2) (2H MULT + H ADD); dx = W_ih^T dgates (I*4H MULT and MACs, I*(4H-1) ADD);
    dh_prev = W_hh^T dgates (H*4H MULT and MACs, H*(4H-1) ADD)."""
    pointwise = Cost(add=h + 2 * h + 3 * h + h, mult=h + 3 * h + 4 * h + 6 * h + 2 * h, other=h)
    grads_in = Cost(mult=4 * h * (i + h), macs=4 * h * (i + h), add=(i + h) * (4 * h - 1))
    return pointwise + grads_in


def _sizes(x: TensorMeta, batch_first: bool) -> tuple[int, int, int]:
    """(steps, batch, input size) of a [T,B,I] (or [B,T,I]) input; 2-D input is unbatched."""
    if len(x.shape) == 2:
        return x.shape[0], 1, x.shape[1]
    t, b, i = x.shape
    return (b, t, i) if batch_first else (t, b, i)


@formula(aten.mkldnn_rnn_layer)
def mkldnn_rnn_layer(x: TensorMeta, w_ih: TensorMeta, w_hh: TensorMeta, b_ih: Any, b_hh: Any,
                     hx: Any, cx: Any, reverse: bool, batch_sizes: Any, mode: int, hidden_size: int,
                     num_layers: int, has_biases: bool, bidirectional: bool, batch_first: bool,
                     train: bool, *, result: Any, **kwargs: Any) -> Cost:
    """One direction of one layer: steps * batch LSTM steps (module docstring). Writes the output,
    hy and cy; the oneDNN workspace (4th result, sized by the backend: empty on fake and meta
    tensors) is the kernel's scratch, not counted, so real and fake tensors give the same bytes."""
    if mode != LSTM_MODE:
        raise UnsupportedCall(f"mkldnn_rnn_layer mode {mode} (only LSTM, mode 2, has a formula)")
    t, b, i = _sizes(x, batch_first)
    written = sum(r.nbytes for r in result[:3] if isinstance(r, TensorMeta))
    return (lstm_step(i, hidden_size, has_biases) * (t * b)).with_bytes(written=written)


def lstm_layer_backward(i: int, h: int, n: int, biases: bool) -> Cost:
    """One layer and direction over n = steps*batch rows: n `lstm_step_backward`, plus weight
    gradients summed over the rows: dW_ih 4H*I*n MULT and MACs, 4H*I*(n-1) ADD; dW_hh 4H*H*n,
    4H*H*(n-1); db 4H*(n-1) ADD (b_hh's gradient equals b_ih's: a copy)."""
    weights = Cost(mult=4 * h * (i + h) * n, macs=4 * h * (i + h) * n,
                   add=4 * h * (i + h) * (n - 1) + 4 * h * (n - 1) * int(biases))
    return lstm_step_backward(i, h) * n + weights


@formula(aten.mkldnn_rnn_layer_backward)
def mkldnn_rnn_layer_backward(x: TensorMeta, w_ih: TensorMeta, w_hh: TensorMeta, *args: Any,
                              result: Any, **kwargs: Any) -> Cost:
    """`lstm_layer_backward` over the steps*batch rows. Reads every tensor argument but the
    oneDNN workspace (as the forward does not write it: empty on fake and meta tensors); writes all
    seven gradients (the fake kernel returns one tensor for both bias gradients: counted twice,
    as the real kernel writes two), so real and fake tensors give the same bytes."""
    mode, hidden, has_biases, batch_first = args[11], args[12], args[14], args[18]
    if mode != LSTM_MODE:
        raise UnsupportedCall(f"mkldnn_rnn_layer_backward mode {mode} (only LSTM has a formula)")
    t, b, i = _sizes(x, batch_first)
    read = sum(a.nbytes for a in (x, w_ih, w_hh, *args[:10]) if isinstance(a, TensorMeta))
    written = sum(r.nbytes for r in result if isinstance(r, TensorMeta))
    return lstm_layer_backward(i, hidden, t * b, has_biases).with_bytes(read=read, written=written)


def _cudnn_layers(x: TensorMeta, weight_stride0: int, mode: int, hidden: int, proj: int, layers: int,
                  batch_first: bool, bidirectional: bool, batch_sizes: Any, op: str) -> tuple[list[int], int, bool]:
    """(input size of each layer, rows n = steps*batch, biases) of one ``_cudnn_rnn`` call: layer 0
    reads the input's I features, later layers the H * directions of the layer below; a packed
    sequence (``batch_sizes`` given) has its rows as the input's first dimension."""
    if mode != LSTM_MODE:
        raise UnsupportedCall(f"{op} mode {mode} (only LSTM, mode 2, has a formula)")
    if proj:
        raise UnsupportedCall(f"{op} with proj_size {proj} (LSTM projections have no formula)")
    if batch_sizes:
        n, i = x.shape[0], x.shape[-1]
    else:
        t, b, i = _sizes(x, batch_first)
        n = t * b
    dirs = 1 + int(bidirectional)
    return [i if layer == 0 else hidden * dirs for layer in range(layers) for _ in range(dirs)], n, weight_stride0 == 4


@formula(aten._cudnn_rnn)
def cudnn_rnn(x: TensorMeta, weight: Any, weight_stride0: int, weight_buf: Any, hx: Any, cx: Any, mode: int,
              hidden_size: int, proj_size: int, num_layers: int, batch_first: bool, dropout: float, train: bool,
              bidirectional: bool, batch_sizes: Any, dropout_state: Any, *, result: Any, **kwargs: Any) -> Cost:
    """cuDNN's whole LSTM (every layer and direction, nn.LSTM on CUDA): n = steps*batch
    `lstm_step` per layer and direction, as the CPU's ``mkldnn_rnn_layer`` calls count them.
    Writes the output, hy and cy; the reserve space and the flat weight buffer (4th and 5th
    results) are cuDNN's own, not counted."""
    inputs, n, biases = _cudnn_layers(x, weight_stride0, mode, hidden_size, proj_size, num_layers, batch_first,
                                      bidirectional, batch_sizes, "_cudnn_rnn")
    total = Cost()
    for i in inputs:
        total += lstm_step(i, hidden_size, biases) * n
    written = sum(r.nbytes for r in result[:3] if isinstance(r, TensorMeta))
    return total.with_bytes(written=written)


@formula(aten._cudnn_rnn_backward)
def cudnn_rnn_backward(x: TensorMeta, weight: Any, weight_stride0: int, weight_buf: Any, hx: Any, cx: Any,
                       output: Any, grad_output: Any, grad_hy: Any, grad_cy: Any, mode: int, hidden_size: int,
                       proj_size: int, num_layers: int, batch_first: bool, dropout: float, train: bool,
                       bidirectional: bool, batch_sizes: Any, *args: Any, result: Any, **kwargs: Any) -> Cost:
    """`lstm_layer_backward` per layer and direction over the n = steps*batch rows, as the CPU's
    ``mkldnn_rnn_layer_backward`` calls count them."""
    inputs, n, biases = _cudnn_layers(x, weight_stride0, mode, hidden_size, proj_size, num_layers, batch_first,
                                      bidirectional, batch_sizes, "_cudnn_rnn_backward")
    total = Cost()
    for i in inputs:
        total += lstm_layer_backward(i, hidden_size, n, biases)
    return total


@formula(aten.quantized_lstm)
def quantized_lstm(x: TensorMeta, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
                   train: bool, bidirectional: bool, batch_first: bool, *, result: Any, **kwargs: Any) -> Cost:
    """Dynamically quantized LSTM (torch.ao's nn.quantized.dynamic.LSTM): the float LSTM's
    `lstm_step` per step, batch row, layer and direction; the first layer's input size is I,
    later layers' H * directions. H comes from the hidden state [layers*dirs, B, H].
    NB: the per-step quantisation of activations (scale, round, clamp) is not counted."""
    t, b, i = _sizes(x, batch_first)
    h, dirs = hx[0].shape[-1], 1 + int(bidirectional)
    per_layer = [lstm_step(i if layer == 0 else h * dirs, h, has_biases) for layer in range(num_layers)]
    total = Cost()
    for step in per_layer:
        total += step * (t * b * dirs)
    return total
