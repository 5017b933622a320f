"""What the quantized checkpoints behind the silicon sample's 4-bit mixture-of-experts rows store:
the weight dtype where the sample's label is not the checkpoint's (`STORED_AS`), and the modules their
configs exclude from quantization (`KEPT_IN_BF16`), as `dispatchprof.Quantized` patterns.

The sample names a row's model (``model_path``) and its GEMM quantization (``gemm_quant_mode``),
not the checkpoint file; NVIDIA's NVFP4 checkpoints of these models (TensorRT Model Optimizer)
quantize the experts' and MLPs' linear layers to NVFP4 and list what they leave in bf16. Copies of
their configs are vendored in AIConfigurator (ai-dynamo/aiconfigurator, commit 095f58a,
aic-core/src/aiconfigurator_core/model_configs/); each entry quotes its list. A router that is not a
``Linear`` (DeepSeek's ``MoEGate``) is never converted, and embeddings never are: both stay bf16.

gpt-oss-120b's rows are labelled ``nvfp4`` (on H100 and H200 too, which have no fp4 tensor cores):
its one public checkpoint is OpenAI's MXFP4, routed experts only, run as 4-bit weights beside 16-bit
activations (``mxfp4``: W4A16 at the bf16 peak; TensorRT-LLM's W4A8 MXFP4 x MXFP8 mode on Blackwell
is not expressed).

Not transcribed here: the FP8 checkpoints (their lists leave only the router, the LM head and
embeddings in bf16, a few per cent of the bytes).
"""

from __future__ import annotations

from dispatchprof import Quantized

#: NVIDIA's NVFP4 DeepSeek checkpoints: MLA's four q/kv projections, the router, embeddings, LM head
DEEPSEEK_NVFP4 = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "mlp.gate", "embed_tokens", "lm_head")
#: (model_path, gemm_quant_mode) -> the weight dtype its checkpoint stores, where not the label's, and the source
STORED_AS: dict[tuple[str, str], tuple[str, str]] = {
    ("openai/gpt-oss-120b", "nvfp4"): (
        "mxfp4",
        'openai/gpt-oss-120b config.json quantization_config: {"quant_method": "mxfp4", "modules_to_not_convert": '
        '["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}'),
}
#: (model_path, gemm_quant_mode) -> the patterns of the modules the checkpoint keeps in bf16, and the source
KEPT_IN_BF16: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("deepseek-ai/DeepSeek-R1", "nvfp4"): (
        DEEPSEEK_NVFP4,
        'nvidia/DeepSeek-V3.1-NVFP4 hf_quant_config.json exclude_modules: the four MLA projections "q_a_proj, '
        'q_b_proj, kv_a_proj_with_mqa, kv_b_proj" of every layer, "lm_head", "model.layers.61*" (MTP); the '
        'DeepSeek-R1-0528-FP4-v2 card: "Compared to nvidia/DeepSeek-R1-0528-FP4, this checkpoint additionally '
        'quantizes the wo module in attention layers"'),
    ("nvidia/DeepSeek-R1-NVFP4", "nvfp4"): (
        DEEPSEEK_NVFP4,
        "as deepseek-ai/DeepSeek-R1's NVFP4 rows: nvidia/DeepSeek-V3.1-NVFP4 hf_quant_config.json exclude_modules"),
    ("deepseek-ai/DeepSeek-V3", "nvfp4"): (
        DEEPSEEK_NVFP4,
        "as DeepSeek-R1's: nvidia/DeepSeek-V3.1-NVFP4 hf_quant_config.json exclude_modules"),
    ("MiniMaxAI/MiniMax-M2.5", "nvfp4"): (
        ("self_attn", "mlp.gate", "embed_tokens", "lm_head"),
        'nvidia/MiniMax-M2.5-NVFP4 hf_quant_config.json exclude_modules: "lm_head", '
        '"model.layers.N.block_sparse_moe.gate" (the router: transformers names it mlp.gate) and '
        '"model.layers.N.self_attn*" for N = 0..61'),
    ("Qwen/Qwen3.5-397B-A17B", "nvfp4"): (
        ("self_attn", "linear_attn", "shared_expert", "shared_expert_gate", "embed_tokens", "lm_head"),
        'nvidia/Qwen3.5-397B-A17B-NVFP4 config ignore: "lm_head", "*.mlp.shared_expert.*", every "linear_attn*" '
        '(45 layers) and "self_attn*" (15 layers), "shared_expert_gate", "model.visual*", "mtp.layers.0*"'),
    ("moonshotai/Kimi-K2.5", "nvfp4"): (
        ("self_attn", "mlp.gate", "embed_tokens", "lm_head"),
        'nvidia/Kimi-K2.5-NVFP4 hf_quant_config.json (ModelOpt 0.41.0) exclude_modules: "language_model.lm_head", '
        '"self_attn*" of layers 0..60, "mm_projector*", "vision_tower*"'),
    ("openai/gpt-oss-120b", "nvfp4"): (
        ("self_attn", "mlp.router", "embed_tokens", "lm_head"),
        "as STORED_AS quotes: modules_to_not_convert"),
}


def stored_weights(r: dict, weights: str | None) -> str | Quantized | None:
    """The weight dtype silicon-sample row ``r`` is simulated with: ``weights`` (its GEMM dtype), or
    the dtype its checkpoint stores (`STORED_AS`), but the modules its checkpoint keeps in bf16,
    where `KEPT_IN_BF16` has its model and quantization."""
    key = (r["model_path"], r["gemm_quant_mode"])
    weights = STORED_AS[key][0] if key in STORED_AS and weights is not None else weights
    kept = KEPT_IN_BF16.get(key)
    return weights if kept is None or weights is None else Quantized(weights, kept[0])
