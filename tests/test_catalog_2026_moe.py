"""The 2026 mixture-of-experts models of AIConfigurator's silicon sample in the catalog (MiniMax-M2.5,
Qwen3.5-397B-A17B, Kimi-K2.5, GLM-5): their parameters worked out by hand from each config, what a
one-token forward reads and multiplies, and the silicon-sample rows mapped to them.

"Active per token" here is what a one-token forward reads as parameters and buffers under balanced
routing (each of the token's k expert copies goes to its own expert): every dense weight, the k routed
experts, the shared expert, the router, the norms, one row of the embedding table (a gather), the
router's e_score_correction_bias and the rotary inv_freq buffers; it is the sum of the records'
``param_elements``."""

import warnings

import pytest
import transformers

import serving_rows as sr
from dispatchprof import OpCounter
from dispatchprof.llm.catalog import catalog
from dispatchprof.llm.models import build_model, token_ids

# MiniMax-M2.5 (H 3072, 48 heads of 128, 8 KV heads, 256 experts of 1536, top 8, vocab 200064, 62 layers):
#   attention q 3072x6144 + k, v 2 x 3072x1024 + o 6144x3072 = 44,040,192; q_norm 6144 + k_norm 1024 (per layer)
#   one expert 3 x 3072x1536 = 14,155,776; 256 experts 3,623,878,656; router 256x3072 = 786,432; norms 2 x 3072
#   layer 44,040,192 + 7,168 + 3,623,878,656 + 786,432 + 6,144 = 3,668,718,592
#   62 x 3,668,718,592 + 2 x 200064x3072 (embedding, LM head) + 3072 = 228,689,748,992 ("230B")
MINIMAX_LAYER_ACTIVE = 44_040_192 + 7_168 + 8 * 14_155_776 + 786_432 + 6_144 + 256   # + 256 bias = 158,086,400
MINIMAX_HEAD = 200_064 * 3_072 + 3_072 + 3_072 + 32     # LM head, final norm, embedding row, inv_freq (64 / 2)

# Kimi-K2.5 text model (DeepSeek-V3 code, H 7168, 64 heads; 1 dense + 60 MoE layers of 384 experts of 2048):
#   attention q_a 7168x1536 + 1536 + q_b 1536x(64x192) + kv_a 7168x576 + 512 + kv_b 512x(64x256) + o 8192x7168
#   = 101,124,096 (of which 101,122,048 in linears); dense MLP 3 x 7168x18432 = 396,361,728; one expert
#   3 x 7168x2048 = 44,040,192; router 384x7168 = 2,752,512; norms 2 x 7168
#   dense layer 497,500,160; MoE layer 101,124,096 + 385 x 44,040,192 + 2,752,512 + 14,336 = 17,059,364,864
#   + 2 x 163840x7168 + 7168 = 1,026,408,209,408 ("1T"; kimi-k2's sizes)
KIMI_ATTENTION = 101_124_096 + 14_336                                     # with the layer's two norms
KIMI_DENSE_ACTIVE = KIMI_ATTENTION + 396_361_728
KIMI_MOE_ACTIVE = KIMI_ATTENTION + 9 * 44_040_192 + 2_752_512 + 384      # 8 routed + 1 shared; + bias
KIMI_HEAD = 163_840 * 7_168 + 7_168 + 7_168 + 32

# GLM-5 (H 6144, MLA with 64 heads, q_lora 2048, qk 192 + 64, v 256, DSA indexer 32 heads of 128;
# 3 dense + 75 MoE layers of 256 experts of 2048, top 8, 1 shared):
#   MLA q_a 6144x2048 + 2048 + q_b 2048x16384 + kv_a 6144x576 + 512 + kv_b 512x(64x448) + o 16384x6144
#   = 165,022,208; indexer wq_b 2048x4096 + wk 6144x128 + k_norm 128 + 128 (LayerNorm) + weights_proj 6144x32
#   = 9,371,904; dense MLP 3 x 6144x12288 = 226,492,416; one expert 3 x 6144x2048 = 37,748,736;
#   router 256x6144 = 1,572,864; norms 2 x 6144
#   dense layer 174,394,112 + 226,492,416 + 12,288 = 400,898,816
#   MoE layer 174,394,112 + 257 x 37,748,736 + 1,572,864 + 12,288 = 9,877,404,416
#   3 x 400,898,816 + 75 x 9,877,404,416 + 2 x 154880x6144 + 6144 = 743,911,199,232 ("744B")
GLM_ATTENTION = 165_022_208 + 9_371_904 + 12_288
GLM_DENSE_ACTIVE = GLM_ATTENTION + 226_492_416
GLM_MOE_ACTIVE = GLM_ATTENTION + 9 * 37_748_736 + 1_572_864 + 256
GLM_HEAD = 154_880 * 6_144 + 6_144 + 6_144 + 32

