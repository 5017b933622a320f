"""Sweep over every op of torch.ops.aten: its state under the counter, and the residue.

    python scripts/op_sweep.py            # the summary and the residue, grouped by reason
    python scripts/op_sweep.py --all      # also list every counted, zero-cost and decomposed op

An op is counted (a formula), zero-cost (views, metadata, bookkeeping), decomposed (every
overload but ``out=`` ones has a CompositeImplicitAutograd kernel: the counter runs its parts,
each counted) or residue. Every residue op must match one of `REASONS` (why it has no rule);
exit status 1 lists those that match none. The table is recorded in docs/zoo.md.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from op_formulas import state_of  # noqa: E402

#: Why an aten op has no rule: (name pattern, reason). First match wins.
REASONS: tuple[tuple[str, str], ...] = (
    (r"^(__[a-z]+__|_test_|_foobar)",
     "Python operator aliases (__lshift__, ...: eager tensors dispatch the named op, counted) and torch's "
     "internal test ops"),
    (r"^(mkldnn_|_mkldnn_|to_mkldnn|_nnpack_|_mps_|mps_|_lstm_mps|lstm_mps_|_cudnn_|_use_cudnn|_use_miopen|_triton_"
     r"|conv_depthwise3d|_conv_depthwise2d|slow_conv|_slow_conv|convolution_overrideable|convolution_backward_overrideable"
     r"|conv_tbc|_thnn_fused_gru_cell|_grid_sampler_2d_cpu_fallback|_mixed_dtypes_linear|_fused_sdp_choice)",
     "backend kernels (oneDNN tensors, NNPACK, MPS, cuDNN, Triton, the slow reference convolutions, CPU fallbacks) "
     "below a counted op: a model calls aten.convolution, grid_sampler_2d, ..., which the counter records above "
     "the kernel torch picks"),
    (r"(sparse|^_spsolve|^hspmm|indices_copy|values_copy|^_coalesced_|^_convert_indices_|^_validate_compressed"
     r"|^_to_sparse_semi_structured)",
     "sparse layouts' conversions, metadata and rare kernels: op_formulas/sparse.py counts the common sparse ops"),
    (r"^(q_|qscheme|int_repr|quantized_|_make_per_|_empty_per_channel|empty_quantized|fake_quantize|_fake_quantize)",
     "quantized tensor metadata, quantized pooling/batch norm and fake-quant training ops: op_formulas/quantized.py "
     "covers torch.ao's inference ops; no model of the zoo reaches these"),
    (r"^batch_norm_(backward_elemt|backward_reduce|elemt|gather_stats|gather_stats_with_counts|stats|update_stats)$",
     "SyncBatchNorm's multi-process kernels (CUDA)"),
    (r"^(_foreach_|_amp_|_fused_adagrad|_fused_sgd|linalg__powsum)",
     "foreach and fused optimizer/AMP kernels the zoo's optimizers do not run (AdamW's _foreach_* and "
     "_fused_adamw_ are counted; a foreach op is the list of its element-wise op)"),
    (r"^(bartlett_window|blackman_window|kaiser_window|range|fft_fftfreq|fft_rfftfreq|from_file|_histogramdd_.*"
     r"|histogram|hash_tensor|equal|allclose|is_set_to|_has_same_storage_numel|slice_inverse|_fw_primal.*"
     r"|_make_dual.*|_new_zeros_with_same_feature_meta|_lazy_clone|_copy_from.*|_index_put_impl|_stack|_conj_copy"
     r"|_conj_physical|_neg_view_copy|_reshape_alias_copy|view_as_.*_copy|_functional_assert_scalar"
     r"|_fill_mem_eff_dropout_mask_|to_padded_tensor|unique_dim_consecutive|_compute_linear_combination"
     r"|_cummax_helper|_cummin_helper|put|put_|geqrf|native_norm|embedding_renorm|embedding_renorm_|addr_"
     r"|_trilinear|_masked_softmax|_masked_softmax_backward|_transform_bias_rescale_qkv|matmul_backward"
     r"|max_pool2d_backward|adaptive_avg_pool3d_backward|fractional_max_pool.*|multi_margin_loss_backward"
     r"|multilabel_margin_loss_backward|hardshrink_backward|softshrink_backward|glu_jvp|glu_backward_jvp)$",
     "rare factories, forward-mode AD, comparisons returning a bool, internal helpers and rare layers' kernels "
     "(window functions, histograms, nn.Bilinear's _trilinear, the MHA fast path's masked softmax and qkv "
     "rescale): no model of the zoo reaches them; each is a candidate for a rule"),
    (r"^_(flash|efficient)_attention_|^_scaled_dot_product_(attention_math_for_mps|fused_attention_overrideable)",
     "attention backend kernel below F.scaled_dot_product_attention: the counter records SDPA as one fused op "
     "above the backend (docs/counting.md), so these never reach it on their own"),
    (r"^(_cudnn_rnn|cudnn_|miopen_|_cslt_|_sparse_semi_structured_|_scaled_mm|_scaled_grouped_mm|_philox_"
     r"|_amp_foreach_non_finite_check_and_unscale_|_thnn_fused_lstm_cell)",
     "GPU-only kernel (cuDNN, MIOpen, cuSPARSELt, FP8 scaled products, Philox RNG, AMP unscale, fused CUDA LSTM "
     "cell): no CPU run to check a rule against"),
    (r"^(_nested_|_jagged_to_padded|_padded_dense_to_jagged|_native_multi_head_attention"
     r"|_transformer_encoder_layer_fwd)",
     "nested/jagged tensor path (nn.TransformerEncoder's inference fast path): the counter refuses nested "
     "tensors and asks for the padded dense tensor"),
    (r"^(_convert_weight_to_int4pack|_dyn_quant_|_weight_int[48]pack_mm|_fused_moving_avg_obs_fq_helper)",
     "packed int4/int8 weight kernels and fake-quant observers (torchao paths): op_formulas/quantized.py "
     "covers torch.ao's quantized ops; no model of the zoo reaches these"),
    (r"^(_unique|unique_dim|bincount|segment_reduce|_segment_reduce_backward)$",
     "output size set by values: runs on real and fake tensors, no rule written yet"),
    (r"^(_batch_norm_no_update|_batch_norm_with_update|_batch_norm_with_update_functional|batch_norm_backward"
     r"|_fused_rms_norm_backward)$",
     "export-time normalisation variants (torch.export's functional batch norm): eager models run "
     "native_batch_norm / _fused_rms_norm, which are counted"),
    (r"^(cholesky|cholesky_inverse|_cholesky_solve_helper|ormqr|triangular_solve|linalg_householder_product"
     r"|linalg_ldl_factor_ex|linalg_ldl_solve|_linalg_eigvals|renorm|renorm_|_spdiags|_euclidean_dist"
     r"|_pdist_forward|_pdist_backward|addr|logspace|frexp)$",
     "rare linear algebra and helpers (deprecated aliases, LDL, Householder products, pdist): no common "
     "model reaches them"),
    (r"^(fractional_max_pool2d|max_unpool[23]d|adaptive_max_pool3d_backward|multi_margin_loss"
     r"|multilabel_margin_loss_forward|rrelu_with_noise.*|_embedding_bag_per_sample_weights_backward"
     r"|_foreach_mm|_unsafe_masked_index.*|linear_backward|conj_physical_|copy_sparse_to_sparse|_spdiags"
     r"|_upsample_lanczos2d_aa|_upsample_lanczos2d_aa_backward|quantized_gru)$",
     "rare layers and helpers (fractional/unpooling, margin losses, RReLU, per-sample embedding-bag weights, "
     "Lanczos resampling, the dynamically quantized GRU): no common model reaches them"),
)

CIA = torch._C.DispatchKey.CompositeImplicitAutograd


def classify(name: str) -> str:
    """'counted', 'zero-cost', 'decomposed', 'residue' or 'not an op' for ``torch.ops.aten.<name>``."""
    packet = getattr(torch.ops.aten, name)
    state = state_of(packet)
    if state != "unknown":
        return state
    try:
        overloads = [getattr(packet, o) for o in packet.overloads() if "out" not in o]
        if overloads and all(o.has_kernel_for_dispatch_key(CIA) for o in overloads):
            return "decomposed"
    except RuntimeError:           # a packet torch lists without a registered operator
        return "not an op"
    return "residue"


def reason(name: str) -> str | None:
    return next((why for pattern, why in REASONS if re.search(pattern, name)), None)


def aten_names() -> list[str]:
    """Every operator of the aten namespace torch has registered (``dir(torch.ops.aten)`` lists only
    the packets already looked up in this process)."""
    names = {n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("aten::")}
    return sorted(n for n in names if isinstance(getattr(torch.ops.aten, n, None), torch._ops.OpOverloadPacket))


def sweep() -> dict[str, list[str]]:
    """Every aten packet name by state."""
    states: dict[str, list[str]] = defaultdict(list)
    for name in aten_names():
        states[classify(name)].append(name)
    return states


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all", action="store_true", help="list the ops of every state")
    args = p.parse_args(argv)
    states = sweep()
    print(" | ".join(f"{s}: {len(v)}" for s, v in sorted(states.items())))
    by_reason: dict[str, list[str]] = defaultdict(list)
    for name in states.get("residue", []):
        by_reason[reason(name) or "UNEXPLAINED"].append(name)
    for why, names in sorted(by_reason.items()):
        print(f"\n{why}:\n  {' '.join(names)}")
    if args.all:
        for s in ("counted", "zero-cost", "decomposed"):
            print(f"\n{s}:\n  {' '.join(states.get(s, []))}")
    return 1 if "UNEXPLAINED" in by_reason else 0


if __name__ == "__main__":
    sys.exit(main())
