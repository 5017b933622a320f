"""Weights quantized but for the modules a checkpoint keeps in the model's dtype
(dispatchprof.sim.quantization): which modules a pattern keeps, and the bytes, time and memory
of a `Quantized` weight dtype, worked by hand on the tiny Llama (hidden 64, MLP 96, vocab 100, 2
layers, 4 query and 2 KV heads of 16; fp32 tensors)."""

from __future__ import annotations

import pytest
import torch

from dispatchprof import OpCounter
from dispatchprof.serving.checks import check_weights_fit
from dispatchprof.serving.layout import expert_fraction
from dispatchprof.sim.catalog import load_device
from dispatchprof.sim.quantization import Quantized, keeps, weight_dtype_of
from tests.conftest import run_cli, tiny_model

#: The tiny Llama's parameters by kind (elements): attention q, k, v, o per layer: 64x64, 64x32,
#: 64x32, 64x64; MLP gate, up, down: 3 x 64x96; norms 2 x 64 per layer, the final 64; embedding and
#: LM head 100x64 each.
ATTENTION = 2 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64)          # 24,576
MLP = 2 * 3 * 64 * 96                                             # 36,864
NORMS = 2 * 2 * 64 + 64                                           # 320
EMBEDDINGS = 2 * 100 * 64                                         # 12,800


def test_patterns_keep_a_module_its_children_and_paths_ending_in_them():
    assert keeps("self_attn", "model.layers.3.self_attn")
    assert keeps("self_attn", "model.layers.3.self_attn.q_proj")
    assert keeps("model.layers.*.self_attn", "model.layers.3.self_attn.o_proj")
    assert keeps("*self_attn*", "model.layers.3.self_attn.o_proj")
    assert keeps("lm_head", "lm_head")
    assert not keeps("self_attn", "model.layers.3.mlp.experts.0.down_proj")
    assert not keeps("gate", "model.layers.3.mlp.gate_up_proj")           # components, not substrings
    assert keeps("gate", "model.layers.3.mlp.gate")
    q = Quantized("fp4", ("self_attn", "lm_head"))
    assert q.dtype_of("model.layers.0.self_attn.k_proj") is None and q.dtype_of("model.layers.0.mlp") == "fp4"
    assert weight_dtype_of(q, "lm_head") is None and weight_dtype_of("int8", "lm_head") == "int8"
    assert weight_dtype_of(None, "lm_head") is None
    assert str(q) == "fp4 but self_attn, lm_head" and str(Quantized("fp8")) == "fp8"


@pytest.mark.parametrize("args, message", [
    (("fp5",), r"weight_dtype must be one of \('fp32', .*'fp4'.*\) or a Quantized, got 'fp5'"),
    (("fp4", "self_attn"), r"keep= must be a tuple of module path patterns .* got 'self_attn'"),
    (("fp4", ("self_attn", "")), r"keep= must be a tuple of module path patterns"),
])
def test_bad_quantizations_are_refused_in_one_line(args, message):
    with pytest.raises(ValueError, match=message):
        Quantized(*args)


def _simulated(weight_dtype):
    model = tiny_model()
    with OpCounter(devices="H100-SXM", weight_dtype=weight_dtype) as c:
        model(input_ids=torch.zeros(1, 8, dtype=torch.long))
    (sim,) = c.simulations()
    return c.profile, sim


def test_kept_modules_read_their_weights_in_the_models_dtype_by_hand():
    profile, sim = _simulated(Quantized("int4", ("self_attn", "lm_head")))
    _, whole = _simulated("int4")
    for r, kept, all4 in zip(profile.records, sim.ops, whole.ops):
        if not r.param_elements:
            continue
        if "self_attn" in r.scope or r.scope == "lm_head":
            # fp32 weights as counted: the traffic of the int4 op plus 4 - 0.5 bytes per weight
            assert kept.traffic_bytes == pytest.approx(all4.traffic_bytes + r.param_elements * 3.5), r.scope
        else:
            assert kept.traffic_bytes == all4.traffic_bytes, r.scope
    # weights on the device: kept attention and LM head in fp32, the rest 4 bits
    kept_bytes = 4 * (ATTENTION + 100 * 64) + (MLP + NORMS + 100 * 64) // 2
    assert sim.capacity[0].weights_bytes == kept_bytes
    assert whole.capacity[0].weights_bytes == (ATTENTION + MLP + NORMS + EMBEDDINGS) // 2


