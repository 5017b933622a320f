"""Serving layouts (dispatchprof.serving.layout): expert parallelism beside attention data
parallelism, skewed routing, pipeline stages, and their bad input; worked by hand on a toy step
whose ops take the seconds they are given."""

from types import SimpleNamespace

import pytest

from dispatchprof import load_device
from dispatchprof.serving import layout as lay
from dispatchprof.serving.cost import Composition
from dispatchprof.serving.layout import Layout, LayoutCost, all_to_all_bytes, layout_of, stage_of
from dispatchprof.serving.work import QUANTITIES
from dispatchprof.sim.links import links_of

H100 = load_device("H100-SXM")
#: The toy's ops in stream order: (scope, seconds per token of the step).
OPS = (("model.embed_tokens", 1.0), ("model.layers.0.self_attn", 2.0), ("model.layers.0.mlp.experts", 4.0),
       ("model.layers.1.self_attn", 3.0), ("model.layers.1.mlp.experts", 5.0), ("lm_head", 1.0))


class Toy:
    """A duck-typed StepCostModel: op i is group i, its first quantity (ADD) = seconds per token x T,
    everything else 0; no host time, no energy."""

    def __init__(self):
        self.scopes = tuple(s for s, _ in OPS)
        self.order = tuple(range(len(OPS)))
        self.groups = tuple(SimpleNamespace(form=SimpleNamespace(gemm=False, flash=False)) for _ in OPS)
        self.devices, self.weight_dtype, self.static_power_w = {}, None, 0.0

    def group_values(self, c):
        return [[per * c.x[1]] + [0.0] * (len(QUANTITIES) - 1) for _, per in OPS]

    def op_timings(self, c):
        return [lay.op_timing(g.form, v) for g, v in zip(self.groups, self.group_values(c))]

    def present(self, c):
        return None                                  # every op runs in every step


@pytest.fixture
def seconds(monkeypatch):
    """op_timing: an op takes its first quantity in seconds."""
    monkeypatch.setattr(lay, "op_timing", lambda form, v, *a: SimpleNamespace(time_s=v[0], t_host=0.0,
                                                                              dynamic_j=0.0))


def cost_of(layout, experts=8, top_k=2, hidden=32):
    return LayoutCost(Toy(), layout, layers=2, experts=experts, top_k=top_k, hidden=hidden, element_bytes=2,
                      device=H100)


def test_expert_parallel_step_by_hand(seconds):
    """ep=8 over 2 attention groups of tp 4, skew 1.5, a step of 64 tokens (8 sequences decoding):
    outside the experts each group runs 32 tokens: (1 + 2 + 3 + 1) x 32 = 224 s; the experts run
    the whole step's 64 tokens x F / A = 0.75: (4 + 5) x 48 = 432 s; per MoE layer a dispatch and
    a combine: 64 x 2 x 32 x 2 B / 8 ranks = 1024 B a rank, x 1.5 = 1536 B, 7/8 of it over
    NVLink (450 GB/s x 0.8) + 6 us; two layers."""
    c = Composition.uniform(64, 1, 10)
    got = cost_of(layout_of(None, ep=8, dp_attention=2, expert_skew=1.5)).cost(c).time_s
    assert all_to_all_bytes(64, 2, 32, 2, 8) == 1024
    bw, lat = links_of(H100).scale_up_bps, links_of(H100).scale_up_latency_s
    assert (bw, lat) == (360e9, 6e-6)
    exchange = 2 * (7 / 8 * 1536 / bw + lat)
    assert got == pytest.approx(224 + 432 + 2 * exchange, rel=1e-12)


def test_no_all_to_all_without_attention_data_parallelism(seconds):
    """ep=8 with attention tensor-parallel (A = 1): every GPU holds all 64 tokens and the
    all-reduce after the MoE block combines the experts' outputs (engines take no all-to-all):
    (1 + 2 + 3 + 1) x 64 + (4 + 5) x 64 = 1024 s, no exchange; the same layout with A = 2 keeps
    its dispatch and combine."""
    c = Composition.uniform(64, 1, 10)
    tp_ep = cost_of(layout_of(None, ep=8, dp_attention=1))
    assert tp_ep.exchange_s(64) == 0.0
    assert tp_ep.cost(c).time_s == 1024
    assert cost_of(layout_of(None, ep=8, dp_attention=2)).exchange_s(64) > 0


def test_breakdown_by_hand(seconds):
    """`test_expert_parallel_step_by_hand`'s step by timing (`LayoutCost.breakdown`): every op
    once, those outside the experts at one attention group's 32 tokens, the experts' at the whole
    step's 64 x F / A = 48 tokens: 224 + 432 s in all, the exchange (not an op) left out."""
    toy = Toy()
    toy.groups = tuple(SimpleNamespace(form=SimpleNamespace(gemm=False, flash=False, scope=s)) for s, _ in OPS)
    lc = LayoutCost(toy, layout_of(None, ep=8, dp_attention=2, expert_skew=1.5), layers=2, experts=8, top_k=2,
                    hidden=32, element_bytes=2, device=H100)
    got = {(b.form.scope, b.expert): (b.count, b.timing.time_s) for b in lc.breakdown(Composition.uniform(64, 1, 10))}
    assert got == {("model.embed_tokens", False): (1.0, 32.0), ("model.layers.0.self_attn", False): (1.0, 64.0),
                   ("model.layers.0.mlp.experts", True): (1.0, 192.0), ("model.layers.1.self_attn", False): (1.0, 96.0),
                   ("model.layers.1.mlp.experts", True): (1.0, 240.0), ("lm_head", False): (1.0, 32.0)}
    assert sum(c * t for c, t in got.values()) == 224 + 432


