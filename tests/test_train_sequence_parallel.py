"""Tensor parallelism without sequence parallelism: each pipeline receive is all-gathered over the
TP group (Megatron-LM's scatter/gather optimization), worked by hand on a tiny model."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from dispatchprof.sim.links import Links
from dispatchprof.sim.placement import placement_of
from dispatchprof.train import TrainLayout
from dispatchprof.train.count import count_model, time_model
from dispatchprof.train.step import pp_gather_s, split_step
from tests.conftest import TINY_LLAMA, tiny_model

H100 = placement_of("H100-SXM").devices[0]
#: scale-up 450e9 B/s with no latency (a 2 x 2 layout stays inside one node)
LINKS = Links(450e9, 0.0, 50e9, 0.0)


@pytest.fixture(scope="module")
def step():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return time_model(count_model(tiny_model(dtype=torch.bfloat16), "tiny", 2, 32), H100, tp=2)


def test_receives_are_gathered_without_sequence_parallelism(step):
    # tp 2 x pp 2, micro-batch 2 x 32 tokens, 2 micro-batches: the stage output is 2 x 32 x 64 x 2 bytes
    # = 8,192; its all-gather over 2 ranks sends (2-1)/2 x 8,192 = 4,096 bytes at 450e9 B/s
    lay = TrainLayout(4, 2, 4, 32, tp=2, pp=2)
    gather = 4096 / 450e9
    assert TINY_LLAMA["hidden_size"] == 64
    assert pp_gather_s(8192, dataclasses.replace(lay, sequence_parallel=False), LINKS) == pytest.approx(gather)
    assert pp_gather_s(8192, lay, LINKS) == 0.0
    assert pp_gather_s(8192, dataclasses.replace(lay, tp=1, sequence_parallel=False), LINKS) == 0.0
    sp = split_step(step, H100, lay, LINKS)
    no_sp = split_step(step, H100, dataclasses.replace(lay, sequence_parallel=False), LINKS)
    # 2 receives per micro-batch (forward activation, backward gradient; vp 1), 2 micro-batches: 4 gathers;
    # the bubble, (pp-1)/vp = 1 micro-batch time, holds 2 more
    assert no_sp.breakdown["pp p2p"] - sp.breakdown["pp p2p"] == pytest.approx(4 * gather)
    assert no_sp.breakdown["bubble"] - sp.breakdown["bubble"] == pytest.approx(2 * gather)
    assert no_sp.step_s - sp.step_s == pytest.approx(6 * gather)


def test_cli_flag():
    from dispatchprof.cli.train_command import layout_of, parser

    args = parser().parse_args(["m", "--device", "H100-SXM", "--devices", "4", "--tp", "2", "--pp", "2"])
    assert layout_of(args).sequence_parallel is True
    args = parser().parse_args(["m", "--device", "H100-SXM", "--devices", "4", "--tp", "2", "--pp", "2",
                                "--no-sequence-parallel"])
    assert layout_of(args).sequence_parallel is False