# Qwen3.5-397B-A17B text model (H 4096; 45 Gated DeltaNet + 15 gated full-attention layers; 512 experts of 1024,
# top 10, one shared expert of 1024 with a sigmoid gate 4096x1):
#   DeltaNet in_proj_qkv 4096x(2x2048 + 8192) + in_proj_z 4096x8192 + in_proj_b, a 2 x 4096x64 + conv1d 12288x4
#   + dt_bias 64 + A_log 64 + gated norm 128 + out_proj 8192x4096 = 118,014,208
#   full attention q 4096x(32x256x2) + k, v 2 x 4096x512 + o 8192x4096 + q/k norms 2 x 256 = 104,858,112
#   MoE 512 x 3 x 4096x1024 + shared 3 x 4096x1024 + 4096 + router 512x4096 = 6,457,135,104; norms 2 x 4096
#   45 x 118,014,208 + 15 x 104,858,112 + 60 x 6,457,143,296 + 2 x 248320x4096 + 4096 = 396,346,350,336 ("397B")
QWEN_DELTANET = 118_014_208 + 8_192
QWEN_FULL = 104_858_112 + 8_192
QWEN_MOE_ACTIVE = 11 * 12_582_912 + 4_096 + 2_097_152                   # 10 routed + 1 shared, gate, router
QWEN_HEAD = 248_320 * 4_096 + 4_096 + 4_096 + 32

TOTALS = {"minimax-m2.5": 62 * 3_668_718_592 + 2 * 200_064 * 3_072 + 3_072,
          "kimi-k2.5": 497_500_160 + 60 * 17_059_364_864 + 2 * 163_840 * 7_168 + 7_168,
          "glm-5": 3 * 400_898_816 + 75 * 9_877_404_416 + 2 * 154_880 * 6_144 + 6_144,
          "qwen3.5-397b-a17b": 45 * 118_014_208 + 15 * 104_858_112 + 60 * (6_457_135_104 + 8_192)
                               + 2 * 248_320 * 4_096 + 4_096}

# (layers of the shallow variant, its one-token active parameters by hand, its one-token MACs by hand or None)
SHALLOW = {
    # 1 layer; MACs: the linears (all but the norms, bias, embedding row and inv_freq: 772,669,440)
    # + attention's two products 2 x 48 heads x 128 = 12,288
    "minimax-m2.5": (1, MINIMAX_LAYER_ACTIVE + MINIMAX_HEAD, 772_669_440 + 12_288),
    # 1 dense + 1 MoE layer; MACs: linears 2,172,125,184 (kv_b_proj's 512 x 64 x (128 + 128) per layer run as
    # the absorbed W_UK and W_UV products, 64 x 128 x 512 each: the same MACs at one token, llm/mla.py)
    # + the latent attention's products 2 layers x 64 heads x ((512 + 64) scores + 512 output) = 139,264
    "kimi-k2.5": (2, KIMI_DENSE_ACTIVE + KIMI_MOE_ACTIVE + KIMI_HEAD, 2_172_125_184 + 139_264),
    # 3 dense + 1 MoE layer; MACs: linears 2,669,936,640 + per layer MLA 64 x (256 + 256) + indexer 32 x 128
    # + its head weights 32 = 36,896
    "glm-5": (4, 3 * GLM_DENSE_ACTIVE + GLM_MOE_ACTIVE + GLM_HEAD, 2_669_936_640 + 4 * 36_896),
    # 3 DeltaNet + 1 full-attention layer; MACs not worked out (transformers' reference chunked delta rule
    # pads the token to a 64-token chunk)
    "qwen3.5-397b-a17b": (4, 3 * QWEN_DELTANET + QWEN_FULL + 4 * QWEN_MOE_ACTIVE + QWEN_HEAD, None),
}

