"""LayoutCost.cost evaluates a step over its distinct op timings at once (numpy); here it is
compared with the straightforward evaluation, op by op in stream order through
`dispatchprof.sim.timeline.step_time` (the code it replaced, kept below as `by_op`), on a counted
mixture-of-experts model (DeepSeek-V3's layers, small: one dense layer, one of 8 experts with 2
per token, and an op only in multi-token steps) for prefill, decode and mixed steps, tp 1 and 2,
expert parallelism with attention data parallelism and skew, and two pipeline stages."""

import copy
import warnings

import numpy as np
import pytest
import torch

from dispatchprof.llm.models import build_model, load_config
from dispatchprof.llm.shape_generic import batch_step
from dispatchprof.serving.cost import DESIGN, Composition, fit_design
from dispatchprof.serving.layout import LayoutCost, _Stream, layout_of
from dispatchprof.serving.work import op_timing, scaled
from dispatchprof.sim.links import send_s
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timeline import step_time

SIZES = dict(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=8, num_experts_per_tok=2, n_group=1,
             topk_group=1, hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_attention_heads=4,
             num_key_value_heads=4, vocab_size=1000, q_lora_rank=64, kv_lora_rank=32, qk_rope_head_dim=16,
             qk_nope_head_dim=32, v_head_dim=32, head_dim=16)
#: Steps: a prefill, a decode, a mixed step (two prefill chunks beside three decodes), a decode of
#: one sequence (idle experts), and a mixed step of one-token sequences only.
STEPS = {
    "prefill": Composition.uniform(4, 37, 0),
    "decode": Composition.uniform(12, 1, 300),
    "mixed": Composition.of([(64, 64), (20, 100), (1, 50), (1, 700), (1, 9)]),
    "lone decode": Composition.uniform(1, 1, 5),
    "decodes of one token": Composition.of([(1, 17), (1, 3)]),
}
LAYOUTS = {
    "tp 1": dict(tp=1),
    "tp 2": dict(tp=2),
    "ep 4, dp-attention 2, skew 1.5": dict(ep=4, dp_attention=2, expert_skew=1.5),
    "ep 8, dp-attention 8": dict(ep=8, dp_attention=8),
    "pp 2": dict(tp=1, pp=2),
    "ep 4, pp 2": dict(ep=4, dp_attention=1, pp=2),
}


def by_op(lc: LayoutCost, c: Composition) -> tuple[float, float]:
    """The step's (seconds, joules) with every op of the stream taken one by one."""
    m, lay = lc.model, lc.layout
    a, f = lay.dp_attention, lay.expert_skew
    local = c.split(a)
    timings = m.op_timings(local)
    whole, weights = m.group_values(c), lc.active_share(c.x[1]) / a
    expert = {g: op_timing(m.groups[g].form, scaled(m.groups[g].form, whole[g], f / a, weights), m.devices,
                           m.weight_dtype, c.flash_share) for g in lc.expert_groups}
    entries = [expert[g] if e else timings[g] for g, e in zip(m.order, lc.expert)]
    stage = lc.stage
    present = m.present(local)
    if present is not None:
        entries = [t for t, p in zip(entries, present) if p]
        stage = [s for s, p in zip(stage, present) if p]
    exchange = lc.exchange_s(c.x[1])
    full = step_time(entries)
    if lay.pp == 1:
        time = full + lc.moe_layers[0] * exchange
    else:
        stages = [n * exchange for n in lc.moe_layers]
        for t, s in zip(entries, stage):
            stages[s] += t.time_s
        boundary = send_s(c.x[1] * lc.hidden * lc.element_bytes, *lc.pp_link) if lc.pp_link else 0.0
        time = full - sum(t.time_s for t in entries) + lay.pp * (max(stages) + boundary)
    return time, (sum(t.dynamic_j for t in entries) + m.static_power_w * time) * a


@pytest.fixture(scope="module")
def tiny():
    config = copy.deepcopy(load_config("deepseek-v3"))
    for k, v in SIZES.items():
        setattr(config, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_model(config, dtype=torch.bfloat16, generator=True)


@pytest.fixture(scope="module")
def fitted(tiny):
    """Per (runtime, tp): the fitted step cost model of the tiny model on H100-SXM."""
    scenarios, step, out = scenarios_of("H100-SXM"), batch_step(tiny), {}

    def get(runtime, tp):
        if (runtime, tp) not in out:
            design = tuple((b * step, t) for b, t in DESIGN)
            out[runtime, tp] = fit_design(tiny, scenarios, design=design, runtime=runtime, tp=tp)[1]["H100-SXM"]
        return out[runtime, tp]
    return get


def layout_cost(model, layout, device="H100-SXM"):
    return LayoutCost(model, layout, layers=2, experts=8, top_k=2, hidden=256, element_bytes=2,
                      device=scenarios_of(device)["H100-SXM"].devices[0])


@pytest.mark.parametrize("runtime", ["serving", "eager"])
@pytest.mark.parametrize("name", LAYOUTS)
def test_step_over_timings_equals_op_by_op(fitted, runtime, name):
    """Every step of STEPS on every layout: equal to the op-by-op evaluation to 1e-12 relative
    (sums in another order), twice over (the second time from the kept timings and streams).
    The serving runtime issues one graph per step (the timeline as a few entries), eager every
    op (the timeline op by op)."""
    kw = LAYOUTS[name]
    layout = layout_of(kw.pop("tp", None), **kw)
    lc = layout_cost(fitted(runtime, layout.tp), layout)
    assert lc.expert_groups and any(g.multi for g in lc.model.groups)      # experts and a multi-token op
    for _ in range(2):
        for step, c in STEPS.items():
            want = by_op(lc, c)
            got = lc.cost(c)
            assert got.time_s == pytest.approx(want[0], rel=1e-12, abs=0), (step, name, runtime)
            assert got.energy_j == pytest.approx(want[1], rel=1e-12, abs=0), (step, name, runtime)


@pytest.mark.parametrize("entries", [64, 0])
@pytest.mark.parametrize("host, want", [
    # device-bound: issued at 2, ends 2 + 1 + 3 + 3 + 5 + 3 = 17; the last op issued at 4: 17 + 1 = 18
    ((2.0, 0.0, 0.0), 18.0),
    # host-bound: the last op is issued at 40, after the device is free (35): 40 + 1 = 41
    ((20.0, 0.0, 0.0), 41.0),
    # no host time: the ops' sum, 1 + 3 + 3 + 5 + 3 + 1 = 16
    ((0.0, 0.0, 0.0), 16.0),
])
def test_a_tiny_stream_by_hand(entries, host, want):
    """Ops taking timings 0 1 1 2 1 0 (device 1, 3, 5 s; timing 0 issued by the host), as entries
    (an issued op, then the run after it) and op by op (ENTRIES = 0); 2 of timing 0, 3 of 1, 1
    of 2; stages 0 0 0 1 1 1: 1 + 3 + 3 = 7 and 5 + 3 + 1 = 9."""
    stream = _Stream(np.array([0, 1, 1, 2, 1, 0]), np.array([0, 0, 0, 1, 1, 1]), 3, 2)
    stream.ENTRIES = entries
    assert stream.step_time(np.array([1.0, 3.0, 5.0]), np.array(host)) == want
    assert stream.counts.tolist() == [2, 3, 1]
    assert (stream.stages @ np.array([1.0, 3.0, 5.0])).tolist() == [7, 9]
    assert _Stream(np.array([], dtype=int), np.array([], dtype=int), 3, 1).step_time(np.ones(3), np.ones(3)) == 0
