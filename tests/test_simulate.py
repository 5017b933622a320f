"""The roofline simulator: hand-worked cases to the nanosecond, and the physical decode bound."""

import warnings

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter, fake_inputs, fake_model, load_device

NS = 1e-9


def two_linear():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.Linear(128, 32))


def test_two_linear_on_pim_ai_1chip_by_hand():
    model, x = two_linear(), torch.randn(4, 64)           # x comes from the host
    with OpCounter(devices="PIM-AI-1chip") as c:
        model(x)
    sim = c.simulated()
    first, second = sim.ops
    # PIM-AI-1chip: 5 TFLOPS, 102.4 GB/s memory, 12.8 GB/s host->device @ 20 pJ/bit,
    # memory 0.95 pJ/bit, 0.4 pJ/FLOP.
    # Linear 0 = addmm [4,64]@[64,128] + bias: 32768 MULT + (32256 + 512) ADD = 65536 work
    assert first.t_compute == pytest.approx(65536 / 5e12, abs=1e-15)                  # 13.1072 ns
    # reads x 4*64*4 = 1024, W 64*128*4 = 32768, b 512; writes 4*128*4 = 2048 -> 36352 bytes
    assert first.t_memory == pytest.approx(36352 / 102.4e9, abs=1e-15)                # 355 ns
    assert first.t_transfer == pytest.approx(1024 / 12.8e9, abs=1e-15)                # 80 ns, x only
    assert first.bound == "memory"
    # Linear 1: 16384 MULT + (16256 + 128) ADD; reads 2048 + 16384 + 128, writes 512 = 19072 bytes
    assert second.t_compute == pytest.approx(32768 / 5e12, abs=1e-15)
    assert second.t_memory == pytest.approx(19072 / 102.4e9, abs=1e-15)               # 186.25 ns
    assert second.t_transfer == 0                                                     # produced on the chip
    total_s = 355 * NS + 80 * NS + 186.25 * NS
    assert abs(sim.total.time_s - total_s) < 1e-12                                    # to the picosecond
    energy_pj = (65536 + 32768) * 0.4 + 8 * (36352 + 19072) * 0.95 + 8 * 1024 * 20
    assert sim.total.energy_j == pytest.approx(energy_pj * 1e-12, rel=1e-12)          # 624384 pJ
    assert sim.total.power_w == pytest.approx(energy_pj * 1e-12 / total_s, rel=1e-12)
    assert sim.total.memory_bound_s == pytest.approx(541.25 * NS, rel=1e-12) and sim.total.compute_bound_s == 0
    assert sim.by_module()["0"].time_s == pytest.approx(435 * NS, rel=1e-12)


def test_placement_moves_tensors_over_the_host_links():
    model, x = two_linear(), torch.randn(4, 64)
    with OpCounter(devices={"1": "PIM-AI-4chip", "*": "PIM-AI-1chip"}) as c:
        model(x)
    sim = c.simulated("placement")
    assert sim.devices == ("PIM-AI-4chip", "PIM-AI-1chip")
    second = sim.ops[1]
    assert second.device == "PIM-AI-4chip"
    # h (4*128*4 = 2048 bytes) goes PIM-AI-1chip -> host (12.8 GB/s) -> PIM-AI-4chip (12.8 GB/s)
    assert second.t_transfer == pytest.approx(2048 / 12.8e9 + 2048 / 12.8e9, rel=1e-12)
    energy = (32768 * 0.4 + 8 * 19072 * 0.95 + 8 * 2048 * (20 + 80)) * 1e-12
    assert second.energy_j == pytest.approx(energy, rel=1e-12)
    assert set(sim.by_device()) == {"PIM-AI-1chip", "PIM-AI-4chip"}


