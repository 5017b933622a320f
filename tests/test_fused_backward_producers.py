"""A fused attention call's backward is one record, and the gradients it returns (dq, dk, dv) are
known to come from it: no tensor of a counted training step comes from the host except its inputs.

Worked by hand on the tiny Llama (conftest.TINY_LLAMA: 4 query heads and 2 KV heads of 16, fp32),
batch 2 x 16 tokens: per layer the attention backward returns dq = 2*4*16*16*4 = 8,192 bytes and
dk = dv = 2*2*16*16*4 = 4,096 bytes, which later ops read (rotary backward, v_proj's backward);
the token ids (2*16 int64 = 256 bytes, also the labels) are the only host tensor, uploaded once.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers as tf

from conftest import TINY_LLAMA, tiny_model
from dispatchprof import OpCounter
from dispatchprof.results.records import HOST
from dispatchprof.sim.catalog import catalog
from dispatchprof.sim.placement import placement_of
from dispatchprof.sim.simulate import simulate

BACKWARD = "aten.scaled_dot_product_attention_backward"


def _model(kind: str) -> tuple[torch.nn.Module, torch.Tensor]:
    ids = torch.randint(0, TINY_LLAMA["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(0))
    if kind == "fake":
        model = tiny_model()
        from dispatchprof.llm.models import token_ids
        return model, token_ids(model, 2, 16)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta" if kind == "meta" else "cpu"):
            model = tf.LlamaForCausalLM(tf.LlamaConfig(**TINY_LLAMA, attn_implementation="sdpa"))
    return model, ids.to(kind if kind == "meta" else "cpu")


def _step(kind: str):
    """The counted step on real (CPU flash kernel), real with SDPA's math backend (its
    decomposition's autograd nodes), fake or meta tensors."""
    from contextlib import nullcontext

    from torch.nn.attention import SDPBackend, sdpa_kernel

    model, ids = _model("real" if kind == "real-math" else kind)
    backend = sdpa_kernel(SDPBackend.MATH) if kind == "real-math" else nullcontext()
    with warnings.catch_warnings(), backend:
        warnings.simplefilter("ignore")
        with OpCounter(model) as c:
            model(input_ids=ids, labels=ids).loss.backward()
    return c.profile, ids.untyped_storage().nbytes()


@pytest.mark.parametrize("kind", ["real", "real-math", "fake", "meta"])
def test_attention_backward_outputs_are_its_own_not_the_hosts(kind):
    profile, ids_bytes = _step(kind)
    records = profile.records
    # (the empty KV cache that transformers concatenates to is 0 bytes: nothing moves)
    host = {(key, n) for r in records for producer, n, key in r.inputs if producer == HOST and n}
    assert len(host) == 1 and {n for _, n in host} == {ids_bytes}       # one tensor: the token ids
    backward = [i for i, r in enumerate(records) if r.op == BACKWARD]
    assert len(backward) == 2                      # one per layer
    for i in backward:
        read = {key: n for r in records for producer, n, key in r.inputs if producer == i}
        assert sorted(read.values()) == [4096, 4096, 8192]     # dk, dv, dq


@pytest.mark.parametrize("kind", ["real", "fake"])
def test_a_training_step_uploads_only_its_token_ids(kind):
    profile, _ = _step(kind)
    device = catalog()["H100-SXM"]
    sim = simulate(profile, placement_of(device), runtime="compiled")
    by_phase: dict[str, float] = {}
    for t in sim.ops:
        phase = profile.records[t.record].phase
        by_phase[phase] = by_phase.get(phase, 0.0) + t.t_transfer
    assert by_phase["backward"] == 0.0
    assert by_phase["forward"] == pytest.approx(256 / (device.host_to_device_gb_per_s * 1e9), rel=1e-12)
