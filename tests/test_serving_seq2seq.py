"""Encoder-decoder serving (T5, Whisper): the prompt's encoder in the TTFT, cross-attention decode
steps, against direct counting; requests by hand; bad input."""

import random
import warnings

import pytest
import torch

from dispatchprof import OpCounter
from dispatchprof.count.fake import fake_mode
from dispatchprof.llm.models import build_model, token_ids
from dispatchprof.serving import Request, prepare_serving, simulate_serving
from dispatchprof.serving.engine import DecodeBatch
from dispatchprof.serving.seq2seq import count_decode_model, count_prompt_model, decode_composition
from dispatchprof.serving.cost import fit
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.timeline import step_time

DEVICES = ["H100-SXM", "PIM-AI-1chip"]
D_MODEL = 32


def _quiet(build):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build()


def t5_config():
    from transformers import T5Config
    return T5Config(vocab_size=256, d_model=D_MODEL, d_kv=8, d_ff=64, num_layers=2, num_heads=4)


def whisper_config():
    from transformers import WhisperConfig
    return WhisperConfig(vocab_size=256, d_model=D_MODEL, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                         max_source_positions=16, max_target_positions=64, pad_token_id=0,
                         bos_token_id=1, eos_token_id=2, decoder_start_token_id=3)


@pytest.fixture(scope="module")
def t5():
    return _quiet(lambda: build_model(t5_config(), generator=True))


def simulated(c, start=0):
    """Per device, (time, energy) of the count's ops from ``start``: their host/device timeline,
    energy = dynamic energy + static power x time."""
    out = {}
    for sim in c.simulations():
        ops = sim.ops[start:]
        t = step_time(ops)
        out[sim.name] = (t, sum(o.dynamic_j for o in ops) + sim.static_power_w * t)
    return out


def direct_prompt(model, inputs, scenarios, runtime, kv_dtype=None):
    """The encoder over one prompt and the decoder's first step (its start token), counted."""
    from transformers import DynamicCache, EncoderDecoderCache
    with torch.no_grad(), OpCounter(devices=scenarios, runtime=runtime, kv_dtype=kv_dtype) as c, c.phase("prefill"):
        encoded = model.get_encoder()(**inputs).last_hidden_state
        model(decoder_input_ids=token_ids(model, 1, 1), encoder_outputs=(encoded,),
              past_key_values=EncoderDecoderCache(DynamicCache(), DynamicCache()), use_cache=True)
    return simulated(c)


def direct_decode(model, batch, prompt, past, scenarios, runtime, kv_dtype=None):
    """Decode step ``past`` (1-based) of ``batch`` sequences after prompts of ``prompt``
    positions: the first decoder step and past - 1 decode steps set up the caches in the count."""
    from transformers import DynamicCache, EncoderDecoderCache
    with fake_mode(model):
        encoded = torch.empty(batch, prompt, D_MODEL, dtype=torch.bfloat16)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    with torch.no_grad(), OpCounter(devices=scenarios, runtime=runtime, kv_dtype=kv_dtype) as c:
        for i in range(past + 1):
            start = c.records_counted
            with c.phase("decode" if i else "prefill"):
                model(decoder_input_ids=token_ids(model, batch, 1), encoder_outputs=(encoded,), past_key_values=cache,
                      use_cache=True)
    return simulated(c, start)


@pytest.mark.parametrize("runtime, kv_dtype", [("eager", None), ("compiled", None), ("compiled", "fp8")])
def test_prompt_cost_matches_direct_counting(t5, runtime, kv_dtype):
    """Equal to 1e-9 relative at prompt lengths the design did not count (1 is counted on its own);
    with an fp8 KV cache too."""
    scenarios = scenarios_of(DEVICES)
    prompts = count_prompt_model(t5, scenarios, runtime=runtime, kv_dtype=kv_dtype)
    for p in (1, 5, 37, random.Random(5).randint(100, 600)):
        want = direct_prompt(t5, {"input_ids": token_ids(t5, 1, p)}, scenarios, runtime, kv_dtype)
        for name in DEVICES:
            got = prompts[name].cost(p)
            assert got.time_s == pytest.approx(want[name][0], rel=1e-9), (p, name)
            assert got.energy_j == pytest.approx(want[name][1], rel=1e-9), (p, name)


@pytest.mark.parametrize("runtime, kv_dtype", [("eager", None), ("compiled", None), ("compiled", "fp8")])
def test_decode_step_matches_direct_counting(t5, runtime, kv_dtype):
    """Equal to 1e-9 relative on uniform batches the design did not count; with an fp8 KV cache
    too (self and cross keys and values narrowed as the simulator narrows them). Step ``past`` has
    generated ``past`` tokens: computed = prompt + past - 1 per sequence (seq2seq docstring)."""
    scenarios = scenarios_of(DEVICES)
    steps, _ = count_decode_model(t5, scenarios, runtime=runtime, kv_dtype=kv_dtype)
    models = fit(steps)
    rng = random.Random(11)
    checks = [(1, 1, 1)] + [(rng.randint(2, 5), rng.randint(20, 300), rng.randint(2, 40)) for _ in range(2)]
    for b, e, p in checks:
        want = direct_decode(t5, b, e, p, scenarios, runtime, kv_dtype)
        view = DecodeBatch(b, b * (e + p - 1), e + p - 1, b * e, e, p)
        for name in DEVICES:
            got = models[name].cost(decode_composition(view))
            assert got.time_s == pytest.approx(want[name][0], rel=1e-9), (b, e, p, name)
            assert got.energy_j == pytest.approx(want[name][1], rel=1e-9), (b, e, p, name)


