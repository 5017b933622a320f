"""Balanced experts in the layout an experts class declares: gpt-oss's transposed (in, out) weights,
biases and clamped SwiGLU over interleaved gate/up columns, counted by hand."""

import warnings

import torch
import transformers

from dispatchprof import OpCounter
from dispatchprof.llm.models import build_model, token_ids


def test_gpt_oss_experts_count_by_hand():
    config = transformers.AutoConfig.for_model(
        "gpt_oss", vocab_size=64, hidden_size=16, intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
        layer_types=["full_attention"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(config, torch.float32)
    with OpCounter() as c:
        model(token_ids(model, 1, 4))
    s = "model.layers.0.mlp.experts"
    # 4 tokens x top-2 = 8 token-expert pairs, 2 per expert; H = 16, I = 8 (gate_up [16, 2*8] per expert)
    # MACs: gate_up 8*16*16 = 2048 + down 8*8*16 = 1024
    assert c.get("macs", s) == 3072
    # CMP: gate clamp (max) 8*8 = 64 + up clamp (min and max) 2*64 = 128
    assert c.get("cmp", s) == 192
    # ADD: gate_up 8*16*15 = 1920, down 8*16*7 = 896, the two biases 8*16 + 8*16 = 256, up + 1 (64),
    # sigmoid's 1 + e^-x (64), the sum over the 2 experts of each token 4*16 = 64
    assert c.get("add", s) == 1920 + 896 + 256 + 64 + 64 + 64
    # MULT: products 3072, gate * alpha 64, gate * sigmoid 64, (up + 1) * glu 64, router weights 8*16 = 128
    assert c.get("mult", s) == 3072 + 64 + 64 + 64 + 128
