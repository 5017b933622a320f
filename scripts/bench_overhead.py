"""Overhead of OpCounter against a plain forward and torch's FlopCounterMode.

    python scripts/bench_overhead.py                    # Llama-3.1-8B and -70B shapes, batch 1, seq 4096
    python scripts/bench_overhead.py --models llama-3.1-8b --seq 512
    python scripts/bench_overhead.py --depth 100 400 1000      # cost against module depth
    python scripts/bench_overhead.py --models llama-3.1-8b --calls   # Python calls counting adds
    python scripts/bench_overhead.py --models llama-3.1-8b --instructions   # CPU instructions (valgrind)

Every model is built weightless on fake tensors, once per model in a fresh subprocess, after one
tiny op under OpCounter and FlopCounterMode (one-time imports are not timed) and one untimed
forward per mode (fake tensors cache their dispatches). Then ``--rounds`` rounds (default 9) each
time one plain, one FlopCounterMode and one OpCounter forward back to back, so a slow spell of
the shared machine hits all alike. OpCounter runs twice per round: with host timing (the default)
and with ``host_time=False``. Prints one row per model: each mode's best time, the
ratio of the best times (counted / plain: all categories, bytes, module tree), the median of
the per-round ratios, and host timing's cost (median ratio with it over median ratio without); peak RSS comes from another fresh process that runs one counted forward.
``--depth`` times a chain of N nested modules (one op
each) plain and counted: cost per module should stay flat as N grows. ``--calls`` counts the
Python function calls (cProfile) of one plain and one counted forward: unlike times, the same on
every run, so a change to the hot path can be judged on a noisy machine. ``--instructions``
counts the CPU instructions one forward executes in each mode, under valgrind's cachegrind
(needs ``valgrind``; about ten minutes): deterministic like ``--calls``, and it weighs Python and
C++ work alike, but it does not see cache misses or other stalls, which times do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings

SHAPES = {   # MODELS.md
    "llama-3.1-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8),
    "llama-3.1-70b": dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                          num_attention_heads=64, num_key_value_heads=8),
}
MODES = ("plain", "flop_counter", "opcounter", "opcounter_host_off")   # OpCounter with / without host timing
ROUNDS = 9           # timed rounds; each runs every mode back to back, in the same process


def measure(model_name: str, batch: int, seq: int, rounds: int) -> dict:
    """Build the model on fake tensors once; run ``rounds`` rounds of one forward in each mode,
    interleaved so that a slow spell of the shared machine hits every mode alike. Returns each
    mode's best time (seconds), the median of the per-round ratios to plain, and the op count."""
    import gc

    import torch
    import transformers as tf

    from dispatchprof import OpCounter, fake_inputs, fake_model

    warnings.simplefilter("ignore")
    _warm_up()
    cfg = tf.LlamaConfig(**SHAPES[model_name], tie_word_embeddings=False)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.bfloat16)
    ids = fake_inputs(model, batch, seq, high=1000)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    with torch.no_grad():
        for mode in MODES:                  # untimed: fake tensors fill their dispatch cache
            _forward(model, ids, mode)
        for _ in range(rounds):
            for mode in MODES:
                gc.collect()                # each forward starts with the same garbage: none
                start = time.perf_counter()
                counter = _forward(model, ids, mode)
                times[mode].append(time.perf_counter() - start)
    p = counter.profile
    ops = p.total().calls + sum(n for _, n in p.zero_cost_calls)
    ratios = {mode: statistics.median(t / plain for t, plain in zip(times[mode], times["plain"]))
              for mode in MODES}
    return {"best": {mode: min(t) for mode, t in times.items()}, "median_ratio": ratios, "ops": ops}


def _forward(model, ids, mode: str):
    """One forward in ``mode``; the OpCounter for "opcounter"."""
    from torch.utils.flop_counter import FlopCounterMode

    from dispatchprof import OpCounter

    if mode == "plain":
        model(ids)
        return None
    counter = (FlopCounterMode(display=False) if mode == "flop_counter"
               else OpCounter(host_time=mode == "opcounter"))
    with counter:
        model(ids)
    return counter


