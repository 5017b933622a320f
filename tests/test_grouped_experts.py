"""Routed experts run as grouped kernels under the compiled and serving runtimes
(dispatchprof.sim.runtime.group_experts): the catalog's balanced experts path records each
expert's GEMMs and activation; engines launch one kernel per projection per layer."""

import collections

import torch

from dispatchprof import OpCounter
from dispatchprof.llm.models import build_model, token_ids
from dispatchprof.sim.runtime import is_routed_expert, plan_runtime

EXPERTS, TOP_K, LAYERS = 8, 2, 2


def _qwen3_moe():
    import transformers as tf
    return tf.Qwen3MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=LAYERS,
                             num_attention_heads=4, num_key_value_heads=2, num_experts=EXPERTS,
                             num_experts_per_tok=TOP_K, vocab_size=64, head_dim=8)


def _records():
    model = build_model(_qwen3_moe(), torch.bfloat16)
    ids = token_ids(model, 2, 8)                       # 16 tokens x top-2 = 32 pairs: 4 per expert, all 8 active
    with OpCounter() as c:
        model(input_ids=ids)
    return c.profile.records


def _expert_kernels(records, runtime):
    plans, changes = plan_runtime(records, runtime, [0], ["d"] * len(records))
    by_layer = collections.Counter(r.scope.split(".")[2] for r, p in zip(records, plans)
                                   if p.kernel and is_routed_expert(r.scope))
    return by_layer, changes


def test_each_projection_of_a_layers_experts_is_one_kernel():
    records = _records()
    per_expert = collections.Counter(r.op for r in records if r.scope.startswith("model.layers.0.mlp.experts"))
    # by hand: every expert runs gate_up (mm), SiLU (its act_fn), the gate product (mul) and down (mm);
    # then one routing-weight product, the concatenation, the sum over top-k and a copy
    assert per_expert == {"aten.mm": 2 * EXPERTS, "aten.silu": EXPERTS, "aten.mul": EXPERTS + 1, "aten.cat": 1,
                          "aten.sum": 1, "aten.clone": 1}
    eager, _ = _expert_kernels(records, "eager")
    serving, _ = _expert_kernels(records, "serving")
    compiled, _ = _expert_kernels(records, "compiled")
    # eager: every op its own kernel (4 per expert and the 4 after them); serving and compiled:
    # gate_up, the fused SiLU x up and down once per layer, and the tail (concatenation, routing
    # weights, sum over top-k, copy) fused into one pointwise kernel
    assert eager == {str(i): 4 * EXPERTS + 4 for i in range(LAYERS)}
    assert serving == compiled == {str(i): 3 + 1 for i in range(LAYERS)}


def test_scopes_that_are_routed_experts():
    assert is_routed_expert("model.layers.3.mlp.experts")
    assert is_routed_expert("model.layers.3.mlp.experts.0.down_proj")
    assert not is_routed_expert("model.layers.3.mlp.shared_experts")
    assert not is_routed_expert("model.layers.3.mlp.experts_gate")