def test_gpu_profiles_carry_achieved_fractions_and_bound_removes_them():
    # simulator v2 (issue #14): the H100 SXM measurements replace v1's assumed 0.8 / 0.7 / 4 us
    h100 = load_device("H100-SXM")
    assert (h100.memory_efficiency, h100.matrix_memory_efficiency, h100.compute_efficiency) == (0.9, 0.7, 0.8)
    assert (h100.launch_overhead_us, h100.host_overhead_us, h100.static_power_w) == (2, 7, 350)
    assert "issue #14" in h100.source_of("compute_efficiency") and "--bound" in h100.source
    model, x = two_linear(), torch.randn(4, 64)
    with OpCounter(devices="H100-SXM", host_time=False) as real, OpCounter(devices="H100-SXM", bound=True) as peak:
        model(x)
    first_real, first_peak = real.simulated().ops[0], peak.simulated().ops[0]
    assert first_real.t_memory == pytest.approx(first_peak.t_memory / 0.7)      # a matmul: matrix stream
    assert first_real.t_overhead == pytest.approx(2e-6) and first_peak.t_overhead == 0
    assert first_real.t_host == pytest.approx(7e-6) and first_peak.t_host == 0
    assert peak.simulated().total.static_j == 0 and real.simulated().total.static_j > 0


def test_side_by_side_devices_and_bad_names():
    model, x = two_linear(), torch.randn(4, 64)
    with OpCounter(devices=["PIM-AI-1chip", "H100-SXM"], bound=True) as c:
        model(x)
    fast, slow = c.simulated("h100-sxm"), c.simulated("PIM-AI-1chip")
    assert fast.total.time_s < slow.total.time_s                 # at the roofline bound
    with pytest.raises(ValueError, match="several devices were simulated; pick one: PIM-AI-1chip, H100-SXM"):
        c.simulated()
    with pytest.raises(ValueError, match="'A100-80GB' was not simulated; simulated: PIM-AI-1chip, H100-SXM"):
        c.simulated("A100-80GB")
    with pytest.raises(ValueError, match="no devices to simulate on"):
        OpCounter().simulated()
    with pytest.raises(ValueError, match="unknown device 'PIM-AI'; known devices"):
        OpCounter(devices="PIM-AI")
    with pytest.raises(ValueError, match="no catch-all rule"):
        OpCounter(devices={"*.mlp*": "PIM-AI-1chip"})
    with pytest.raises(ValueError, match=r"weight_dtype=...\) must be one of \('fp32', 'bf16', 'fp16', 'fp8', "
                                         r"'int8', 'int4', 'fp4', 'mxfp4'\) or a Quantized, got 'int3'"):
        OpCounter(devices="L4", weight_dtype="int3")


def test_per_element_overrides_replace_compute_time():
    x = torch.randn(8, 100)
    with OpCounter(devices="PIM-AI-4chip") as c:
        torch.softmax(x, -1)
        nn.functional.silu(x)
    softmax, silu = c.simulated().ops
    assert softmax.t_compute == pytest.approx(0.1e-9 * 800) and silu.t_compute == pytest.approx(0.15e-9 * 800)


def test_cost_weights_efficiency_overhead_and_static_power(tmp_path):
    path = tmp_path / "slow.yaml"
    path.write_text("""
source: a test
devices:
  Slow:
    memory_capacity_gb: 1
    memory_bandwidth_gb_per_s: 1
    memory_pj_per_bit: 0
    host_to_device_gb_per_s: 1
    host_to_device_pj_per_bit: 0
    device_to_host_gb_per_s: 1
    device_to_host_pj_per_bit: 0
    matrix_tflops: {fp32: 1}
    vector_tflops: {fp32: 0.000001}
    pj_per_flop: 0
    cost_weights: {exp: 8}
    compute_efficiency: 0.5
    launch_overhead_us: 2
    static_power_w: 10
""")
    x = torch.randn(1000)
    with OpCounter(devices=str(path)) as c:
        torch.exp(x)
    (op,) = c.simulated().ops
    assert op.t_compute == pytest.approx(1000 * 8 / (1e6 * 0.5))          # 16 ms: weighted work / (peak * eff)
    assert op.t_overhead == pytest.approx(2e-6)
    assert op.t_transfer == pytest.approx(4000 / 1e9)                      # x from the host at 1 GB/s
    assert op.energy_j == pytest.approx(10 * (op.t_compute + 2e-6 + 4e-6))  # static power x t_op only


