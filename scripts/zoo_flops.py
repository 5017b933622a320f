"""2 x MACs against torch's FlopCounterMode over the coverage zoo, op family by op family.

    python scripts/zoo_flops.py                          # every zoo model, real tensors
    python scripts/zoo_flops.py --models llama sd-unet --kind fake

Each model's training step (forward, loss, backward; scripts/zoo.py) runs once under OpCounter
and once under FlopCounterMode. FlopCounterMode counts 2 FLOPs per multiply-add of the ops in its
registry (mm, addmm, bmm, baddbmm, convolution and its backward, the attention kernels); the
script adds torch's own attention formulas for the CPU's fused kernel, which its registry lacks.
Per family, 2 x our MACs must equal its FLOPs:

- attention: our one record per F.scaled_dot_product_attention call (forward and backward), and
  bmm, are one family. torch runs each call as the CPU's fused kernel, whose FLOPs the script
  gives FlopCounterMode with torch's own formulas (its registry maps the CUDA kernels only), or as
  the math path, whose products are bmm calls. The fused backward kernel recomputes Q K^T, which
  torch's formula counts and docs/counting.md leaves out of the model's arithmetic: that product
  (2 B H Lq Lk E FLOPs per call) is taken out of FlopCounterMode's figure.
- convolution_backward: torch's formula ignores groups in the weight gradient (its docstring
  skips groups "for brevity"), so a depthwise convolution's weight gradient counts groups times its
  products. The script applies torch's formula to each group's convolution and sums them: the
  FLOPs FlopCounterMode gives the same layer written as one convolution per group.
- every other op with MACs is its own family; one FlopCounterMode does not count (no formula in
  its registry: the LSTM kernels, aten._grouped_mm, mv, dot, ...) is listed, not compared.

Prints one row per model: the families compared and equal, the MACs of the families FlopCounterMode
does not count, and each family that differs. Exit status 1 when any family differs or a model
fails under OpCounter; a model FlopCounterMode cannot run (Reformer: its module tracker's hooks
break the reversible layers' hand-written backward) is reported, with nothing to compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import defaultdict
from math import prod
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from tabulate import tabulate  # noqa: E402
from torch.utils.flop_counter import (FlopCounterMode, conv_backward_flop, flop_registry,  # noqa: E402
                                     sdpa_backward_flop_count, sdpa_flop_count)

import zoo  # noqa: E402
from dispatchprof import OpCounter  # noqa: E402

aten = torch.ops.aten
SDPA, SDPA_BACKWARD = "aten.scaled_dot_product_attention", "aten.scaled_dot_product_attention_backward"
ATTENTION = "attention + bmm"
FUSED = ("aten._scaled_dot_product_flash_attention_for_cpu",
         "aten._scaled_dot_product_flash_attention_for_cpu_backward")


def _fused_backward(g: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """torch's backward formula less the Q K^T product the fused kernel recomputes."""
    *batch, h, lq, e = q
    return sdpa_backward_flop_count(g, q, k, v) - 2 * prod(batch) * h * lq * k[-2] * e


def _per_group(shape: Any, groups: int) -> Any:
    """An activation's shape [N, C, ...] as one group's [N, C / groups, ...]."""
    return None if shape is None else (shape[0], shape[1] // groups, *shape[2:])


def _conv_backward(grad_out: Any, x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                   transposed: bool, output_padding: Any, groups: int, output_mask: Any, out_shape: Any = None,
                   **kwargs: Any) -> int:
    """torch's convolution_backward formula applied to each of the ``groups`` convolutions."""
    if groups == 1:
        return conv_backward_flop(grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding,
                                  groups, output_mask, out_val=out_shape)
    w_group = (w[0] // groups, *w[1:])            # [Cout, Cin/g, k...] or, transposed, [Cin, Cout/g, k...]
    out = (_per_group(out_shape[0], groups), w_group if out_shape[1] is not None else None, None)
    return groups * conv_backward_flop(_per_group(grad_out, groups), _per_group(x, groups), w_group, bias, stride,
                                       padding, dilation, transposed, output_padding, 1, output_mask, out_val=out)


#: torch's formulas for the CPU's fused attention kernel (FlopCounterMode maps the CUDA ones only)
#: and for each group of a grouped convolution's backward.
TORCH_FORMULAS = {
    aten.convolution_backward: _conv_backward,
    aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *a, out_shape=None, **kw: sdpa_flop_count(q, k, v),
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _fused_backward,
}
COUNTED_BY_TORCH = {str(p) for p in flop_registry} | {ATTENTION}


def theirs(name: str, kind: str) -> dict[str, int]:
    """FlopCounterMode's FLOPs of one training step by op family."""
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS) as f:
            zoo.training_step(model, inputs, loss_fn)
    out: dict[str, int] = defaultdict(int)
    for op, flops in f.get_flop_counts()["Global"].items():
        out[ATTENTION if str(op) in FUSED + ("aten.bmm",) else str(op)] += flops
    return dict(out)


def ours(name: str, kind: str) -> dict[str, int]:
    """2 x our MACs of one training step by op family (attention and bmm as `theirs` names them)."""
    model, inputs, loss_fn = zoo.build(name, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter(host_time=False) as c:
            zoo.training_step(model, inputs, loss_fn)
    out: dict[str, int] = defaultdict(int)
    for r in c.profile.records:
        if r.cost.macs:
            out[ATTENTION if r.op in (SDPA, SDPA_BACKWARD, "aten.bmm") else r.op] += 2 * r.cost.macs
    return dict(out)


def compare(mine: dict[str, int], torch_: dict[str, int]) -> tuple[int, dict[str, int], list[str]]:
    """(families equal, our MACs of the families torch does not count, the families that differ)."""
    uncounted = {fam: v // 2 for fam, v in mine.items() if fam not in COUNTED_BY_TORCH}
    families = (set(mine) & COUNTED_BY_TORCH) | set(torch_)
    differ = [f"{fam}: ours {mine.get(fam, 0):,}, FlopCounterMode {torch_.get(fam, 0):,}"
              for fam in sorted(families) if mine.get(fam, 0) != torch_.get(fam, 0)]
    return len(families) - len(differ), uncounted, differ


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(zoo.ALL_NAMES), choices=zoo.ALL_NAMES)
    p.add_argument("--kind", default="real", choices=zoo.KINDS)
    args = p.parse_args(argv)
    rows, bad = [], 0
    for name in args.models:
        try:
            torch_ = theirs(name, args.kind)
        except Exception as e:  # nothing to compare with: reported, not failed
            rows.append([name, "-", "-", f"FlopCounterMode fails: {type(e).__name__}: {str(e)[:60]}"])
            continue
        try:
            same, uncounted, differ = compare(ours(name, args.kind), torch_)
        except Exception as e:  # reported as a row, as scripts/coverage.py does
            rows.append([name, "-", "-", f"error: {type(e).__name__}: {str(e)[:80]}"])
            bad += 1
            continue
        rows.append([name, same, "; ".join(f"{fam} {m:,}" for fam, m in sorted(uncounted.items())) or "-",
                     "; ".join(differ) or "-"])
        bad += bool(differ)
    print(tabulate(rows, headers=["model", "families equal", "MACs FlopCounterMode does not count", "differ"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
