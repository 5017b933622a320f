"""The serving cost model's one op stream (dispatchprof.serving.op_streams): its refusal names the
first op where two counted steps part."""

import pytest

from dispatchprof.serving.counting import CountedStep
from dispatchprof.serving.op_streams import first_difference, one_op_stream

MM = ("aten.mm", "model.layers.0.mlp.up_proj", "bfloat16")
RECURRENT = ("aten.mul", "model.layers.0.linear_attn", "bfloat16")
CHUNKED = ("aten.cumsum", "model.layers.0.linear_attn", "bfloat16")


def step(q: int, past: int, keys: tuple) -> CountedStep:
    return CountedStep(1, q, past, keys, {"H100-SXM": tuple((None, ()) for _ in keys)}, 0.0, {}, {}, {})


def test_a_decode_step_on_another_path_is_refused_naming_the_op():
    """A hybrid model whose one-token step after an empty cache takes the chunked path and after a
    cached token the recurrent one (Qwen3.5's gated delta-net): op 1 differs."""
    with pytest.raises(ValueError, match=r"^the op stream of a step of 1 x 1 tokens after 4 differs from that of "
                                         r"1 x 1 after 0 \(first at op 1: aten.mul in model.layers.0.linear_attn "
                                         r"against aten.cumsum in model.layers.0.linear_attn\): this model's steps "
                                         r"are not one op stream"):
        one_op_stream([step(1, 0, (MM, CHUNKED, MM)), step(1, 4, (MM, RECURRENT, MM))])


def test_first_difference():
    assert first_difference((MM, CHUNKED), (MM, CHUNKED)) == ""
    assert first_difference((MM,), (MM, CHUNKED)) == \
        " (first at op 1: the stream's end against aten.cumsum in model.layers.0.linear_attn)"
    assert first_difference((("aten.add", "", "float32"),), (MM,)) == \
        " (first at op 0: aten.add in (the root) against aten.mm in model.layers.0.mlp.up_proj)"
    keys, index_of, multi_only, single_only = one_op_stream([step(1, 0, (MM, MM)), step(1, 4, (MM, MM))])
    assert keys == (MM, MM) and multi_only == single_only == set()


BMM = ("aten.bmm", "model.layers.0.self_attn.absorbed", "bfloat16")
LATENT = ("aten.scaled_dot_product_attention", "model.layers.0.self_attn.absorbed", "bfloat16")
EXPAND = ("aten.mm", "model.layers.0.self_attn.kv_b_proj", "bfloat16")
MHA = ("aten.scaled_dot_product_attention", "model.layers.0.self_attn.expanded", "bfloat16")
CLONE = ("aten.clone", "model.layers.0.self_attn", "bfloat16")


def test_a_decode_stream_that_is_a_subsequence_leaves_ops_to_multi_token_steps():
    """The clone of a multi-token attention output: op 1 runs only in multi-token steps."""
    decode, multi = step(1, 4, (MM, MM)), step(4, 0, (MM, CLONE, MM))
    keys, index_of, multi_only, single_only = one_op_stream([decode, multi])
    assert keys == (MM, CLONE, MM) and multi_only == {1} and single_only == set()
    assert index_of[id(decode)] == [0, -1, 1] and index_of[id(multi)] == [0, 1, 2]


def test_decodes_through_their_own_ops_merge_the_two_streams():
    """Latent attention absorbed for decodes (bmm, latent attention, bmm) and expanded for
    prefills (kv_b_proj, MHA, the output's clone): the streams agree on the projections around
    them; the multi-token stream's own ops come first, then the decode stream's."""
    decode, multi = step(1, 4, (MM, BMM, LATENT, BMM, MM)), step(4, 0, (MM, EXPAND, MHA, CLONE, MM))
    keys, index_of, multi_only, single_only = one_op_stream([decode, multi])
    assert keys == (MM, EXPAND, MHA, CLONE, BMM, LATENT, BMM, MM)
    assert multi_only == {1, 2, 3} and single_only == {4, 5, 6}
    assert index_of[id(multi)] == [0, 1, 2, 3, -1, -1, -1, 4]
    assert index_of[id(decode)] == [0, -1, -1, -1, 1, 2, 3, 4]
