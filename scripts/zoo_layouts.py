"""Where a zoo model's op stream on fake or meta tensors leaves the real one, and why: the ops whose
output strides differ from the real run's for the same input strides (a fake or meta kernel that
lays its output out otherwise than the CPU kernel), and the spans where the streams diverge.

    python scripts/zoo_layouts.py swin fake
    python scripts/zoo_layouts.py llama meta --spans 5

Each op of one training step (forward, loss, backward; no optimizer) is logged under `OpCounter`
(so the counter's stand-ins apply) with its arguments' and outputs' shapes and strides; the two
streams are aligned by op name (difflib). A LAYOUT line is an aligned op with equal input strides
and different output strides: the first cause of a diverging stream (docs/zoo.md).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import zoo  # noqa: E402
from dispatchprof import OpCounter  # noqa: E402

Step = list[tuple[str, Any, Any]]


def layout(value: Any) -> Any:
    """(shape, strides) of a tensor (strides None for a non-strided layout), recursively in lists."""
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), tuple(value.stride()) if value.layout == torch.strided else None
    if isinstance(value, (list, tuple)):
        return tuple(layout(v) for v in value)
    return None


def trace(name: str, kind: str) -> Step:
    """[(overload, argument layouts, output layouts)] of one training step of zoo model ``name``."""
    model, inputs, loss_fn = zoo.build(name, kind)
    log: Step = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.namespace != "prim":
                log.append((str(func), layout(list(args)), layout(out)))
            return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpCounter(), Log():
            zoo.training_step(model, inputs, loss_fn)
    return log


def compare(real: Step, other: Step) -> tuple[list[tuple[int, str, Any, Any, Any]], list[str]]:
    """(LAYOUT rows: (index, op, input layouts, real outputs, other outputs); diverging spans)."""
    matcher = difflib.SequenceMatcher(None, [r[0] for r in real], [o[0] for o in other], autojunk=False)
    rows, spans = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [(i, real[i][0], real[i][1], real[i][2], other[j][2]) for i, j in zip(range(i1, i2), range(j1, j2))
                     if real[i][1] == other[j][1] and real[i][2] != other[j][2]]
        else:
            spans.append(f"{tag} real[{i1}:{i2}] {[r[0] for r in real[i1:i2]][:6]} "
                         f"other[{j1}:{j2}] {[o[0] for o in other[j1:j2]][:6]}")
    return rows, spans


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=zoo.ALL_NAMES)
    p.add_argument("kind", choices=[k for k in zoo.KINDS if k != "real"])
    p.add_argument("--spans", type=int, default=20, help="diverging spans to print (default 20)")
    args = p.parse_args(argv)
    rows, spans = compare(trace(args.model, "real"), trace(args.model, args.kind))
    for i, op, inputs, real_out, other_out in rows:
        print(f"LAYOUT #{i} {op}\n  inputs {inputs}\n  real   {real_out}\n  {args.kind:6} {other_out}")
    for s in spans[:args.spans]:
        print(s)
    print(f"{len(rows)} layout differences, {len(spans)} diverging spans")
    return 0


if __name__ == "__main__":
    sys.exit(main())
