"""Compiled and serving runtimes, worked by hand: a causal attention op runs as a flash kernel that
skips the score tiles its mask hides, a ``cat`` of pointwise results fuses with them while a KV
cache's ``cat`` stays its own kernel, and the serving step cost model carries the tiles' share."""

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_model
from dispatchprof import OpCounter
from dispatchprof.llm.generation import count_steps
from dispatchprof.serving.cost import Composition, fit_design
from dispatchprof.sim.attention import flash_scores
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timeline import step_time


def test_flash_scores_by_hand():
    # tiles of 128 query rows x 64 keys, end-aligned mask; a block's last row sees Lk - Lq + r1 keys
    assert flash_scores(256, 256) == 128 * 128 + 128 * 256 == 49152          # 3 of 4 128-row halves
    assert flash_scores(128, 128) == 128 * 128                              # one block: every score
    assert flash_scores(1, 300) == 300                                      # a decode step: every key
    # a 200-token chunk after 300 cached: rows 0-127 see 428 keys -> 448 computed; rows 128-199 all 500
    assert flash_scores(200, 500) == 128 * 448 + 72 * 500 == 93344
    # more queries than keys (end-aligned): rows 0-127 see 28 -> 64; 128-255 see 156 -> 192; the rest 200
    assert flash_scores(300, 200) == 128 * 64 + 128 * 192 + 44 * 200 == 41568
    assert flash_scores(2048, 2048) / 2048 ** 2 == pytest.approx(136 / 256)


def causal_attention(runtime: str, causal: str = "full"):
    q = torch.randn(1, 2, 256, 64)
    with torch.no_grad(), OpCounter(devices="H100-SXM", runtime=runtime, bound=True, causal=causal) as c:
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    sim = c.simulated()
    (t,) = [t for t, r in zip(sim.ops, sim.records) if "attention" in r.op]
    return sim, t, sim.records[t.record]


def test_causal_attention_computes_its_unmasked_tiles_under_compiled_and_serving():
    eager, t_eager, r = causal_attention("eager")
    assert r.causal and r.cost.macs == 2 * 256 * 256 * (64 + 64)           # counted whole (the default)
    for runtime in ("compiled", "serving"):
        sim, t, _ = causal_attention(runtime)
        # 49,152 of 65,536 scores in computed tiles: 3/4 of the work and compute time, the same traffic
        assert t.work == pytest.approx(t_eager.work * 0.75)
        assert t.t_compute == pytest.approx(t_eager.t_compute * 0.75)
        assert t.traffic_bytes == t_eager.traffic_bytes
        assert sim.runtime.flash_ops == 1 and sim.runtime.flash_share == pytest.approx(0.75)
        assert "causal attention in 1 flash kernel that skips masked tiles: 75.0% of the counted MACs computed" \
            in sim.runtime.describe()
    assert eager.runtime.flash_ops == 0
    # counted with causal="computed" (32,896 top-left scores): the tiles hold more, nothing is cut twice
    _, t_computed, r_computed = causal_attention("serving", causal="computed")
    assert r_computed.cost.macs == 2 * (256 * 257 // 2) * 128
    _, t_computed_eager, _ = causal_attention("eager", causal="computed")
    assert t_computed.work == pytest.approx(t_computed_eager.work)


def test_a_cat_of_pointwise_results_fuses_and_a_kv_cache_cat_does_not():
    a, b = torch.randn(1, 4, 8, 32), torch.randn(1, 4, 8, 32)               # 4096 bytes each, from the host
    with OpCounter(devices="H100-SXM", runtime="compiled") as fused, OpCounter(devices="H100-SXM") as eager:
        torch.cat((-a, b), dim=-1) * 2.0                                    # rotate_half, then a scale
    # eager: neg r4096 w4096, cat r8192 w8192, mul r8192 w8192
    assert sum(t.traffic_bytes for t in eager.simulated().ops) == 40960
    sim = fused.simulated()
    # compiled: one kernel reads a and b and writes the 8192-byte result
    assert sum(t.traffic_bytes for t in sim.ops) == 4096 + 4096 + 8192
    assert sim.runtime.kernels == 1 and sim.runtime.fused_ops == 2
    with OpCounter(devices="H100-SXM", runtime="compiled") as cache:
        k = a * 2.0
        torch.cat((torch.empty(0), k), dim=-2)                              # a cache's first write
    sim = cache.simulated()
    (cat,) = [t for t, r in zip(sim.ops, sim.records) if r.op == "aten.cat"]
    assert cat.t_overhead == pytest.approx(2e-6)                            # the cache write: its own kernel
    assert cat.traffic_bytes == 4096 + 4096                                 # reads k back, writes the cache


def test_composition_carries_each_sequences_computed_tiles():
    mixed = Composition.of([(200, 500), (1, 300)])
    assert mixed.scores == (93344 + 300, 200 * 500 + 300)
    decoding = Composition.decoding(3, 900, 400)                            # q = 1: every key, 903 of them
    assert decoding.scores == (903, 903)
    step = decoding.merge(Composition.of([(200, 500)]))
    assert step.flash_share == pytest.approx((903 + 93344) / (903 + 100000))
    assert Composition.decoding(0, 0, 0).flash_share == 1.0


def test_step_cost_of_long_prefills_matches_direct_simulation():
    """Prefills longer than a tile's 128 rows under the compiled runtime: the cost model's flash
    share equals the direct simulation's, to 1e-9 (a chunk after cached tokens is checked through
    its Composition above: the cost model runs it without transformers' explicit mask ops)."""
    model = tiny_model(vocab_size=512, num_hidden_layers=2, intermediate_size=128, head_dim=16,
                       max_position_embeddings=4096, dtype=torch.bfloat16)
    scenarios = scenarios_of(["H100-SXM"])
    cost = fit_design(model, scenarios, runtime="compiled")[1]["H100-SXM"]
    for b, q in ((2, 300), (1, 200)):
        c, spans = count_steps(model, b, [q], scenarios, runtime="compiled", logits_to_keep=1)
        (sim,) = c.simulations()
        (attention,) = {r.op for r in sim.records if "attention" in r.op}
        works = [(t.work, r.cost.add + r.cost.mult) for t, r in zip(sim.ops, sim.records) if r.op == attention]
        assert all(w < counted for w, counted in works)                    # the tiles did cut the work
        assert cost.cost(Composition.uniform(b, q, 0)).time_s == pytest.approx(step_time(sim.ops), rel=1e-9)