def llama_2_7b():
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                         rope_theta=10000.0)
    return fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.float16)


@pytest.fixture(scope="module")
def decode_step():
    """A Llama-2-7B-shaped (fp16) prefill of 16 tokens then one decode step, batch 1."""
    from transformers import DynamicCache

    model = llama_2_7b()
    devices = ["PIM-AI-1chip", "PIM-AI-4dimm", "H100-PCIe", "A17Pro"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad(), OpCounter(devices=devices, bound=True) as c:   # the physical bound
            cache = DynamicCache(config=model.config)
            with c.phase("prefill"):
                model(fake_inputs(model, 1, 16), past_key_values=cache, use_cache=True)
            with c.phase("decode"):
                model(fake_inputs(model, 1, 1), past_key_values=cache, use_cache=True)
    return model, c


@pytest.mark.parametrize("device", ["PIM-AI-1chip", "PIM-AI-4dimm", "H100-PCIe"])
def test_llama_2_7b_decode_step_is_within_3_percent_of_weight_bytes_over_bandwidth(decode_step, device):
    model, c = decode_step
    weight_bytes = sum(p.numel() for p in model.parameters()) * 2
    assert weight_bytes == 6_738_415_616 * 2                                   # MODELS.md
    bound = weight_bytes / (load_device(device).memory_bandwidth_gb_per_s * 1e9)
    decode = c.simulated(device).by_phase()["decode"]
    assert decode.time_s == pytest.approx(bound, rel=0.03)


def test_capacity_is_reported_plainly(decode_step):
    model, c = decode_step
    phone = c.simulated("A17Pro").capacity[0]
    assert phone.fits is False and phone.weights_bytes == 6_738_415_616 * 2
    assert phone.over_bytes == phone.required_bytes - 8 * 10**9
    assert "A17Pro: needs 13.4" in phone.message and "but has 8.00 GB" in phone.message and "over capacity" in phone.message
    assert c.simulated("H100-PCIe").fits() is True
    pim = c.simulated("PIM-AI-1chip").capacity[0]
    assert pim.fits is None and "not published" in pim.message


def test_fp4_weights_carry_their_nvfp4_block_scales():
    model, x = two_linear(), torch.randn(4, 64)
    with OpCounter(devices=["B200"], weight_dtype="fp4") as c:
        model(x)
    first = c.simulated().ops[0]
    # 64*128 + 128 parameter elements at 4 bits plus one 8-bit scale per 16: 8320 * 72 / 128 = 4680
    # bytes, beside the fp32 input (4*64*4 = 1024 bytes) and output (4*128*4 = 2048 bytes)
    assert first.traffic_bytes == 1024 + 4680 + 2048
    assert c.simulated().capacity[0].weights_bytes == pytest.approx((64 * 128 + 128 + 128 * 32 + 32) * 4.5 / 8, abs=2)


def test_weight_dtype_int4_changes_parameter_bytes_and_peak():
    model, x = two_linear(), torch.randn(4, 64)
    with OpCounter(devices=["PIM-AI-4chip"], weight_dtype="int4") as c:
        model(x)
    first = c.simulated().ops[0]
    # weights 64*128 elements at 4 bits = 4096 bytes; bias 128 elements = 64 bytes (parameters too)
    assert first.t_memory == pytest.approx((1024 + 4096 + 64 + 2048) / 409.6e9, rel=1e-12)
    assert first.t_compute == pytest.approx(65536 / 128e12, rel=1e-12)       # the int4 matrix peak
    assert c.simulated().capacity[0].weights_bytes == (64 * 128 + 128 + 128 * 32 + 32) // 2
