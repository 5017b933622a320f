"""dispatchprof.train.depth: a training step timed from counts with 2, 3 and 4 layers (or one, two
and three blocks of layers that alternate) equals the direct count at full depth; layers that do
not repeat are counted whole."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from dispatchprof.count.layer_repeat import LayerRepeatError
from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout
from dispatchprof.train.count import count_model, time_model
from dispatchprof.train.depth import FLOAT_TOLERANCE, _check, close, depths, repeat_reason, repeated_step
from dispatchprof.train.step import counted_step
from tests.conftest import tiny_model

H100 = placement_of("H100-SXM").devices[0]


def same_step(direct, repeated) -> None:
    """Every field of two counted steps equal: integers exactly, seconds and joules to the check's
    tolerance (the host uploads of the optimizer's step counters: dispatchprof.train.depth)."""
    for f in dataclasses.fields(direct):
        a, b = getattr(direct, f.name), getattr(repeated, f.name)
        if f.name == "profile":
            assert b is None
        elif f.name == "phases":
            assert a.keys() == b.keys()
            for phase in a:
                for g in dataclasses.fields(a[phase]):
                    x, y = getattr(a[phase], g.name), getattr(b[phase], g.name)
                    if isinstance(x, int):
                        assert x == y, (phase, g.name)
                    else:
                        assert close(x, y), (phase, g.name, x, y)
        else:
            assert a == b, f.name


@pytest.mark.parametrize("family, tp", [("llama", 1), ("llama", 2), ("mixtral", 1)])
def test_repeated_step_equals_the_direct_count(family, tp):
    net = tiny_model(family, dtype=torch.bfloat16, num_hidden_layers=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = time_model(count_model(net, "tiny", 2, 256), H100, tp=tp)
        repeated = repeated_step(net, "tiny", 2, 256, H100, tp=tp)
    assert repeated.layers == direct.layers == 7
    same_step(direct, repeated)


def test_check_by_hand():
    # affine in the depth: 2, 3, 4 layers give 10, 13, 16 (3 per layer); 17 at 4 layers is not
    _check({"ops": 10}, {"ops": 13}, {"ops": 16})
    with pytest.raises(LayerRepeatError, match="ops: 17 with 4 layers, 16 from 2 and 3"):
        _check({"ops": 10}, {"ops": 13}, {"ops": 17})
    # seconds: 3 s predicted; within 3e-9 relative + 1e-8 absolute (1.3e-8 s) passes, 2e-8 s off fails
    rel, absolute = FLOAT_TOLERANCE
    assert (rel, absolute) == (1e-9, 1e-8)
    _check({"s": 1.0}, {"s": 2.0}, {"s": 3.0 + 1.2e-8})
    with pytest.raises(LayerRepeatError, match="^s: "):
        _check({"s": 1.0}, {"s": 2.0}, {"s": 3.0 + 2e-8})


def test_alternating_layers_repeat_in_blocks():
    # Gemma-2 alternates sliding and global attention: blocks of 2 from layer 1, counted with 1 + 2 +
    # 1, 1 + 4 + 1 and 1 + 6 + 1 layers (the last one sliding, as its 10th), extended by 1 block
    net = tiny_model("gemma2", dtype=torch.bfloat16, num_hidden_layers=10)
    assert repeat_reason(net) == "" and depths(net) == (4, 6, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = time_model(count_model(net, "tiny", 2, 256), H100)
        repeated = repeated_step(net, "tiny", 2, 256, H100)
    assert repeated.layers == direct.layers == 10
    same_step(direct, repeated)


def test_layers_after_a_dense_prefix_repeat():
    # DeepSeek-V3's shape with 2 dense layers of 8: counted with 4, 5 and 6 layers, extended by 2
    from test_serving_repeat_prefix import tiny_deepseek
    net = tiny_deepseek(2, 8)
    assert repeat_reason(net) == "" and depths(net) == (4, 5, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = time_model(count_model(net, "tiny", 4, 64), H100)
        repeated = repeated_step(net, "tiny", 4, 64, H100)
    same_step(direct, repeated)


def test_layers_that_differ_are_counted_whole():
    # Qwen2 with a sliding window from layer 2 on: no period, the full depth is counted
    net = tiny_model("qwen2", dtype=torch.bfloat16, num_hidden_layers=6, use_sliding_window=True,
                     sliding_window=1024, max_window_layers=2)
    assert "layer_types" in repeat_reason(net)
    with pytest.raises(LayerRepeatError, match="layer_types"):
        repeated_step(net, "tiny", 1, 32, H100)
    assert "4 layers" in repeat_reason(tiny_model(num_hidden_layers=4))
    assert "8 layers" in repeat_reason(tiny_model("gemma2", num_hidden_layers=8))     # blocks: 4, 6, 8


def test_failed_check_falls_back_to_the_full_depth():
    # Llama-3.2-1B's shapes at 6 layers, 128 tokens, eager: the host issues a layer's kernels in
    # about the time the GPU runs them, so the exposed host time grows by 0.13, 0.17, then 0.35 ms
    # per layer from 2 to 5 layers (not affine until the host has fallen behind for good); the check
    # refuses it and the step is counted at full depth, as with few_layers off
    from dispatchprof.llm.layer_repeat import shallow_model
    from dispatchprof.llm.models import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = shallow_model(build_model("llama-3.2-1b", torch.bfloat16), 6)
        with pytest.raises(LayerRepeatError, match="host_s"):
            repeated_step(net, "1b", 1, 128, H100, runtime="eager")
        lay = TrainLayout(devices=1, micro_batch=1, global_batch=1, seq_len=128)
        fallback = counted_step(net, "1b", lay, H100, runtime="eager")
        direct = counted_step(net, "1b", lay, H100, runtime="eager", few_layers=False)
    assert fallback.profile is not None and direct.profile is not None
    same_step(direct, dataclasses.replace(fallback, profile=None))
