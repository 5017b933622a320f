"""Linear-attention states in serving memory (dispatchprof.serving.state_memory): one sequence's
states by hand, each engine's placement worked by hand and against vLLM's published block-size
arithmetic, the scheduler holding state blocks, and KV heads replicated over a larger TP group."""

import dataclasses
import math
import warnings

import pytest
import torch

from dispatchprof.llm.gated_delta import SequenceState, sequence_state
from dispatchprof.llm.models import build_model, load_config
from dispatchprof.serving.engine import run_engine
from dispatchprof.serving.engines import EngineError, engine_preset, load_engines
from dispatchprof.serving.metrics import request_results
from dispatchprof.serving.requests import Request
from dispatchprof.serving.scheduler import SchedulerConfig, SeqView, plan_step
from dispatchprof.serving.state_memory import StatePool, cache_layout, state_block_size
from dispatchprof.sim.parallel import kv_shards
from test_serving_engines import engine_file
from test_serving_gated_delta import SIZES, qwen35_config

#: Qwen3.5-397B-A17B on one of 8 GPUs (catalog config): 16 key and 64 value heads of 128, conv
#: kernel 4, bf16 conv state, float32 recurrent state; 45 gated delta-nets, 15 attention layers
#: with 2 KV heads of 256 (replicated: one per GPU).
CONV = (2 * 2 * 128 + 8 * 128) * 3 * 2          # channels x (K - 1) x 2 bytes = 9216
RECURRENT = 8 * 128 * 128 * 4                     # value heads x dk x dv x 4 bytes = 524288
KV_TOKEN = 15 * 2 * 1 * 256 * 2                   # layers x (k, v) x heads x dim x 2 bytes = 15360
QWEN35_TP8 = SequenceState(CONV + RECURRENT, 45, 15)


def test_one_sequences_states_by_hand():
    config = load_config("qwen3.5-397b-a17b")
    assert sequence_state(config, 2, tp=8) == QWEN35_TP8
    assert sequence_state(config, 2, tp=1).layer_bytes == (2 * 16 * 128 + 64 * 128) * 3 * 2 + 64 * 128 * 128 * 4
    assert QWEN35_TP8.bytes == 45 * 533504
    assert sequence_state(load_config("llama-3.1-8b"), 2, tp=1) is None


def test_kv_heads_are_replicated_over_a_larger_group():
    """vLLM holds max(1, kv_heads // tp) heads per GPU: 2 KV heads over 8 GPUs are 1 each (the
    cache split 2 ways), 8 over 4 are 2 each (4 ways); a latent (MLA) cache is whole on each."""
    qwen35 = load_config("qwen3.5-397b-a17b")
    assert kv_shards(qwen35, 8) == 2 and kv_shards(qwen35, 2) == 2 and kv_shards(qwen35, 1) == 1
    assert kv_shards(load_config("llama-3.1-70b"), 4) == 4 and kv_shards(load_config("llama-3.1-70b"), 8) == 8
    assert kv_shards(load_config("deepseek-v3"), 8) == 1


def test_vllms_block_size_arithmetic():
    """vLLM's attn_block_size = align x cdiv(mamba page, align x attention page of one token), as
    worked in public notes: one layer's token 2,048 B and a state page of 2,146,304 B give 1,056 at
    alignment 16; a 512 B latent and a 1,610,752 B state give 3,328 at alignment 256."""
    assert state_block_size(16, 2048 * 12, SequenceState(2_146_304, 36, 12)) == 1056
    assert state_block_size(256, 512 * 4, SequenceState(1_610_752, 20, 4)) == 3328


def test_a_shared_pool_by_hand():
    """vLLM: a block of 16 x ceil(533504 / (16 x 1024)) = 528 tokens of all 15 attention layers
    (8,110,080 B); a sequence's 45 states (24,007,680 B) take ceil(2.96) = 3 such blocks."""
    layout = cache_layout(100e9, KV_TOKEN, QWEN35_TP8, 16, 1024, StatePool("shared"))
    assert (layout.block_size, layout.state_blocks, layout.max_seqs) == (528, 3, 1024)
    assert layout.num_blocks == math.floor(100e9 / (528 * 15360)) == 12330


def test_a_split_pool_by_hand():
    """SGLang: 0.9 / 1.9 of 100 GB holds floor(47.37e9 / 24,007,680) = 1973 states; 1973 // 3 = 657
    sequences run; the KV cache gets the rest in blocks of one token."""
    layout = cache_layout(100e9, KV_TOKEN, QWEN35_TP8, 1, 2048, StatePool("split", 0.9, 3))
    slots = math.floor(100e9 * 0.9 / 1.9 / (45 * 533504))
    assert slots == 1973 and layout.max_seqs == 657 and layout.state_blocks == 0
    assert layout.num_blocks == math.floor((100e9 - 1973 * 45 * 533504) / 15360)
    assert cache_layout(100e9, KV_TOKEN, QWEN35_TP8, 1, 256, StatePool("split", 0.9, 3)).max_seqs == 256


def test_a_reserved_pool_and_refusals():
    """TensorRT-LLM: max_seqs states first; a pool too small to hold them is refused."""
    layout = cache_layout(100e9, KV_TOKEN, QWEN35_TP8, 32, 2048, StatePool("reserved"))
    assert layout.num_blocks == math.floor((100e9 - 2048 * 45 * 533504) / (15360 * 32)) and layout.max_seqs == 2048
    with pytest.raises(ValueError, match="take all 10.00 GB of the cache; lower max_seqs"):
        cache_layout(10e9, KV_TOKEN, QWEN35_TP8, 32, 2048, StatePool("reserved"))
    with pytest.raises(ValueError, match="leave room for no running sequence"):
        cache_layout(0.1e9, KV_TOKEN, QWEN35_TP8, 1, 2048, StatePool("split", 0.9, 3))
    with pytest.raises(ValueError, match="state_pool must be one of shared, split, reserved"):
        StatePool("pooled")