def test_two_requests_by_hand(t5):
    """Both arrive at 0 and prefill in the first step: its time is the two prompts' costs one
    after the other (counted directly here), so both first tokens come then. The second step
    decodes both: N = 2, self keys 2 + 2, cross keys 64 + 9 (DecodeBatch by hand)."""
    setup = prepare_serving(t5, "H100-SXM", runtime="eager")
    scenarios = scenarios_of("H100-SXM")
    first = sum(direct_prompt(t5, {"input_ids": token_ids(t5, 1, p)}, scenarios, "eager")["H100-SXM"][0]
                for p in (64, 9))
    result = simulate_serving(setup, [Request(0.0, 64, 2), Request(0.0, 9, 2)])
    assert [r.ttft_s for r in result.requests] == pytest.approx([first, first], rel=1e-9)
    # step 2: computed = 64 and 9 (prompt + 1 generated - 1), generated 1 each
    decode = setup.cost.cost(decode_composition(DecodeBatch(2, 73, 64, 73, 64, 1))).time_s
    assert decode == pytest.approx(setup.step_cost([], DecodeBatch(2, 73, 64, 73, 64, 1), 0)[0], rel=1e-12)
    assert [r.e2e_s for r in result.requests] == pytest.approx([first + decode] * 2, rel=1e-9)
    assert result.config.chunked_prefill is False           # an encoder reads its whole prompt at once


def test_kv_bytes_per_token_by_hand(t5):
    """2 decoder layers x (keys + values) x 4 heads x 8 dims x 2 bytes (bf16) = 256 bytes per
    token, for the prompt's cross-attention cache and the decoder's own alike; fp8 halves it."""
    assert prepare_serving(t5, "H100-SXM").kv_bytes_per_token == 2 * 2 * 4 * 8 * 2 == 256
    assert prepare_serving(t5, "H100-SXM", kv_dtype="fp8").kv_bytes_per_token == 128


def test_kv_dtype_makes_a_long_prompt_decode_faster(t5):
    """A decode batch over long prompts is memory bound on its cross-attention cache: fp8 (8 of
    bf16's 16 bits) takes less time."""
    full = prepare_serving(t5, "H100-SXM", bound=True)
    half = prepare_serving(t5, "H100-SXM", bound=True, kv_dtype="fp8")
    long = decode_composition(DecodeBatch(64, 64 * 40, 40, 64 * 4000, 4000, 40))
    assert half.cost.cost(long).time_s < 0.75 * full.cost.cost(long).time_s


def test_whisper_ttft_includes_its_audio_encoder():
    """Whisper's encoder reads a fixed window: 32 log-mel frames (its convolutions' strides 1 and
    2) give its 16 positions; one request's TTFT is that encoder and the first decoder step,
    counted directly."""
    whisper = _quiet(lambda: build_model(whisper_config(), generator=True))
    setup = prepare_serving(whisper, "H100-SXM", runtime="eager")
    with fake_mode(whisper):
        frames = torch.empty(1, 16, 32, dtype=torch.bfloat16)
    want = direct_prompt(whisper, {"input_features": frames}, scenarios_of("H100-SXM"), "eager")["H100-SXM"][0]
    result = simulate_serving(setup, [Request(0.0, 16, 3)])
    assert result.requests[0].ttft_s == pytest.approx(want, rel=1e-9) and want > 0
    with pytest.raises(ValueError, match="request 0 has prompt_tokens=100; this model's encoder reads one fixed audio "
                                         "window of 16 positions"):
        simulate_serving(setup, [Request(0.0, 100, 3)])


def test_encoder_decoder_bad_input_in_one_line(t5):
    from transformers import T5Model
    bare = _quiet(lambda: build_model(t5_config()))
    assert isinstance(bare, T5Model)
    with pytest.raises(ValueError, match="T5Model has no LM head: serving an encoder-decoder needs its "
                                         "conditional-generation model"):
        prepare_serving(bare, "H100-SXM")
    with pytest.raises(ValueError, match="T5ForConditionalGeneration is an encoder-decoder model: speculative"):
        prepare_serving(t5, "H100-SXM", draft=t5)
    with pytest.raises(ValueError, match="T5ForConditionalGeneration is an encoder-decoder model: images need"):
        prepare_serving(t5, "H100-SXM", image_size=32)
