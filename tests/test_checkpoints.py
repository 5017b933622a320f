"""scripts/checkpoints.py: the modules NVIDIA's NVFP4 checkpoints keep in bf16, as patterns that
name the catalog models' own modules (transformers' names, which differ from some checkpoints')."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import checkpoints  # noqa: E402
from serving_rows import MODELS  # noqa: E402

from dispatchprof import Quantized  # noqa: E402
from dispatchprof.llm.layer_repeat import prefix_layers, shallow_model  # noqa: E402
from dispatchprof.llm.models import build_model  # noqa: E402
from dispatchprof.sim.quantization import keeps  # noqa: E402


@pytest.mark.parametrize("key", sorted(checkpoints.KEPT_IN_BF16))
def test_every_pattern_keeps_modules_of_the_catalog_model_and_never_the_experts(key):
    patterns, source = checkpoints.KEPT_IN_BF16[key]
    assert source
    model = build_model(MODELS[key[0]])
    model = shallow_model(model, prefix_layers(model.config) + 4)          # the last layers have routed experts
    scopes = {name.rpartition(".")[0] for name, _ in model.named_parameters()}
    for p in patterns:
        assert any(keeps(p, s) for s in scopes), f"{p} names no module of {MODELS[key[0]]}"
    experts = [s for s in scopes if ".experts" in s and "shared" not in s]
    assert experts and not any(keeps(p, s) for p in patterns for s in experts)


def test_rows_of_listed_checkpoints_keep_those_modules():
    kept = checkpoints.KEPT_IN_BF16["MiniMaxAI/MiniMax-M2.5", "nvfp4"][0]
    def row(model_path, quant):
        return {"model_path": model_path, "gemm_quant_mode": quant}
    assert checkpoints.stored_weights(row("MiniMaxAI/MiniMax-M2.5", "nvfp4"), "fp4") == Quantized("fp4", kept)
    assert checkpoints.stored_weights(row("MiniMaxAI/MiniMax-M2.5", "fp8"), "fp8") == "fp8"      # not transcribed
    assert checkpoints.stored_weights(row("openai/gpt-oss-120b", "nvfp4"), "fp4") == Quantized(
        "mxfp4", ("self_attn", "mlp.router", "embed_tokens", "lm_head"))
    assert checkpoints.stored_weights(row("openai/gpt-oss-120b", "fp8"), "fp8") == "fp8"
    assert checkpoints.stored_weights(row("Qwen/Qwen3-32B", ""), None) is None
