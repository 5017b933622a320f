"""Static int8 convolutions (quantized.conv1d/2d/3d, fused relu and add, transposed): integer MACs,
scale arithmetic, bytes at stored width (op_formulas/quantized.py)."""

import warnings

import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq

from dispatchprof import OpCounter

# requantising one output: x / scale + zero_point, rounded, clamped: 1 DIV, 1 ADD, 1 OTHER, 2 CMP
QUANTIZE = {"div": 1, "add": 1, "other": 1, "cmp": 2}


def record(module, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            module(x)
    assert list(c.unknown_ops()) == []
    (r,) = [r for r in c.profile.records if r.op.startswith("quantized.conv")]
    return r


def per_output(outputs, mult, add, cmp=0):
    """Counts for ``outputs`` outputs, each with ``mult`` MULT and ``add`` ADD before requantising."""
    return {"mult": outputs * mult, "add": outputs * (add + QUANTIZE["add"]), "div": outputs,
            "other": outputs, "cmp": outputs * (QUANTIZE["cmp"] + cmp)}


def counts(cost, names=("mult", "add", "div", "other", "cmp")):
    return {n: getattr(cost, n) for n in names}


def quint8(*shape):
    return torch.quantize_per_tensor(torch.randn(*shape), 0.1, 0, torch.quint8)


def test_int8_conv2d_by_hand():
    # x [2,4,5,5] quint8, weight [6,4,3,3] qint8, padding 1: out [2,6,5,5] = 300 outputs.
    # per output: 4*9 = 36 integer MULT/MACs, 35 ADD + 1 ADD bias; rescale 1 MULT, zero point
    # 1 MULT + 1 ADD: 38 MULT, 37 ADD, then requantise
    r = record(nnq.Conv2d(4, 6, 3, padding=1), quint8(2, 4, 5, 5))
    assert counts(r.cost) == per_output(300, mult=38, add=37) == {
        "mult": 11400, "add": 11400, "div": 300, "other": 300, "cmp": 600}
    assert r.cost.macs == 300 * 36
    # bytes: input 200 x 1 B, int8 weight 216 B, float32 bias 6 x 4 B; output 300 x 1 B
    assert (r.cost.bytes_read, r.cost.bytes_written) == (200 + 216 + 24, 300)


def test_grouped_int8_conv_without_bias_and_fused_relu():
    # groups=2: each output sees Cin/g = 2 channels x 9 = 18 products, 17 ADD, no bias;
    # out [2,6,3,3] = 108 outputs
    r = record(nnq.Conv2d(4, 6, 3, groups=2, bias=False), quint8(2, 4, 5, 5))
    assert counts(r.cost) == per_output(108, mult=18 + 2, add=17 + 1)
    assert (r.cost.macs, r.cost.bytes_read) == (108 * 18, 200 + 6 * 2 * 9)
    # ConvReLU2d: the full conv (36 products, 36 ADD with bias) and 1 CMP per output for the relu
    r = record(nniq.ConvReLU2d(4, 6, 3), quint8(2, 4, 5, 5))
    assert r.op == "quantized.conv2d_relu"
    assert counts(r.cost) == per_output(108, mult=38, add=37, cmp=1)


def test_int8_conv1d_and_conv3d():
    # conv1d packs a [6,4,1,3] kernel: x [2,4,7] -> out [2,6,5] = 60 outputs of 12 products
    r = record(nnq.Conv1d(4, 6, 3), quint8(2, 4, 7))
    assert counts(r.cost) == per_output(60, mult=12 + 2, add=12 + 1) and r.cost.macs == 720
    # conv3d: x [1,2,4,4,4], weight [4,2,3,3,3] -> out [1,4,2,2,2] = 32 outputs of 54 products
    r = record(nnq.Conv3d(2, 4, 3), quint8(1, 2, 4, 4, 4))
    assert counts(r.cost) == per_output(32, mult=54 + 2, add=54 + 1) and r.cost.macs == 32 * 54


def test_int8_transposed_conv_scatters():
    # x [1,1,2,2], kernel 2, stride 2: each of the 4 inputs writes its own 2x2 tile of the [4,4]
    # output: 16 products, each output reached once (16 - 16 = 0 scatter ADD), +1 ADD bias;
    # then 2 MULT + 1 ADD and requantise per output
    r = record(nnq.ConvTranspose2d(1, 1, 2, stride=2), quint8(1, 1, 2, 2))
    assert counts(r.cost) == per_output(16, mult=1 + 2, add=0 + 1 + 1)
    assert r.cost.macs == 16


def test_static_quantized_model_counts_every_op():
    model = torch.nn.Sequential(torch.ao.quantization.QuantStub(), torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                torch.ao.quantization.DeQuantStub())
    model.eval().qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = torch.ao.quantization.prepare(model)
        prepared(torch.randn(1, 3, 6, 6))
        quantized = torch.ao.quantization.convert(prepared)
        with OpCounter() as c:
            quantized(torch.randn(1, 3, 6, 6))
    assert list(c.unknown_ops()) == []
    (conv,) = [r for r in c.profile.records if r.op.startswith("quantized.conv")]
    assert conv.cost.macs == 4 * 4 * 4 * 27                      # out [1,4,4,4], 3*9 products each


def test_dynamic_int8_conv2d_by_hand():
    import torch.ao.nn.quantized.dynamic as nnqd

    # float x [2,4,5,5] = 200 elements: range 2*(200-1) = 398 CMP + 2 ADD + 1 DIV + 1 OTHER, then
    # quantise each: 1 DIV, 1 ADD, 1 OTHER, 2 CMP. Conv [6,4,3,3], no padding: out [2,6,3,3] = 108
    # outputs of 36 products, 35 + 1 (bias) ADD, then 2 MULT + 1 ADD; float output, no requantising
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter() as c:
            nnqd.Conv2d(4, 6, 3)(torch.randn(2, 4, 5, 5))
    assert list(c.unknown_ops()) == []
    (r,) = [r for r in c.profile.records if r.op == "quantized.conv2d_dynamic"]
    assert counts(r.cost) == {"cmp": 398 + 400, "add": 2 + 200 + 108 * 37, "div": 1 + 200,
                              "other": 1 + 200, "mult": 108 * 38}
    assert r.cost.macs == 108 * 36
    # bytes: float input 800 B, int8 weight 216 B, bias 24 B; float output 432 B
    assert (r.cost.bytes_read, r.cost.bytes_written) == (800 + 216 + 24, 432)
