"""Predict published serving results and print the errors.

Rows: scripts/data/published_serving.csv (each with its source; collected in the project's
research notes). They are TensorRT-LLM's offline throughput benchmarks (trtllm-bench: every
request queued at once, fixed input and output lengths, FP8 weights) for Llama-3.1-8B on one
H100-SXM or H200, and Llama-3.3-70B (the Llama-3.1-70B architecture) on one H200.

Each row is simulated with its lengths, all requests arriving at 0 (min(published count, --cap)
of them), under the serving runtime (an inference engine: CUDA-graph steps, fused kernels, the
KV cache written in place), weights in fp8, an engine of max 2048 sequences and 8192 tokens per
step with chunked prefill, and 95% of the memory for weights and KV cache (the source's usual
kv_cache_free_gpu_mem_fraction). The KV cache is fp8 by default (``--kv-dtype``): the source does
not state it, but NVIDIA's ModelOpt FP8 checkpoints carry ``kv_cache_quant_algo: FP8`` in their
hf_quant_config.json and trtllm-bench runs the checkpoint's KV dtype (``--kv-dtype bf16`` shows
the other reading). The metric is output tokens per second over the whole run, as trtllm-bench
reports it.

    .venv/bin/python scripts/validate_serving.py [--cap 3000] [--rows 1,2,3] [--kv-dtype fp8|bf16]
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import warnings

from dispatchprof.serving import Request, prepare_serving, simulate_serving

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "published_serving.csv")
ENGINE = {"max_seqs": 2048, "max_batched_tokens": 8192, "memory_utilization": 0.95}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cap", type=int, default=3000, help="at most this many requests per row")
    p.add_argument("--rows", help="comma-separated row ids (default: all)")
    p.add_argument("--kv-dtype", default="fp8", help="KV-cache dtype (bf16: the model's own)")
    args = p.parse_args()
    with open(DATA, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = [r for r in rows if r["id"] in wanted]
    setups: dict[tuple[str, str, str], object] = {}
    print(f"runtime serving, weights fp8, KV cache {args.kv_dtype}")
    print(f"{'id':>3} {'model':<14} {'device':<9} {'ISL/OSL':>10} {'requests':>8} {'published':>10} "
          f"{'predicted':>10} {'error':>7}  (output tokens/s)")
    errors = []
    start = time.perf_counter()
    for r in rows:
        key = (r["catalog_model"], r["device"], r["weight_dtype"])
        if key not in setups:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                setups[key] = prepare_serving(r["catalog_model"], r["device"], weight_dtype=r["weight_dtype"],
                                              kv_dtype=None if args.kv_dtype == "bf16" else args.kv_dtype,
                                              runtime="serving")
        isl, osl = int(r["prompt_len"]), int(r["output_len"])
        n = min(int(r["num_requests"]), args.cap)
        result = simulate_serving(setups[key], [Request(0.0, isl, osl)] * n, **ENGINE)
        predicted, published = result.summary.output_tokens_per_s, float(r["value"])
        error = (predicted - published) / published
        errors.append(abs(error))
        print(f"{r['id']:>3} {r['catalog_model']:<14} {r['device']:<9} {f'{isl}/{osl}':>10} {n:>8} "
              f"{published:>10.0f} {predicted:>10.0f} {100 * error:>+6.1f}%")
    print(f"mean |error| {100 * sum(errors) / len(errors):.1f}% over {len(errors)} rows, "
          f"max {100 * max(errors):.1f}% ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