def test_a_model_without_states_keeps_its_blocks():
    layout = cache_layout(1e9, 1000.0, None, 16, 64, StatePool("split", 0.9, 3))
    assert (layout.num_blocks, layout.block_size, layout.state_blocks, layout.max_seqs) == (62500, 16, 0, 64)
    assert cache_layout(None, 1000.0, QWEN35_TP8, 16, 64, StatePool("shared"), blocks=7).num_blocks == 7


def test_the_scheduler_holds_state_blocks():
    """10 blocks of 4 tokens, 3 per sequence for its states: a 5-token prompt needs 2 + 3 = 5, so two
    are admitted and the third waits; the state blocks come back when a sequence finishes."""
    cfg = SchedulerConfig(num_blocks=10, block_size=4, max_batched_tokens=64, state_blocks=3)
    assert cfg.blocks_held(5) == 5 and cfg.blocks_held(0) == 0
    plan = plan_step([], [SeqView(i, 5, 0, 0) for i in range(3)], 10, cfg)
    assert plan.scheduled == ((0, 5, 5), (1, 5, 5)) and plan.admitted == (0, 1)
    seqs, reps = run_engine([Request(0.0, 5, 1)] * 3, cfg, lambda p, d, i: (0.01, 0.0))
    results = request_results(seqs)
    # step 1: two prefills (each finishes with its first token); step 2: the third
    assert [r.ttft_s for r in results] == pytest.approx([0.01, 0.01, 0.02])
    assert reps[0].free_blocks == 10
    with pytest.raises(ValueError, match="state_blocks must be a whole number >= 0"):
        SchedulerConfig(num_blocks=10, state_blocks=-1)


def test_engine_presets_place_states_as_their_engines():
    assert engine_preset("vllm").states == StatePool("shared")
    assert engine_preset("sglang").states == StatePool("split", 0.9, 3)
    assert engine_preset("trtllm").states == StatePool("reserved")


def test_a_split_pool_without_a_ratio_is_refused(tmp_path):
    path = engine_file(tmp_path, "sglang", "0.5")
    assert engine_preset("e", path=str(path)).state_slots_per_seq == 3
    path.write_text(path.read_text().replace("state_memory_ratio: 0.9", "state_memory_ratio: 0"))
    with pytest.raises(EngineError, match="engine e 1: a split state_pool needs state_memory_ratio > 0"):
        load_engines(str(path))


@pytest.fixture(scope="module")
def hybrid_setup():
    """A tiny Qwen3.5 (3 gated delta-nets, 1 attention layer) prepared on a B200 under vLLM."""
    from dispatchprof.serving.serve import prepare_serving

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(qwen35_config(**SIZES), dtype=torch.bfloat16)
    return prepare_serving(model, "B200", engine="vllm")


def test_serving_a_hybrid_model_places_its_states(hybrid_setup):
    """The tiny Qwen3.5 under each engine: the setup's states are the config's, and the scheduler
    gets the engine's placement of them."""
    from dispatchprof.serving.serve import scheduler_config

    setup = hybrid_setup
    layer = (2 * 2 * 8 + 4 * 12) * 3 * 2 + 4 * 8 * 12 * 4          # conv 480 B + recurrent 1,536 B = 2,016 B
    assert setup.state == SequenceState(layer, 3, 1)
    assert setup.kv_bytes_per_token == 2 * 2 * 16 * 2           # one layer, k and v, 2 heads of 16, bf16
    kw = dict(max_seqs=None, max_batched_tokens=None, chunked_prefill=None, block_size=None, memory_utilization=None,
              kv_blocks=None, prefix_hit=0.0)
    shared, _ = scheduler_config(setup, [], 1, **kw)
    # one layer's state of 2,016 B fits 16 tokens of 128 B: blocks of 16, ceil(3 x 2016 / 2048) = 3 per sequence
    assert (shared.block_size, shared.state_blocks) == (16, 3)
    assert shared.num_blocks == math.floor(setup.kv_memory(0.9) / (16 * 128))
    sglang = dataclasses.replace(setup, engine=engine_preset("sglang", memory_bytes=setup.capacity_bytes))
    split, _ = scheduler_config(sglang, [], 1, **kw)
    memory = sglang.kv_memory(sglang.engine.memory_utilization)
    slots = math.floor(memory * 0.9 / 1.9 / (3 * layer))
    assert split.state_blocks == 0 and split.max_seqs == min(sglang.engine.max_seqs, slots // 3)
    assert split.num_blocks == math.floor((memory - slots * 3 * layer) / 128)


def test_given_blocks_need_no_memory_left(hybrid_setup):
    """--kv-blocks with weights that leave no memory: the blocks given, the state blocks still held."""
    from dispatchprof.serving.serve import scheduler_config

    setup = dataclasses.replace(hybrid_setup, capacity_bytes=1.0)
    kw = dict(max_seqs=None, max_batched_tokens=None, chunked_prefill=None, block_size=None, memory_utilization=None,
              prefix_hit=0.0)
    with pytest.raises(ValueError, match="leave no memory for the KV cache"):
        scheduler_config(setup, [], 1, kv_blocks=None, **kw)
    config, _ = scheduler_config(setup, [], 1, kv_blocks=10, **kw)
    assert (config.num_blocks, config.block_size, config.state_blocks) == (10, 16, 3)
