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


def sweep() -> dict[str, list[str]]:
    """Every aten packet name by state."""
    states: dict[str, list[str]] = defaultdict(list)
    for name in sorted(dir(torch.ops.aten)):
        if not name.startswith("__") and isinstance(getattr(torch.ops.aten, name), torch._ops.OpOverloadPacket):
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