def test_skew_sets_the_busiest_device():
    """The busiest device's expert work is F times the mean, its weights are not: an op of 10
    ADD, 100 B read of which 60 B weights, 20 B written, at F / A = 3 / 2 and weights 1 / 2:
    15 ADD, (100 - 60) x 1.5 + 60 / 2 = 90 B read, 30 B written, 30 B of weights."""
    from dispatchprof.serving.work import scaled
    q = {name: 0.0 for name in QUANTITIES}
    q.update(add=10, bytes_read=100, bytes_written=20, param_bytes=60, param_elements=30)
    out = dict(zip(QUANTITIES, scaled(SimpleNamespace(gemm=False), [q[n] for n in QUANTITIES], 1.5, 0.5)))
    assert (out["add"], out["bytes_read"], out["bytes_written"], out["param_bytes"], out["param_elements"]) == \
        (15, 90, 30, 30, 15)


def test_active_experts_follow_independent_routing(seconds):
    """A step of T tokens reads the experts some token picks: each of 8 experts is missed by a
    top-2 token with probability 3/4: 1 token reads 1/4 of them, 4 tokens 1 - (3/4)^4 = 175/256;
    with skew 2 on ep 8 the busiest device's experts are missed with probability 1/2 per token:
    1 token 1/2, 3 tokens 7/8; a top-8-of-8 token reads them all."""
    assert cost_of(Layout()).active_share(1) == 0.25
    assert cost_of(Layout()).active_share(4) == pytest.approx(175 / 256, rel=1e-15)
    assert cost_of(layout_of(None, ep=8, expert_skew=2.0)).active_share(1) == 0.5
    assert cost_of(layout_of(None, ep=8, expert_skew=2.0)).active_share(3) == 0.875
    assert cost_of(Layout(), top_k=8).active_share(1) == 1.0


def test_two_stage_pipeline_by_hand(seconds):
    """pp=2 on 2 layers, 10 tokens: stage 0 = embedding + layer 0 = (1 + 2 + 4) x 10 = 70 s,
    stage 1 = layer 1 + head = (3 + 5 + 1) x 10 = 90 s; with 2 micro-batches in flight each step
    takes 2 x (90 s + one boundary send of 10 x 32 x 2 = 640 B over NVLink)."""
    assert stage_of([s for s, _ in OPS], 2, 2) == [0, 0, 0, 1, 1, 1]
    got = cost_of(Layout(pp=2)).cost(Composition.uniform(1, 10, 0)).time_s
    bw, lat = links_of(H100).scale_up_bps, links_of(H100).scale_up_latency_s
    assert got == pytest.approx(2 * (90 + 640 / bw + lat), rel=1e-12)


def test_dense_step_on_the_plain_layout_is_the_stream(seconds):
    """No EP, no PP: the step is its ops' sum at the step's tokens: 16 x 10 = 160 s."""
    assert cost_of(Layout(), experts=0, top_k=0).cost(Composition.uniform(1, 10, 0)).time_s == 160


@pytest.mark.parametrize("kw, message", [
    (dict(ep=8, dp_attention=3), r"dp_attention=3 does not divide the replica's 8 GPUs \(ep=8\); allowed: 1, 2, 4, 8"),
    (dict(ep=8, expert_skew=0.5), r"expert_skew must be >= 1 \(the busiest device's expert work over the mean\)"),
    (dict(dp_attention=2), r"dp_attention=2 needs expert parallelism"),
    (dict(tp=2, ep=8, dp_attention=2), r"tp=2 with ep=8 and dp_attention=2: attention runs tensor-parallel over "
                                       r"ep / dp_attention = 4 GPUs"),
])
def test_bad_layouts(kw, message):
    with pytest.raises(ValueError, match=message):
        layout_of(**{"tp": None, **kw})


def test_model_checks():
    moe = SimpleNamespace(n_routed_experts=256, num_experts_per_tok=8, num_hidden_layers=61)
    with pytest.raises(ValueError, match=r"ep=3 does not divide the model's 256 routed experts; allowed: 1, 2, 4, 8, "
                                         r"16, 32, 64, 128, 256"):
        lay.check_model(Layout(ep=3, tp=3), moe)
    with pytest.raises(ValueError, match=r"pp=2 does not divide the model's 61 layers; allowed: 1, 61"):
        lay.check_model(Layout(pp=2), moe)
    with pytest.raises(ValueError, match=r"ep=2 needs a mixture-of-experts model"):
        lay.check_model(Layout(ep=2, tp=2), SimpleNamespace(num_hidden_layers=2))
