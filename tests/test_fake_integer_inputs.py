"""Fake parameters beside real integer inputs (token ids, labels, image grids): models that read
those values count on fake tensors as on real ones; CTC's output shape comes from the real target
lengths (count/stand_ins.py)."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses import FakeTensorMode
from torch._subclasses.fake_tensor import DynamicOutputShapeException

import coverage as coverage_script
from dispatchprof import OpCounter
from dispatchprof.count.stand_ins import ctc_loss_shapes

aten = torch.ops.aten
T, N, C, S = 12, 3, 6, 4


def _ctc_inputs():
    torch.manual_seed(0)
    log_probs = torch.randn(T, N, C).log_softmax(-1)
    targets = torch.randint(1, C, (N, S))
    return log_probs, targets, torch.tensor([12, 10, 11]), torch.tensor([4, 2, 3])


def _ctc_step(log_probs, targets, input_lengths, target_lengths):
    log_probs.requires_grad_(True)
    with warnings.catch_warnings(), OpCounter() as c:
        warnings.simplefilter("ignore")
        F.ctc_loss(log_probs, targets, input_lengths, target_lengths).backward()
    return c.total()


def test_ctc_stand_in_returns_the_cpu_kernels_output_shapes_and_dtypes():
    log_probs, targets, il, tl = _ctc_inputs()
    real = aten._ctc_loss.Tensor(log_probs, targets, il, tl, 0, False)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_lp = mode.from_tensor(log_probs)
        fake_il = mode.from_tensor(il)
    out = ctc_loss_shapes(aten._ctc_loss.Tensor)(fake_lp, targets, fake_il, tl, 0, False)
    assert [(o.shape, o.dtype) for o in out] == [(r.shape, r.dtype) for r in real]
    assert out[1].shape == (N, T, 2 * 4 + 1)        # log_alpha: 2 * max(target_lengths) + 1 states
    # int lists carry their values too
    out = ctc_loss_shapes(aten._ctc_loss.default)(fake_lp, targets, [12, 10, 11], [4, 2, 3], 0, False)
    assert out[1].shape == real[1].shape


def test_ctc_loss_counts_on_fake_log_probs_as_on_real():
    log_probs, targets, il, tl = _ctc_inputs()
    real = _ctc_step(log_probs.clone(), targets, il, tl)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_lp = mode.from_tensor(log_probs)
        fake_il = mode.from_tensor(il)             # input lengths without values, as Wav2Vec2 makes them
    fake = _ctc_step(fake_lp, targets, fake_il, tl)
    assert fake == real and real.exp > 0


def test_ctc_loss_without_target_length_values_fails_as_without_the_counter():
    log_probs, targets, il, tl = _ctc_inputs()
    with FakeTensorMode() as mode:
        args = [mode.from_tensor(t) for t in (log_probs, targets, il, tl)]
    with pytest.raises(DynamicOutputShapeException):
        F.ctc_loss(*args)
    with warnings.catch_warnings(), pytest.raises(DynamicOutputShapeException), OpCounter():
        warnings.simplefilter("ignore")
        F.ctc_loss(*args)


@pytest.mark.parametrize("name", ["llava", "qwen2-vl", "wav2vec2-ctc"])
def test_value_reading_models_count_on_fake_as_on_real(name):
    # LLaVA checks its image-token count against the image features, Qwen2-VL lists its image grid,
    # Wav2Vec2-CTC tests labels.max(): all read integer inputs, which the zoo's fake builder leaves
    # real (Wav2Vec2-CTC also needs the CTC stand-in and the log-softmax gradient's CPU layout)
    _, unknown, real = coverage_script.run_totals(name, "real", "adamw")
    _, _, fake = coverage_script.run_totals(name, "fake", "adamw")
    assert unknown == [] and coverage_script.versus_real(fake, real) == "= real" and real["macs"] > 0
