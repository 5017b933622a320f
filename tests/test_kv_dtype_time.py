"""A KV cache stored narrower than the model's dtype (kv_dtype): the simulated cache traffic of
attention and of the cache appends follows it, under every runtime (sim.runtime.narrow_kv_cache)."""

import warnings

import pytest
import torch

from conftest import tiny_device_yaml, tiny_model
from dispatchprof import OpCounter
from dispatchprof.llm.generation import profile_generation


def tiny_llama():
    # 2 layers, 8 query heads and 2 KV heads of head_dim 32 (hidden 256), bf16
    return tiny_model(dtype=torch.bfloat16, vocab_size=1000, hidden_size=256, intermediate_size=512,
                      num_attention_heads=8)


def decode_traffic(model, runtime: str, kv_dtype: str | None) -> tuple[float, str]:
    """Simulated traffic of one decode step (batch 2, 16 cached tokens) on an H100."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.no_grad(), OpCounter(devices="H100-SXM", runtime=runtime, kv_dtype=kv_dtype) as c:
        with c.phase("prefill"):
            model(torch.zeros(2, 16, dtype=torch.long), past_key_values=cache, use_cache=True)
        with c.phase("decode"):
            model(torch.zeros(2, 1, dtype=torch.long), past_key_values=cache, use_cache=True)
    sim = c.simulated()
    return sum(t.traffic_bytes for t in sim.ops if sim.records[t.record].phase == "decode"), sim.runtime.describe()


@pytest.mark.parametrize("kv_dtype, share", [("fp8", 1 / 2), ("int4", 3 / 4)])
def test_eager_decode_step_moves_the_narrow_cache(kv_dtype, share):
    model = tiny_llama()
    full, _ = decode_traffic(model, "eager", None)
    narrow, text = decode_traffic(model, "eager", kv_dtype)
    # per layer, bf16: the key and the value appends each read the cache [2, 2, 16, 32] (4096 bytes)
    # and the new token [2, 2, 1, 32] (256) and write [2, 2, 17, 32] (4352): of their 8704 bytes,
    # 8704 - 2 * 256 = 8192 copy the cache (the new token is written as computed): 2 * 8192 = 16384;
    # attention reads keys and values [2, 2, 17, 32]: 2 * 4352 = 8704. 25088 per layer, 2 layers:
    # 50176 bytes of cache traffic, of which fp8 (8 of 16 bits) removes 1/2, int4 3/4.
    assert full - narrow == pytest.approx(50176 * share)
    # the whole count adds the prefill's attention: keys and values [2, 2, 16, 32], 8192 per layer
    assert f"KV cache stored in {kv_dtype} ({int((50176 + 2 * 8192) * share):,} bytes" in text


def test_compiled_decode_step_writes_the_new_token_in_place_then_narrows():
    model = tiny_llama()
    full, _ = decode_traffic(model, "compiled", None)
    narrow, _ = decode_traffic(model, "compiled", "fp8")
    # in place, an append moves the new token only (read 256, write 256), written as computed: it
    # copies no cache; attention still reads 8704 per layer: 8704 * 2 layers = 17408 bytes, fp8
    # halves it
    assert full - narrow == pytest.approx(17408 / 2)


def test_generation_time_follows_the_kv_dtype():
    model = tiny_llama()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bf16 = profile_generation(model, 4, 64, 8, devices=["H100-SXM"], runtime="serving", bound=True)
        fp8 = profile_generation(model, 4, 64, 8, devices=["H100-SXM"], runtime="serving", bound=True,
                                 kv_dtype="fp8")
        exact = profile_generation(model, 4, 64, 8, devices=["H100-SXM"], runtime="serving", bound=True,
                                   kv_dtype="fp8", exact=True)
    b, f = bf16.devices["H100-SXM"], fp8.devices["H100-SXM"]
    assert f.tpot_mean_s < b.tpot_mean_s                      # the decode steps read half the cache
    assert fp8.kv_cache_bytes * 2 == bf16.kv_cache_bytes
    assert f.tpot_mean_s == pytest.approx(exact.devices["H100-SXM"].tpot_mean_s, rel=1e-9)   # fast path


def test_bad_kv_dtype_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"OpCounter\(kv_dtype=...\) must be one of .*'fp8'.*got 'fp6'"):
        OpCounter(kv_dtype="fp6")


def test_weight_only_efficiency_slows_the_narrow_weight_stream_by_hand(tmp_path):
    from dispatchprof import DeviceProfileError, load_device

    # the Tiny device at 10 GB/s memory; host links and compute 1000x faster, so the memory stream decides
    text = tiny_device_yaml(host_to_device_gb_per_s=1000, device_to_host_gb_per_s=1000, matrix_tflops="{fp32: 1000}",
                            vector_tflops="{fp32: 1000}", weight_only_efficiency="{int4: 0.5}")
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    lin = torch.nn.Linear(1000, 1000, bias=False)
    x = torch.ones(1, 1000)

    def weight_stream_s(weight_dtype):
        with OpCounter(devices=str(path), weight_dtype=weight_dtype) as c:
            lin(x)
        return c.simulated().ops[-1].t_memory

    # int8: 1e6 weights * 1 byte + x 4000 + out 4000 bytes = 1,008,000 bytes at 10 GB/s = 100.8 us
    assert weight_stream_s("int8") == pytest.approx(1_008_000 / 10e9)
    # int4: 500,000 + 8,000 bytes, at half the bandwidth (weight_only_efficiency 0.5) = 101.6 us
    assert weight_stream_s("int4") == pytest.approx(508_000 / 10e9 / 0.5)
    path.write_text(text.replace("int4: 0.5", "int4: 1.5"))
    with pytest.raises(DeviceProfileError, match=r"weight_only_efficiency.*must be in \(0, 1\]"):
        load_device(str(path))


def test_weight_only_kernel_cost_is_added_to_each_kernel_reading_narrow_weights_by_hand(tmp_path):
    from dispatchprof import DeviceProfileError, load_device

    text = tiny_device_yaml(launch_overhead_us=2, weight_only_kernel_us="{int4: 3}")
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 100), torch.nn.Linear(100, 100, bias=False),
                                torch.nn.ReLU(), torch.nn.Linear(100, 100, bias=False))
    x = torch.zeros(1, dtype=torch.long)

    def overheads(weight_dtype, bound=False):
        with OpCounter(devices=str(path), weight_dtype=weight_dtype, bound=bound) as c:
            model(x)
        sim = c.simulated()
        return [(sim.records[t.record].op, t.t_overhead) for t in sim.ops]

    # eager: each op is its own kernel at 2 us (the weights' transposes are views, not kernels);
    # the two matmuls dequantise int4 weights: 2 + 3 = 5 us each; the embedding lookup reads its
    # table but is no matrix kernel
    assert overheads("int4") == [("aten.embedding", pytest.approx(2e-6)), ("aten.mm", pytest.approx(5e-6)),
                                 ("aten.relu", pytest.approx(2e-6)), ("aten.mm", pytest.approx(5e-6))]
    # int8 is not listed, weights in the model's dtype are not weight-only: the launch alone; bound: nothing
    assert [t for _, t in overheads("int8")] == [pytest.approx(2e-6)] * 4
    assert [t for _, t in overheads(None)] == [pytest.approx(2e-6)] * 4
    assert [t for _, t in overheads("int4", bound=True)] == [0.0] * 4
    path.write_text(text.replace("int4: 3", "int5: 3"))
    with pytest.raises(DeviceProfileError, match=r"weight_only_kernel_us.*unknown key 'int5'"):
        load_device(str(path))
