"""A composition's one-token sequences apart (Composition.single) and the others (Composition.multi),
as a split batch runs a mixed step's decodes and prompts (dispatchprof.serving.step_cost), by hand."""

import pytest

from dispatchprof.serving.composition import Composition

ZERO = (0,) * 9


def test_a_mixed_step_splits_into_its_decodes_and_its_prompts():
    """Two prompts of 6 tokens (no cache) beside three decodes holding 9 tokens each (10 keys):
    x = (1, T 15, N 5, K 42, A 102, Ac 72, q 6, k 10, qk 60); the decodes (1, 3, 3, 30, 30, 0, 1, 10,
    10); the prompts the sums less those, the step's maxima."""
    c = Composition.of([(6, 6)] * 2 + [(1, 10)] * 3)
    assert c.x == (1, 15, 5, 42, 102, 72, 6, 10, 60)
    assert c.single == (1, 3, 3, 30, 30, 0, 1, 10, 10)
    assert c.multi == (1, 12, 2, 12, 72, 72, 6, 10, 60)
    assert c.mixed
    assert Composition.uniform(2, 6, 0).merge(Composition.uniform(3, 1, 9)) == c


def test_the_prompts_flash_share_leaves_the_decodes_out():
    """A causal flash kernel computes every key of a one-token sequence: the prompts' share of a
    mixed step is that of the prompts alone (512-token prompts span several 128 x 64 tiles)."""
    prompts = Composition.of([(512, 512)] * 2)
    mixed = Composition.of([(512, 512)] * 2 + [(1, 10)] * 3)
    assert mixed.multi_flash_share == prompts.flash_share < mixed.flash_share < 1


def test_steps_of_one_kind_are_all_single_or_all_multi():
    decode, prompt = Composition.uniform(3, 1, 9), Composition.uniform(2, 6, 0)
    assert decode.single == decode.x and decode.multi == ZERO and not decode.mixed
    assert prompt.single == ZERO and prompt.multi == prompt.x and not prompt.mixed
    empty = Composition.decoding(0, 0, 0)
    assert not prompt.merge(empty).mixed and prompt.merge(empty).single[2] == 0


def test_split_and_padding_keep_the_parts():
    """Two attention data-parallel groups take half of each part's sums and keep the maxima; the
    padding tokens of a CUDA graph join the prompts of a mixed step, the decodes of a decode step."""
    c = Composition.of([(6, 6)] * 2 + [(1, 10)] * 3)
    half = c.split(2)
    assert half.single == (1, 1.5, 1.5, 15, 15, 0, 1, 10, 10)
    assert half.multi == pytest.approx((1, 6, 1, 6, 36, 36, 6, 10, 60))
    assert c.padded(20).single == c.single and c.padded(20).multi[1] == 17
    decode = Composition.uniform(3, 1, 9).padded(8)
    assert decode.single[1] == 8 and decode.multi == ZERO