def peak_rss(model_name: str, batch: int, seq: int) -> dict:
    """Peak RSS (MB) of a fresh process that builds the model and runs one counted forward."""
    import torch
    import transformers as tf

    from dispatchprof import fake_inputs, fake_model

    warnings.simplefilter("ignore")
    cfg = tf.LlamaConfig(**SHAPES[model_name], tie_word_embeddings=False)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.bfloat16)
    ids = fake_inputs(model, batch, seq, high=1000)
    with torch.no_grad():
        _forward(model, ids, "opcounter")
    return {"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _warm_up() -> None:
    """One tiny op under each counter: one-time imports (torch._dynamo) are not timed."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from dispatchprof import OpCounter

    with OpCounter():
        torch.ones(2) + 1
    with FlopCounterMode(display=False):
        torch.ones(2) + 1


def chain(n: int):
    """N nested modules, each adding 1 around its child; the innermost multiplies by a weight."""
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.inner(x) + 1 if self.inner is not None else x * self.w

    model = None
    for _ in range(n):
        model = Wrap(model)
    return model


def depth_row(n: int, repeats: int = 3) -> list:
    """[N, plain s, counted s, counted us per module]: best of ``repeats``."""
    import torch

    from dispatchprof import OpCounter

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 12 * n + 1000))
    model, x = chain(n), torch.randn(4)
    plain = counted = float("inf")
    with torch.no_grad():
        for _ in range(repeats):
            t = time.perf_counter()
            model(x)
            plain = min(plain, time.perf_counter() - t)
            t = time.perf_counter()
            with OpCounter(model) as c:
                model(x)
            counted = min(counted, time.perf_counter() - t)
    assert len(c.profile.records) == n
    return [n, f"{plain:.4f}", f"{counted:.4f}", f"{counted / n * 1e6:.0f}"]


def calls_row(model_name: str, batch: int, seq: int) -> list:
    """[model, plain calls, counted calls, added calls, added per op]: one forward each under
    cProfile, after one of each untimed (fake tensors cache their dispatches)."""
    import cProfile
    import pstats

    import torch
    import transformers as tf

    from dispatchprof import OpCounter, fake_inputs, fake_model

    warnings.simplefilter("ignore")
    _warm_up()
    cfg = tf.LlamaConfig(**SHAPES[model_name], tie_word_embeddings=False)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.bfloat16)
    ids = fake_inputs(model, batch, seq, high=1000)
    calls = []
    with torch.no_grad():
        model(ids)
        with OpCounter():
            model(ids)
        for counted in (False, True):
            prof = cProfile.Profile()
            prof.enable()
            if counted:
                with OpCounter() as c:
                    model(ids)
            else:
                model(ids)
            prof.disable()
            calls.append(pstats.Stats(prof).total_calls)
    p = c.profile
    ops = p.total().calls + sum(n for _, n in p.zero_cost_calls)
    added = calls[1] - calls[0]
    return [model_name, f"{batch}x{seq}", calls[0], calls[1], added, f"{added / ops:.1f}"]


def forwards(model_name: str, batch: int, seq: int, mode: str, n: int) -> dict:
    """Build the model, run one untimed forward in each mode (warm caches), then ``n`` forwards
    in ``mode``: what ``--instructions`` runs under cachegrind."""
    import torch
    import transformers as tf

    from dispatchprof import fake_inputs, fake_model

    warnings.simplefilter("ignore")
    _warm_up()
    cfg = tf.LlamaConfig(**SHAPES[model_name], tie_word_embeddings=False)
    model = fake_model(lambda: tf.LlamaForCausalLM(cfg), dtype=torch.bfloat16)
    ids = fake_inputs(model, batch, seq, high=1000)
    with torch.no_grad():
        for m in MODES:
            _forward(model, ids, m)
        for _ in range(n):
            _forward(model, ids, mode)
    return {}


def instructions_row(model_name: str, batch: int, seq: int) -> list:
    """[model, plain, FlopCounterMode and OpCounter instructions, the ratios to plain]: the CPU
    instructions one forward executes, from cachegrind (valgrind) runs of `forwards` with no
    extra forward and with 2 in each mode; the differences over 2. The same on every run."""
    import concurrent.futures
    import tempfile

    def run(mode: str, n: int) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cachegrind.out")
            subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                            sys.executable, __file__, "--one", "forwards", model_name, str(batch), str(seq),
                            mode, str(n)],
                           check=True, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
            summary = next(line for line in open(out) if line.startswith("summary:"))
            return int(summary.split()[1])

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        base, *runs = pool.map(lambda mn: run(*mn), [("plain", 0)] + [(mode, 2) for mode in MODES])
    plain, fcm, counted = ((r - base) / 2 for r in runs)
    return [model_name, f"{batch}x{seq}", f"{plain / 1e9:.3f} G", f"{fcm / 1e9:.3f} G", f"{fcm / plain:.2f}x",
            f"{counted / 1e9:.3f} G", f"{counted / plain:.2f}x"]


def run_isolated(*args: str) -> dict:
    """Run ``--one ARGS`` in a fresh process (its peak RSS its own); its JSON result."""
    out = subprocess.run([sys.executable, __file__, "--one", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed rounds (default {ROUNDS})")
    p.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--depth", nargs="+", type=int, help="time chains of this many nested modules instead")
    p.add_argument("--calls", action="store_true", help="count Python calls (cProfile) instead of timing")
    p.add_argument("--instructions", action="store_true",
                   help="count the CPU instructions of one forward under valgrind's cachegrind (minutes)")
    args = p.parse_args(argv)
    if args.one:
        what, name, batch, seq, *rounds = args.one
        if what == "rss":
            result = peak_rss(name, int(batch), int(seq))
        elif what == "forwards":
            result = forwards(name, int(batch), int(seq), rounds[0], int(rounds[1]))
        else:
            result = measure(name, int(batch), int(seq), int(rounds[0]))
        print(json.dumps(result))
        return 0
    from tabulate import tabulate

    if args.depth:
        _warm_up()
        rows = [depth_row(n) for n in args.depth]
        print(tabulate(rows, headers=["nested modules", "plain s", "counted s", "counted us / module"],
                       tablefmt="github"))
        return 0
    if args.instructions:
        rows = [instructions_row(name, args.batch, args.seq) for name in args.models]
        print(tabulate(rows, headers=["model (fake tensors)", "batch x seq", "plain instructions",
                                      "FlopCounterMode instructions", "FCM / plain", "OpCounter instructions",
                                      "counted / plain"], tablefmt="github"))
        return 0
    if args.calls:
        rows = [calls_row(name, args.batch, args.seq) for name in args.models]
        print(tabulate(rows, headers=["model (fake tensors)", "batch x seq", "plain calls", "counted calls",
                                      "added calls", "added per op"], tablefmt="github"))
        return 0
    rows = []
    for name in args.models:
        shape = (name, str(args.batch), str(args.seq))
        r = run_isolated("time", *shape, str(args.rounds))
        rss = run_isolated("rss", *shape)["rss_mb"]
        best, ratio = r["best"], r["median_ratio"]
        rows.append([name, f"{args.batch}x{args.seq}", f"{best['plain']:.3f}",
                     f"{best['flop_counter']:.3f}", f"{best['flop_counter'] / best['plain']:.2f}x",
                     f"{ratio['flop_counter']:.2f}x", f"{best['opcounter']:.3f}",
                     f"{best['opcounter'] / best['plain']:.2f}x", f"{ratio['opcounter']:.2f}x",
                     f"{best['opcounter_host_off']:.3f}", f"{ratio['opcounter_host_off']:.2f}x",
                     f"{ratio['opcounter'] / ratio['opcounter_host_off']:.3f}", r["ops"], f"{rss:.0f}"])
    print(tabulate(rows, headers=["model (fake tensors)", "batch x seq", "plain s", "FlopCounterMode s",
                                  "FCM / plain", "FCM / plain (median)", "OpCounter s", "counted / plain",
                                  "counted / plain (median)", "host timing off s", "off / plain (median)",
                                  "host timing on / off", "ops counted", "OpCounter peak RSS MB"],
                   tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