# Full depth by the same per-layer figures (a full-depth one-token count gives each figure exactly: 10-15 s
# a model, not run here), against the published active sizes
ACTIVE = {"minimax-m2.5": (62 * MINIMAX_LAYER_ACTIVE + MINIMAX_HEAD, 10e9),                 # 10,415,959,584
          "kimi-k2.5": (KIMI_DENSE_ACTIVE + 60 * KIMI_MOE_ACTIVE + KIMI_HEAD, 32e9),           # 31,687,103,008
          "glm-5": (3 * GLM_DENSE_ACTIVE + 75 * GLM_MOE_ACTIVE + GLM_HEAD, 40e9),              # 40,833,152,288
          # Qwen's "A17B" counts the embedding table whole (1,017,118,720 more than its one row)
          "qwen3.5-397b-a17b": (45 * QWEN_DELTANET + 15 * QWEN_FULL + 60 * QWEN_MOE_ACTIVE + QWEN_HEAD
                                + 248_320 * 4_096 - 4_096, 17e9)}                              # 17,349,040,928


def shallow(name: str, layers: int):
    """The catalog model ``name`` with its first ``layers`` layers (its layer pattern starts the same)."""
    entry = catalog()[name]
    return build_model(transformers.AutoConfig.for_model(entry.model_type,
                                                         **{**entry.config, "num_hidden_layers": layers}))


@pytest.mark.parametrize("name", sorted(TOTALS))
def test_total_parameters_worked_by_hand(name):
    assert catalog()[name].parameters == TOTALS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(name)
    assert sum(p.numel() for p in model.parameters()) == TOTALS[name]


@pytest.mark.parametrize("name", sorted(SHALLOW))
def test_one_token_reads_the_active_parameters_and_counts_every_op(name):
    layers, active, macs = SHALLOW[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = shallow(name, layers)
        with OpCounter(model) as c:
            model(token_ids(model, 1, 1))
    assert c.unknown_ops() == []
    assert sum(r.param_elements for r in c.profile.records) == active
    if macs is not None:
        assert c.get("macs") == macs


@pytest.mark.parametrize("name", sorted(ACTIVE))
def test_active_parameters_at_full_depth_round_to_the_published_ones(name):
    active, published = ACTIVE[name]
    assert abs(active - published) / published < 0.05


HUB = {"MiniMaxAI/MiniMax-M2.5": "minimax-m2.5", "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
       "moonshotai/Kimi-K2.5": "kimi-k2.5", "zhipuai/GLM-5": "glm-5"}


@pytest.mark.parametrize("hub", sorted(HUB))
def test_silicon_sample_ids_map_to_the_catalog_as_mixtures_of_experts(hub):
    assert sr.MODELS[hub] == HUB[hub] and hub in sr.MOE and HUB[hub] in catalog()


def test_silicon_sample_rows_of_the_new_models(tmp_path):
    from test_serving_rows import disagg, row, write

    rows, skipped = sr.aic_rows(write(tmp_path, [
        row(id="m", model_path="MiniMaxAI/MiniMax-M2.5", system="h200_sxm", backend="vllm", backend_version="0.12.0",
            tp_size="4", moe_tp_size="4", moe_ep_size="1"),
        row(id="q", model_path="Qwen/Qwen3.5-397B-A17B", system="b200_sxm", backend="sglang", backend_version="0.5.6",
            tp_size="8", moe_tp_size="1", moe_ep_size="8"),
        row(id="k", model_path="moonshotai/Kimi-K2.5", gemm_quant_mode="int4_wo", moe_quant_mode="int4_wo"),
        disagg(id="g", model_path="zhipuai/GLM-5")]))
    assert [(r.id, r.model, r.device, r.tp, r.ep) for r in rows] == [
        ("m", "minimax-m2.5", "H200", 4, 1), ("q", "qwen3.5-397b-a17b", "B200", 8, 8)]
    assert [(s.id, s.reason) for s in skipped] == [
        ("k", "weights int4_wo: no simulated weight dtype"),
        ("g", "disaggregated, decode side: experts over moe_tp 1 x moe_ep 1 GPUs, not the tp 4 x attention_dp 1 "
              "GPUs that run attention")]
