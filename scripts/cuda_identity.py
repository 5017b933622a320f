"""The counter on a CUDA device: outputs bit-identical with and without it, and the ops it records
the ops that run without it (run on a GPU machine, not in CI).

    python scripts/cuda_identity.py [--device cuda] [--out FILE]

Runs tests/test_fast_paths.py's `check_invisible` (each call alone, under a plain dispatch mode of
its own and under OpCounter: outputs compared with torch.equal, the recorded ops against the plain
run's, attention calls marked) on the device for every nn.MultiheadAttention / nn.TransformerEncoder
call of tests/attention_calls.py and every model of the zoo (scripts/zoo.py ZOO_NAMES, eval mode,
no gradient). On CUDA torch picks its fused attention kernels (flash, memory-efficient, the
nested-tensor encoder), which the CPU tests cannot reach. Prints one line per call
(``same`` or the first difference) and a count; ``--out`` also writes them as a CSV.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _calls(device: str):
    """(name, run, attention_calls) of every call checked, on ``device``."""
    import torch

    import zoo
    from attention_calls import B, E, FAST_OPS, L, MODELS, make_masks

    for name, (build, call) in MODELS.items():
        torch.manual_seed(0)
        model = build().eval().to(device)
        x, masks = torch.randn(B, L, E, device=device), make_masks(device)
        yield f"nn/{name}", (lambda m=model, c=call, x=x, k=masks: c(m, x, k)), name not in FAST_OPS
    for name in zoo.ZOO_NAMES:
        model, inputs, _ = zoo.build(name, "real")
        model = model.eval().to(device)
        inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        yield f"zoo/{name}", (lambda m=model, i=inputs: m(**i)), True


def _alone_twice(run) -> str:
    """Whether two uncounted runs of ``run`` give bit-identical outputs (no mode at all)."""
    import torch

    from test_fast_paths import _flat

    outs = []
    for _ in range(2):
        torch.manual_seed(0)
        with torch.no_grad():
            outs.append(_flat(run()))
    same = all(torch.equal(a, b) for a, b in zip(*outs, strict=True))
    return "two uncounted runs " + ("identical" if same else "differ (the device is not deterministic here)")


def _op_difference(run) -> str:
    """The ops the plain run saw and the counter did not record, and the reverse, with the
    counter's unknown ops (names and calls)."""
    from collections import Counter

    import torch

    from conftest import count
    from test_fast_paths import OpStream

    stream = OpStream()
    with torch.no_grad():
        with stream:
            run()
        c = count(run)
    plain, recorded = Counter(stream.ops), Counter(r.op for r in c.profile.records)
    recorded.update(dict(c.profile.zero_cost_calls))
    return (f"plain only {dict(plain - recorded)}; counter only {dict(recorded - plain)}; "
            f"unknown {[(u.op, u.calls) for u in c.unknown_ops()]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", help="CSV of name, result, detail")
    ap.add_argument("--only", nargs="*", help="check only these names (e.g. zoo/resnet)")
    args = ap.parse_args(argv)
    sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts"), ROOT]
    import torch

    from test_fast_paths import check_invisible

    rows = []
    for name, run, attention_calls in _calls(args.device):
        if args.only and name not in args.only:
            continue
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = check_invisible(run, attention_calls)
            ops = [r.op for r in c.profile.records]
            fused = sorted({op for op in ops if "attention" in op or "transformer_encoder" in op})
            rows.append((name, "same", f"{len(ops)} records; {' '.join(fused)}"))
        except Exception as e:                        # noqa: BLE001 - each call's result is reported
            where = traceback.extract_tb(e.__traceback__)[-1].line
            rows.append((name, "DIFFERS" if isinstance(e, AssertionError) else "ERROR",
                         f"{repr(e)[:200]} at `{where}`; {_alone_twice(run)}; {_op_difference(run)}"))
        print(f"{rows[-1][0]:<32} {rows[-1][1]:<8} {rows[-1][2]}", flush=True)
    same = sum(r[1] == "same" for r in rows)
    print(f"{same} of {len(rows)} calls identical on {args.device} ({torch.__version__}, "
          f"{torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu'})")
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("name", "result", "detail"), *rows])
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
