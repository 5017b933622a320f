"""The step cost model against direct counting, KV-cache bytes by dtype, and speculative decoding."""

import dataclasses
import random
import warnings

import pytest
import torch

from conftest import tiny_model
from dispatchprof import load_device
from dispatchprof.serving import expected_tokens, generate_requests, prepare_serving, simulate_serving
from dispatchprof.llm.generation import count_steps
from dispatchprof.serving.engine import DecodeBatch
from dispatchprof.serving.cost import Composition, count_design, fit, fit_design, integer_pseudo_inverse, kv_scale
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timeline import step_time

DEVICES = ["H100-SXM", "PIM-AI-1chip"]


def tiny(vocab=512, layers=2):
    """conftest's tiny Llama, bf16, with 4 heads of 16 over 2 KV heads, MLP 128."""
    return tiny_model(vocab_size=vocab, num_hidden_layers=layers, intermediate_size=128, head_dim=16,
                      max_position_embeddings=4096, dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def model():
    return tiny()


@pytest.fixture(scope="module")
def fitted(model):
    scenarios = scenarios_of(DEVICES)
    return scenarios, count_design(model, scenarios, runtime="compiled")


def direct(model, b, q, p, scenarios, runtime="compiled", tp=1, kv_dtype=None):
    """Per device, (time, energy) of one step simulated directly: a counted prefill of p tokens
    then the step of b x q tokens in one count, the step's ops on the simulator's host/device
    timeline; energy = its ops' dynamic energy + static power x the step's time."""
    c, spans = count_steps(model, b, [p, q] if p else [q], scenarios, runtime=runtime, tp=tp, logits_to_keep=1,
                           kv_dtype=kv_dtype)
    s = spans[-1]
    out = {}
    for sim in c.simulations():
        ops = sim.ops[s.start:s.end]
        t = step_time(ops)
        out[sim.name] = (t, sum(o.dynamic_j for o in ops) + sim.static_power_w * t)
    return out


@pytest.mark.parametrize("runtime, kv_dtype", [("eager", None), ("compiled", None), ("eager", "fp8"),
                                               ("compiled", "fp8")])
def test_step_cost_matches_direct_simulation_at_random_compositions(model, runtime, kv_dtype):
    """Equal to 1e-9 relative on uniform batches the design did not count, on a GPU with its
    shape-aware GEMM efficiency and host launches and on a PIM chip: decode steps (q = 1) after
    random cache lengths, prefills (p = 0) of random lengths; with an fp8 KV cache too, narrowed
    as the simulator narrows it."""
    scenarios = scenarios_of(DEVICES)
    models = fit_design(model, scenarios, runtime=runtime, kv_dtype=kv_dtype)[1]
    rng = random.Random(7)
    checks = [(rng.randint(1, 6), 1, rng.randint(1, 300)) for _ in range(3)]
    checks += [(rng.randint(1, 4), rng.randint(2, 400), 0) for _ in range(3)]
    for b, q, p in checks:
        want = direct(model, b, q, p, scenarios, runtime, kv_dtype=kv_dtype)
        for name in DEVICES:
            got = models[name].cost(Composition.uniform(b, q, p))
            assert got.time_s == pytest.approx(want[name][0], rel=1e-9), (b, q, p, name)
            assert got.energy_j == pytest.approx(want[name][1], rel=1e-9), (b, q, p, name)


def test_serving_host_cost_per_sequence_of_a_step(model):
    """A step's graph launch carries 10 us per sequence it runs (decoding or prefilling): the step
    ends N x 10 us later, N read off the composition, mixed steps included."""
    quick = dataclasses.replace(load_device("H100-SXM"), name="quick-host", graph_launch_us=20.0)
    busy = dataclasses.replace(quick, name="busy-host", sequence_host_us=10.0)
    models = fit_design(model, scenarios_of([quick, busy]), runtime="serving")[1]
    steps = [(Composition.uniform(3, 1, 40), 3), (Composition.uniform(2, 17, 0), 2),
             (Composition.decoding(5, 200, 60).merge(Composition.of([(16, 16), (9, 9)])), 7)]
    for c, n in steps:
        quick_s, busy_s = models["quick-host"].cost(c).time_s, models["busy-host"].cost(c).time_s
        assert busy_s == pytest.approx(quick_s + n * 10e-6, rel=1e-12), c


def test_gemm_efficiency_follows_the_step_shape():
    """A model wide enough for the H100's GEMM tiles and waves to matter: prefills of 1 x 40,
    3 x 100 and 2 x 700 tokens (M = 40, 300, 1400 against 128-row tiles on 132 SMs) are timed as
    the simulator times them (a fitted line through the counted compute times would not be)."""
    wide = tiny_model(vocab_size=1024, hidden_size=2048, intermediate_size=5632, num_hidden_layers=1,
                      num_attention_heads=16, num_key_value_heads=4, head_dim=128, max_position_embeddings=4096,
                      dtype=torch.bfloat16)
    scenarios = scenarios_of(["H100-SXM"])
    cost = fit_design(wide, scenarios, runtime="compiled")[1]["H100-SXM"]
    for b, q, p in ((1, 40, 0), (3, 100, 0), (2, 700, 0), (4, 1, 900)):
        t, e = direct(wide, b, q, p, scenarios)["H100-SXM"]
        got = cost.cost(Composition.uniform(b, q, p))
        assert got.time_s == pytest.approx(t, rel=1e-9) and got.energy_j == pytest.approx(e, rel=1e-9), (b, q, p)
    # the shape term is in play: the 2 x 700 step's up-projection GEMM (M 1400, N 5632, K 2048)
    # runs ceil(1400 / 128) x ceil(5632 / 128) = 11 x 44 = 484 tiles of 128 x 128 on 132 SMs:
    # 4 waves, the last one 88 / 132 full -> wave_util 484 / 528; tile_util 1400 x 5632 / (1408 x 5632)
    # (gate_proj and up_proj have equal shapes: one group, named by its first op)
    up = next(t for g, t in zip(cost.groups, cost.op_timings(Composition.uniform(2, 700, 0)))
              if g.form.scope.endswith("gate_proj"))
    h100 = scenarios["H100-SXM"].devices[0]
    assert (h100.compute_units, h100.gemm_tile) == (132, (128, 128))
    # M N K MULT + M N (K - 1) ADD = 1400 x 5632 x 4095
    assert up.work == pytest.approx(1400 * 5632 * 4095, rel=1e-12)
    shape = (484 / 528) * (1400 / 1408)
    assert up.t_compute == pytest.approx(up.work / (h100.peak_flops("bf16", True) * h100.compute_efficiency * shape),
                                         rel=1e-12)


def test_serving_runtime_counts_last_token_logits_once(model):
    """Under the serving runtime the count already holds each sequence's last-token logits:
    a prefill step costs what the compiled runtime gives for that count (no second LM-head
    share); decode steps equal direct simulation under serving itself."""
    scenarios = scenarios_of(["H100-SXM"])
    serving = fit_design(model, scenarios, runtime="serving")[1]["H100-SXM"]
    for b, q, p in ((2, 37, 0), (3, 1, 50)):
        want = direct(model, b, q, p, scenarios, "compiled" if p == 0 else "serving")["H100-SXM"]
        assert serving.cost(Composition.uniform(b, q, p)).time_s == pytest.approx(want[0], rel=1e-9)


def test_tensor_parallel_steps_by_hand(model):
    """tp=2 on the tiny Llama (4 heads, 2 KV heads): one device's share of weights and KV cache,
    two all-reduces per layer, step times equal to direct simulation with tp=2, group energy."""
    scenarios = scenarios_of(["H100-SXM"])
    two = prepare_serving(model, "H100-SXM", runtime="compiled", tp=2)
    # KV per token: 2 layers x (K + V) x 2 KV heads x 16 dims x 2 bytes = 256 B, split over 2 devices
    assert two.kv_bytes_per_token == 128
    # weights per device: embeddings + LM head 2 x 512 x 64 and 5 norms of 64 whole; per layer
    # attention 64 x (64 + 32 + 32 + 64) and MLP 3 x 64 x 128 halved; bf16 2 bytes each
    per_layer = 64 * (64 + 32 + 32 + 64) + 3 * 64 * 128
    assert two.weights_bytes == 2 * (2 * 512 * 64 + 5 * 64 + 2 * per_layer // 2)
    for b, q, p in ((3, 1, 70), (2, 45, 0)):
        want = direct(model, b, q, p, scenarios, "compiled", tp=2)["H100-SXM"]
        got = two.cost.cost(Composition.uniform(b, q, p))
        assert got.time_s == pytest.approx(want[0], rel=1e-9) and got.energy_j == pytest.approx(want[1], rel=1e-9)
    # all-reduces after o_proj and down_proj of both layers, each of the T x 64 bf16 output:
    # 2 (N - 1) / N x bytes over half the interconnect figure, plus its latency
    h100 = scenarios["H100-SXM"].devices[0]
    t = 2 * 45
    one_reduce = 2 * (2 - 1) / 2 * (t * 64 * 2) / (h100.interconnect_gb_per_s / 2 * 1e9) \
        + h100.interconnect_latency_us * 1e-6
    timings = two.cost.op_timings(Composition.uniform(2, 45, 0))
    comm = sum(g.count * x.t_comm for g, x in zip(two.cost.groups, timings))
    assert comm == pytest.approx(4 * one_reduce, rel=1e-9)
    # energy of a step: both devices of the group
    seconds, joules = two.step_cost([(45, 45, 45), (45, 45, 45)], DecodeBatch(0, 0.0, 0.0), 0)
    step = two.cost.cost(Composition.uniform(2, 45, 0))
    assert seconds == step.time_s and joules == pytest.approx(2 * step.energy_j, rel=1e-12)
    with pytest.raises(ValueError, match="tp=3 does not divide the model's 4 attention heads; allowed: 1, 2, 4"):
        prepare_serving(model, "H100-SXM", tp=3)
    with pytest.raises(ValueError, match=r"runtime must be one of \('eager', 'compiled', 'serving'\), got 'jit'"):
        prepare_serving(model, "H100-SXM", runtime="jit")


def test_equal_layers_are_grouped(fitted):
    _, steps = fitted
    m = fit(steps)["H100-SXM"]
    assert m.ops == len(steps[0].keys)
    assert sum(g.count for g in m.groups) == m.ops
    assert len(m.groups) < m.ops          # the two decoder layers share their coefficients


def test_integer_pseudo_inverse_by_hand():
    # X = [[1, 0], [1, 1], [1, 2]]: X^T X = [[3, 3], [3, 5]], its inverse [[5, -3], [-3, 3]] / 6,
    # times X^T: [[5, 2, -1], [-3, 0, 3]] / 6 (a line through (0, a), (1, b), (2, c))
    assert integer_pseudo_inverse([[1, 0], [1, 1], [1, 2]]) == ([[5, 2, -1], [-3, 0, 3]], 6)


def test_compositions_by_hand():
    # sequences (q, k): a chunk of 5 after 3 cached (k = 8) and two decodes at 10 and 20 keys
    c = Composition.of([(5, 8), (1, 10), (1, 20)])
    # T = 7, N = 3, K = 38, A = 40 + 10 + 20 = 70, Ac = 40 (q > 1 only), q = 5, k = 20, qk = 100
    assert c.x == (1, 7, 3, 38, 70, 40, 5, 20, 100)
    d = Composition.decoding(2, 9 + 19, 19)          # the two decodes: computed 9 and 19
    assert d.x == (1, 2, 2, 30, 30, 0, 1, 20, 20)
    assert Composition.of([(5, 8)]).merge(d).x == (1, 7, 3, 38, 70, 40, 5, 20, 100)


def test_kv_bytes_per_token_follow_the_kv_dtype(model):
    # 2 layers x (keys + values) x 2 KV heads x head_dim 16 = 128 elements per token; bf16: 256 B
    setup = prepare_serving(model, "H100-SXM")
    assert setup.kv_bytes_per_token == 256
    for kv, expected in (("fp8", 128), ("int8", 128), ("int4", 64)):     # 128 elements x bits / 8
        assert prepare_serving(model, "H100-SXM", kv_dtype=kv).kv_bytes_per_token == expected
    # blocks: (80e9 x 0.9 - weights) / (bytes per token x 16 tokens), weights = params x 2 bytes
    params = sum(p.numel() for p in model.parameters())
    assert setup.weights_bytes == 2 * params
    assert setup.num_blocks(16, 0.9) == int((80e9 * 0.9 - 2 * params) // (256 * 16))
    int4 = prepare_serving(model, "H100-SXM", kv_dtype="int4")
    assert int4.num_blocks(16, 0.9) == int((80e9 * 0.9 - 2 * params) // (64 * 16))
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        kv_scale("fp2", model)


def test_kv_dtype_makes_a_long_context_decode_faster(model):
    """A long-context decode batch is memory bound on its cache: fp8 (8 of bf16's 16 bits) moves
    less and takes less time; a one-token prefill, with no cache to read, barely changes."""
    full = prepare_serving(model, "H100-SXM", bound=True)
    half = prepare_serving(model, "H100-SXM", bound=True, kv_dtype="fp8")
    long = Composition.decoding(64, 64 * 4000, 4000)
    assert half.cost.cost(long).time_s < 0.75 * full.cost.cost(long).time_s
    one = Composition.uniform(1, 1, 0)
    assert half.cost.cost(one).time_s == pytest.approx(full.cost.cost(one).time_s, rel=1e-3)


def test_expected_tokens_by_hand():
    # a = 0.8, k = 4: 1 + 0.8 + 0.64 + 0.512 + 0.4096 = (1 - 0.8^5) / 0.2 = 3.3616
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 3) == 4.0
    with pytest.raises(ValueError, match="acceptance must be a rate in"):
        expected_tokens(1.5, 4)


def test_speculative_step_counts_draft_and_target(model):
    draft = tiny(layers=1)
    setup = prepare_serving(model, "H100-SXM", draft=draft, spec_tokens=4, acceptance=0.8)
    target = prepare_serving(model, "H100-SXM")
    small = prepare_serving(draft, "H100-SXM")
    # 3 decoding sequences holding 10, 20, 30 tokens: the target verifies 5 tokens each,
    # the draft runs 4 single-token steps
    t, e = setup.step_cost((), DecodeBatch(3, 60, 30), 0)
    verify = target.cost.cost(Composition.decoding(3, 60, 30, 5))
    drafting = small.cost.cost(Composition.decoding(3, 60, 30, 1))
    assert t == pytest.approx(verify.time_s + 4 * drafting.time_s, rel=1e-12)
    assert e == pytest.approx(verify.energy_j + 4 * drafting.energy_j, rel=1e-12)
    # KV of both models per token: 256 (target) + 128 (1 layer) bytes
    assert setup.kv_bytes_per_token == 384
    spec = simulate_serving(setup, generate_requests(50.0, 4, 64, 33, seed=1))
    assert spec.config.decode_gain == pytest.approx(3.3616) and spec.config.decode_q == 5


def test_draft_with_another_vocabulary_is_refused(model):
    with pytest.raises(ValueError, match="the draft model has a vocabulary of 1000 tokens and the target 512"):
        prepare_serving(model, "H100-SXM", draft=tiny(vocab=1000, layers=1))


def test_generation_kv_dtype_bytes_by_hand(model):
    from dispatchprof import profile_generation
    # after 8 prompt tokens and 2 decode steps the cache holds 10 tokens of 2 sequences:
    # 2 x 10 x 2 layers x (K + V) x 2 KV heads x 16 dims = 2560 elements; bf16 5120 B
    expected = {None: 5120, "fp8": 2560, "int8": 2560, "int4": 1280}
    for kv, nbytes in expected.items():
        g = profile_generation(model, 2, 8, 3, devices="H100-SXM", kv_dtype=kv)
        assert g.kv_cache_bytes == nbytes, kv
        assert g.devices["H100-SXM"].capacity[0].kv_bytes == nbytes
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        profile_generation(model, 1, 4, 2, kv_dtype="fp2")


def test_price_from_the_device_profile(model, tmp_path):
    profile = tmp_path / "priced.yaml"
    profile.write_text("""
family: test
source: a test
devices:
  Priced:
    memory_capacity_gb: 16
    memory_bandwidth_gb_per_s: 400
    host_to_device_gb_per_s: 32
    host_to_device_pj_per_bit: 27
    device_to_host_gb_per_s: 32
    device_to_host_pj_per_bit: 27
    matrix_tflops: {bf16: 100}
    vector_tflops: {fp32: 10}
    pj_per_flop: 0.5
    memory_pj_per_bit: 7
    price_usd_per_hour: 1.8
""")
    setup = prepare_serving(model, str(profile))
    assert setup.price_usd_per_h == 1.8
    r = simulate_serving(setup, generate_requests(10.0, 6, 16, 5, arrivals="fixed"))
    s = r.summary
    # 1.8 $/h x span / 3600 s/h / 30 output tokens x 1e6
    assert s.usd_per_million_tokens == pytest.approx(1.8 * s.span_s / 3600 / 30 * 1e6)
    assert prepare_serving(model, str(profile), price_usd_per_h=3.0).price_usd_per_h == 3.0


def tiny_llava():
    import transformers
    from dispatchprof.count.fake import fake_model
    cfg = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                    num_attention_heads=4, image_size=56, patch_size=14),
        text_config=transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             head_dim=16),
        image_token_index=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fake_model(lambda: transformers.LlavaForConditionalGeneration(cfg), dtype=torch.bfloat16)


def test_vlm_ttft_includes_the_vision_encoder():
    from dispatchprof import OpCounter
    from dispatchprof.count.fake import fake_mode
    from dispatchprof.serving import Request
    vlm = tiny_llava()
    setup = prepare_serving(vlm, "H100-SXM", image_size=56)
    # independently: one 56 x 56 image through get_image_features, simulated on H100-SXM under
    # the serving runtime (serving's default)
    with fake_mode(vlm):
        pixels = torch.empty(1, 3, 56, 56, dtype=torch.bfloat16)
    with torch.no_grad(), OpCounter(devices="H100-SXM", runtime="serving") as c:
        vlm.model.get_image_features(pixel_values=pixels)
    encoder = c.simulated("H100-SXM").total
    assert setup.image_cost == (encoder.time_s, encoder.energy_j) and encoder.time_s > 0
    # one request alone: TTFT = its prefill step + images x encoder time
    text = simulate_serving(setup, [Request(0.0, 64, 4)])
    two = simulate_serving(setup, [Request(0.0, 64, 4, images=2)])
    assert two.requests[0].ttft_s - text.requests[0].ttft_s == pytest.approx(2 * encoder.time_s, rel=1e-9)
    assert two.requests[0].tpot_s == pytest.approx(text.requests[0].tpot_s, rel=1e-9)
    with pytest.raises(ValueError, match="LlamaForCausalLM has no image encoder"):
        prepare_serving(tiny(), "H100-SXM", image_size=56)


def test_work_off_the_plane_is_refused(fitted):
    import dataclasses
    _, steps = fitted
    assert len(steps) == 10                  # nine coefficients and one composition to check them
    i = next(i for i, s in enumerate(steps) if (s.batch, s.q, s.past) == (2, 1, 6))   # a decode step
    last = steps[i]
    ops = dict(last.ops)
    bent = list(ops["H100-SXM"])
    form, values = bent[5]
    bent[5] = (form, (values[0] * 1.01 + 1, *values[1:]))    # one op's ADD count 1% off its plane
    ops["H100-SXM"] = tuple(bent)
    steps = steps[:i] + [dataclasses.replace(last, ops=ops)] + steps[i + 1:]
    with pytest.raises(ValueError, match="is not linear in the batch composition"):
        fit(steps)


def test_a_prompt_step_without_a_graph_takes_its_kernels_issue_time(model):
    """TensorRT-LLM graphs decode steps only: a step carrying a prompt is issued kernel by kernel,
    so it takes max(device time, kernels x eager_kernel_host_us); a decode step does not."""
    setup = prepare_serving(model, "H100-SXM", engine="trtllm")
    trt = dataclasses.replace(setup.engine, eager_kernel_host_us=1000.0)      # 1 ms per kernel: the issue decides
    eager = dataclasses.replace(setup, engine=trt)
    kernels = setup.cost.kernels
    assert kernels == sum(setup.cost.groups[g].form.kernel for g in setup.cost.order) > 10
    prompt = eager.step_cost_of([(0, 8, 8)], DecodeBatch(0, 0.0, 0.0), 0)[0]
    assert prompt == pytest.approx(kernels * 1e-3)
    decode = DecodeBatch(2, 20.0, 10.0)
    assert eager.step_cost_of([], decode, 0)[0] == setup.step_cost_of([], decode, 0)[0] < 1e-3


def test_attention_data_parallel_ranks_graph_their_own_share():
    """Four attention data-parallel ranks, graphs captured up to 8 tokens, 1 ms per eager kernel: 24
    decodes are 6 a rank, graphed and padded to 8 a rank (32 tokens in the step, no eager issue);
    40 are 10 a rank, past the largest graph: issued kernel by kernel (kernels x 1 ms). Each rank
    schedules its own sequences: the host time per sequence counts the busiest rank's."""
    from dispatchprof.serving.composition import Composition
    moe = tiny_model("mixtral", num_hidden_layers=2, num_local_experts=4)
    setup = prepare_serving(moe, "H100-SXM", engine="sglang", ep=4, dp_attention=4)
    engine = dataclasses.replace(setup.engine, cuda_graph_sizes=[1, 2, 4, 8], eager_kernel_host_us=1000.0)
    setup = dataclasses.replace(setup, engine=engine)
    padded = setup.layout.cost(Composition.decoding(24, 24 * 30.0, 30.0, 1).padded(32)).time_s
    assert setup.step_cost_of([], DecodeBatch(24, 24 * 30.0, 30.0), 0)[0] == \
        engine.step_s(padded, 6, 0, setup.overlaps) == pytest.approx(540e-6)     # host: 300 + 6 x 40 us
    assert setup.step_cost_of([], DecodeBatch(40, 40 * 30.0, 30.0), 0)[0] == pytest.approx(setup.cost.kernels * 1e-3)
    # host time per sequence: 1 ms each, 100 us a step; 24 decodes over 4 ranks: 6 on the busiest, 6.1 ms
    slow = dataclasses.replace(setup, engine=dataclasses.replace(engine, step_host_us=100.0, sequence_host_us=1000.0))
    assert slow.step_cost_of([], DecodeBatch(24, 24 * 30.0, 30.0), 0)[0] == pytest.approx(0.0061)


def test_fit_design_reports_each_chain(model):
    """progress(done, total, what) before each of the design's six chains and after the last."""
    calls = []
    fit_design(model, scenarios_of(["H100-SXM"]), progress=lambda *a: calls.append(a))
    assert calls == [(k, 6, "counting chains") for k in range(7)]


def test_weights_that_cannot_fit_are_refused_before_any_count(model, monkeypatch):
    """The tiny model's bf16 weights over 2 GPUs of 0.0001 GB each: refused with the bound, nothing
    counted; at 2 GPUs of 1 GB it goes on to count."""
    from dispatchprof.serving import serve
    total = 2 * sum(p.numel() for p in model.parameters())
    small = dataclasses.replace(load_device("H100-SXM"), memory_capacity_gb=1e-4)
    assert total / 2 > 1e5
    monkeypatch.setattr(serve, "fit_design", lambda *a, **k: pytest.fail("counted"))
    with pytest.raises(ValueError, match=rf"^the weights \({total / 1e9:.2f} GB\) need at least {total / 2e9:.2f} GB "
                                         rf"on each of the replica's 2 GPU\(s\), more than H100-SXM's 0.00 GB"):
        prepare_serving(model, small, tp=2)
    with pytest.raises(pytest.fail.Exception, match="counted"):
        prepare_serving(model, dataclasses.replace(small, memory_capacity_gb=1.0), tp=2)
