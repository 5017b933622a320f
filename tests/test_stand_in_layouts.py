"""The gradients whose fake and meta kernels follow another layout than the CPU kernel come back
from the counter's stand-in in the CPU kernel's layout (count/stand_ins.py, CONTIGUOUS_AS_CPU)."""

import pytest
import torch
from torch._subclasses import FakeTensorMode

from dispatchprof.count.stand_ins import CONTIGUOUS_AS_CPU, runner

aten = torch.ops.aten


def _calls():
    """(overload, args) with the incoming gradient permuted: [2, 4, 5, 3] with strides of a permute."""
    torch.manual_seed(0)
    grad = torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)
    x = torch.randn(2, 4, 5, 3)
    w, b = torch.randn(3), torch.randn(3)
    _, mean, rstd = aten.native_layer_norm(x, [3], w, b, 1e-5)
    xb = torch.randn(4, 4, 16).permute(0, 2, 1)          # [4, 16, 4], channels strided by 1
    wb, rm, rv = torch.randn(16), torch.zeros(16), torch.ones(16)
    bn = aten.native_batch_norm(xb, wb, wb, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    return {
        aten.native_batch_norm: (aten.native_batch_norm.default, (xb, wb, wb, rm.clone(), rv.clone(), True, 0.1, 1e-5)),
        aten.native_batch_norm_backward: (aten.native_batch_norm_backward.default,
                                          (xb * 2, xb, wb, rm, rv, bn[1], bn[2], True, 1e-5,
                                           [True, True, True])),
        aten.mse_loss_backward: (aten.mse_loss_backward.default, (torch.tensor(1.0), grad, x, 1)),
        aten.native_layer_norm_backward: (aten.native_layer_norm_backward.default,
                                          (grad, x, [3], mean, rstd, w, b, [True, True, True])),
        aten._log_softmax_backward_data: (aten._log_softmax_backward_data.default,
                                          (grad, x.log_softmax(-1), -1, torch.float32)),
    }


def _strides(out):
    return [o.stride() for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]


def _valueless(args, kind):
    if kind == "meta":
        return [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    with FakeTensorMode() as mode:
        return [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]


def test_every_listed_op_is_exercised():
    assert set(_calls()) == set(CONTIGUOUS_AS_CPU)


@pytest.mark.parametrize("packet", list(CONTIGUOUS_AS_CPU), ids=str)
@pytest.mark.parametrize("kind", ["fake", "meta"])
def test_stand_in_gives_the_cpu_kernels_layout(packet, kind):
    op, args = _calls()[packet]
    real = op(*args)
    valueless = _valueless(args, kind)
    plain = op(*valueless)
    assert _strides(plain) != _strides(real)          # torch's fake/meta kernel: another layout
    out = runner(packet, op)(*valueless)
    assert _strides(out) == _strides(real)
    assert [o.shape for o in (out if isinstance(out, tuple) else (out,))] == \
        [o.shape for o in (real if isinstance(real, tuple) else (real,))]


def test_real_tensors_run_unchanged():
    op, args = _calls()[aten.native_layer_norm_backward]
    out = runner(aten.native_layer_norm_backward, op)(*args)
    assert all(torch.equal(a, b) for a, b in zip(out, op(*args)))


def test_swin_counts_on_fake_tensors_as_on_real():
    # its layer-norm gradients feed a view: on torch's fake layout that view needed 3 more clones
    import coverage as coverage_script

    _, unknown, real = coverage_script.run_totals("swin", "real", "adamw")
    _, _, fake = coverage_script.run_totals("swin", "fake", "adamw")
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real"


def _rnn_backward_call():
    """The args of the LSTM backward's aten.mkldnn_rnn_layer_backward call, as a real run makes it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Capture(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket is aten.mkldnn_rnn_layer_backward:
                seen.append((func, args))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 8, batch_first=True)
    loss = lstm(torch.randn(2, 3, 4))[0].sum()
    with Capture():
        loss.backward()
    return seen[0]


@pytest.mark.parametrize("kind", ["fake", "meta"])
def test_rnn_backward_returns_separate_bias_gradients_as_on_cpu(kind):
    op, args = _rnn_backward_call()
    real = op(*args)
    assert real[3] is not real[4] and real[3].data_ptr() != real[4].data_ptr()
    valueless = _valueless(args, kind)
    plain = op(*valueless)
    assert plain[3] is plain[4]                        # torch's fake/meta kernel: one tensor twice
    out = runner(aten.mkldnn_rnn_layer_backward, op)(*valueless)
    assert out[3] is not out[4] and [o.shape for o in out] == [o.shape for o in real]
    assert [o.stride() for o in out] == [o.stride() for o in real]


def test_lstm_counts_on_fake_tensors_as_on_real():
    # autograd copied the shared bias gradient once per layer on fake tensors (+2,048 bytes)
    import coverage as coverage_script

    _, unknown, real = coverage_script.run_totals("lstm", "real", "adamw")
    _, _, fake = coverage_script.run_totals("lstm", "fake", "adamw")
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real"


def test_patchtst_counts_on_fake_tensors_as_on_real():
    # its batch norms run on [B, C, L] tensors strided by the channel transpose and its MSE loss on a
    # transposed prediction: on torch's fake layouts the next views cloned (-9,344 bytes, other ops)
    import coverage as coverage_script

    _, unknown, real = coverage_script.run_totals("patchtst", "real", "adamw")
    _, _, fake = coverage_script.run_totals("patchtst", "fake", "adamw")
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real"