def test_weights_fit_and_expert_share_count_kept_modules_whole():
    model = tiny_model()
    h100 = load_device("H100-SXM")
    check_weights_fit(model, [h100], Quantized("int4", ("self_attn",)), 1)     # 0.2 MB: fits
    tiny = h100.__class__(**{**h100.__dict__, "memory_capacity_gb": 1e-4})   # 100 kB
    # 4 x 24,576 kept + (36,864 + 320 + 12,800) / 2 = 98,304 + 24,992 = 123,296 bytes > 100,000
    with pytest.raises(ValueError, match=r"the weights \(0\.00 GB in int4 but self_attn\) need at least "):
        check_weights_fit(model, [tiny], Quantized("int4", ("self_attn",)), 1)
    check_weights_fit(model, [tiny], "int4", 1)        # (74,560) / 2 = 37,280 bytes fit
    assert expert_fraction(model, Quantized("int4", ("self_attn",))) == 0.0         # no routed experts


def test_the_cli_takes_a_checkpoints_ignore_list(capsys, tmp_path):
    import json
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 100, "max_position_embeddings": 256}))
    code, out, _ = run_cli(capsys, "profile", str(config), "--device", "H100-SXM", "--prompt-len", "8",
                           "--new-tokens", "1", "--top", "0", "--weight-dtype", "int4", "--keep-dtype",
                           "self_attn,lm_head")
    assert code == 0 and "(weights int4 but self_attn, lm_head," in " ".join(out.split())
    code, _, err = run_cli(capsys, "profile", str(config), "--keep-dtype", "self_attn")
    assert code == 2 and "--keep-dtype needs --weight-dtype" in err
    code, _, err = run_cli(capsys, "profile", str(config), "--weight-dtype", "int4", "--keep-dtype",
                           "self_attn,,lm_head")
    assert code == 2 and "expected comma-separated module path patterns such as self_attn,lm_head" in err


def test_mxfp4_weights_are_read_at_4_25_bits_and_computed_at_the_bf16_peak_by_hand():
    from op_formulas.matmul import matmul_cost
    from dispatchprof.results.records import OpRecord
    from dispatchprof.sim.timing import time_op
    b200 = load_device("B200")                   # bf16 2250 TFLOP/s at 0.8; fp4 9000 at 0.46
    m, n, k = 8192, 8192, 8192
    cost = matmul_cost(m, k, n).with_bytes(2 * (m * k + k * n), 2 * m * n)
    rec = OpRecord("aten.mm", "model.layers.0.mlp.experts.0.down_proj", "forward", "bfloat16", cost,
                   shapes=((m, k), (k, n)), param_bytes=2 * k * n, param_elements=k * n)
    mx, nv, bf = (time_op(0, rec, [b200], set(), w, False) for w in ("mxfp4", "fp4", None))
    assert mx.t_compute == pytest.approx(bf.t_compute)
    assert nv.t_compute == pytest.approx(bf.t_compute * (2250 * 0.8) / (9000 * 0.46))
    # weights at 4.25 bits (NVFP4's 4.5): traffic = activations + k n x 4.25 / 8
    assert mx.traffic_bytes == pytest.approx(bf.traffic_bytes - 2 * k * n + k * n * 4.25 / 8)
    assert nv.traffic_bytes == pytest.approx(bf.traffic_bytes - 2 * k * n + k * n * 4.5 / 8)
