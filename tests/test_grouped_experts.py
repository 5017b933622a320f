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


def test_grouped_plans_mark_the_routed_experts_under_compiled_and_serving_only():
    records = _records()
    for runtime in ("serving", "compiled"):
        plans, _ = plan_runtime(records, runtime, [0], ["d"] * len(records))
        assert [p.grouped for p in plans] == [is_routed_expert(r.scope) for r in records]
    plans, _ = plan_runtime(records, "eager", [0], ["d"] * len(records))
    assert not any(p.grouped for p in plans)


def _expert_gemm(m=4096, n=4096, k=4096):
    from op_formulas.matmul import matmul_cost
    from dispatchprof.results.records import OpRecord
    cost = matmul_cost(m, k, n).with_bytes(2 * (m * k + k * n), 2 * m * n)
    return OpRecord("aten.mm", "model.layers.0.mlp.experts.3.down_proj", "forward", "bfloat16", cost,
                    shapes=((m, k), (k, n)), param_bytes=2 * k * n, param_elements=k * n)


def test_grouped_expert_gemms_reach_the_profiles_expert_efficiency_by_hand():
    import dataclasses
    import pytest
    from dispatchprof.sim.catalog import load_device
    from dispatchprof.sim.timing import OpPlan, time_op
    h100 = dataclasses.replace(load_device("H100-SXM"), expert_matrix_efficiency={"fp8": 0.4})
    rec = _expert_gemm()                    # 32 x 32 = 1024 tiles of 128 x 128: 8 waves of 132 -> 1024 / 1056
    flop = 4096 * 4096 * (2 * 4096 - 1)
    shape = 1024 / 1056
    grouped = OpPlan(grouped=True)
    # fp8: the expert figure 0.4 in place of matrix_efficiency's 0.55, grouped or not as the plan says
    assert time_op(0, rec, [h100], set(), "fp8", False, grouped).t_compute == pytest.approx(
        flop / (1978.9e12 * 0.4 * shape))
    assert time_op(0, rec, [h100], set(), "fp8", False).t_compute == pytest.approx(flop / (1978.9e12 * 0.55 * shape))
    # bf16 has no expert figure here: compute_efficiency 0.8, as a dense GEMM
    assert time_op(0, rec, [h100], set(), None, False, grouped).t_compute == pytest.approx(
        flop / (989.4e12 * 0.8 * shape))
    # the bound ignores it; memory time is the same either way
    assert time_op(0, rec, [h100.as_bound()], set(), "fp8", False, grouped).t_compute == pytest.approx(
        flop / 1978.9e12)
    assert time_op(0, rec, [h100], set(), "fp8", False, grouped).t_memory == \
        time_op(0, rec, [h100], set(), "fp8", False).t_memory


def test_serving_op_forms_keep_the_grouped_plan():
    import dataclasses
    import pytest
    from dispatchprof.sim.catalog import load_device
    from dispatchprof.sim.timing import OpPlan, time_op
    from dispatchprof.serving.work import op_form, op_timing, quantities
    h100 = dataclasses.replace(load_device("H100-SXM"), expert_matrix_efficiency={"fp8": 0.4})
    rec, plan = _expert_gemm(), OpPlan(grouped=True)
    form = op_form(rec, h100.name, False, plan, ())
    assert form.grouped
    assert op_timing(form, quantities(rec, plan, ()), {h100.name: h100}, "fp8").t_compute == pytest.approx(
        time_op(0, rec, [h100], set(), "fp8", False, plan).t_compute)


def test_a_served_moe_model_times_only_its_routed_gemms_at_the_expert_figure():
    import dataclasses
    import pytest
    from dispatchprof.sim.catalog import load_device
    from dispatchprof.sim.placement import scenarios_of
    from dispatchprof.sim.simulate import simulate
    model = build_model(_qwen3_moe(), torch.bfloat16)
    with OpCounter() as c:
        model(input_ids=token_ids(model, 2, 8))
    base = load_device("H100-SXM")                     # bf16: compute_efficiency 0.8
    figured = dataclasses.replace(base, expert_matrix_efficiency={"bf16": 0.5})
    sims = [simulate(c.profile, scenarios_of(d)[d.name], runtime="serving") for d in (base, figured)]
    routed = [is_routed_expert(r.scope) and bool(r.cost.macs) for r in c.profile.records]
    assert sum(routed) == 2 * EXPERTS * LAYERS
    for was, now, expert in zip(sims[0].ops, sims[1].ops, routed):
        assert now.t_compute == pytest.approx(was.t_compute * (0.8 / 0.5 if expert else 1.0))
