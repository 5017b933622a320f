"""Benchmark of the serving simulation: Llama-3.1-8B on H100-SXM, Poisson traffic and closed loops.

Prints the one-off counting of the step cost model (ten compositions), then the simulation of
1,000 to 10,000 requests with the time per 1,000 requests (flat when the cost grows linearly
with the number of requests), and the total for 10,000 requests (the goal: under 60 s on a
2-core machine); then 1,000 requests of 1024 + 128 tokens from closed-loop clients under the
vLLM preset (the goal: each under 10 s).

    .venv/bin/python scripts/bench_serving.py [--model llama-3.1-8b] [--device H100-SXM] [--rate 20]
"""

from __future__ import annotations

import argparse
import time
import warnings

from dispatchprof.serving import generate_requests, prepare_serving, simulate_serving


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--device", default="H100-SXM")
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--prompt-len", default="uniform:64:1024")
    p.add_argument("--output-len", default="uniform:16:512")
    args = p.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        setup = prepare_serving(args.model, args.device)
        counting = time.perf_counter() - t0
    print(f"{args.model} on {args.device}, Poisson {args.rate:g} req/s, prompt {args.prompt_len}, "
          f"output {args.output_len}")
    print(f"step cost model: {setup.cost.ops} ops per step in {len(setup.cost.groups)} groups, "
          f"counted once in {counting:.1f} s")
    print(f"{'requests':>9} {'rows':>8} {'simulation s':>13} {'s per 1000 req':>15} {'out tok/s':>10} "
          f"{'TTFT p50':>9} {'TPOT p50':>9}")
    last = 0.0
    for n in (1000, 2500, 5000, 10000):
        reqs = generate_requests(args.rate, n, args.prompt_len, args.output_len, seed=1)
        t0 = time.perf_counter()
        r = simulate_serving(setup, reqs)
        last = time.perf_counter() - t0
        steps = sum(len(t) for t in r.timelines)
        s = r.summary
        print(f"{n:>9} {steps:>8} {last:>13.2f} {1000 * last / n:>15.3f} {s.output_tokens_per_s:>10.0f} "
              f"{1e3 * s.ttft_s.median:>7.1f}ms {1e3 * s.tpot_s.median:>7.2f}ms")
    print(f"10,000 requests: counting {counting:.1f} s + simulation {last:.1f} s = {counting + last:.1f} s "
          f"(goal: under 60 s)")
    print("rows: KV-timeline rows (one per engine step; a run of pure decode steps is one row)")
    closed_loops(args.model, args.device)


def closed_loops(model: str, device: str) -> None:
    """1,000 requests of 1024 + 128 tokens from 1, 8, 64 and 256 clients under the vLLM preset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vllm = prepare_serving(model, device, engine="vllm")
    reqs = generate_requests(1.0, 1000, 1024, 128)
    print(f"{'clients':>8} {'simulation s':>13} {'out tok/s':>10} {'TTFT mean':>10} {'TPOT mean':>10}  "
          f"(1,000 requests, 1024 + 128 tokens, vllm {vllm.engine.version}; goal: under 10 s each)")
    for clients in (1, 8, 64, 256):
        t0 = time.perf_counter()
        r = simulate_serving(vllm, reqs, concurrency=clients)
        s = r.summary
        print(f"{clients:>8} {time.perf_counter() - t0:>13.2f} {s.output_tokens_per_s:>10.0f} "
              f"{1e3 * s.ttft_s.mean:>8.1f}ms {1e3 * s.tpot_s.mean:>8.2f}ms")


if __name__ == "__main__":
    main()
