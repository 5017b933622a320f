"""Measure a GPU machine: the project's own measurement rows (run there, not in CI).

    python scripts/measure_gpu.py SECTION --out DIR [--tiny]

SECTION is one of:

- ``host``: the host's figures: the calibration loop's ns per iteration
  (dispatchprof.count.hostcal), the host time of one tiny eager CUDA op (dispatch + launch, the GPU
  idle), of one view, of one CPU op (dispatch alone), of one CUDA graph replay, and the CPU's name;
- ``micro``: a bf16 8192^3 matrix product (TFLOP/s), a 1 GiB device copy (bytes read + written per
  second) and decode-shaped products (1 x K x N);
- ``eager``: Hugging Face transformers models built from the bundled catalog configs with random
  bf16 weights: ``generate`` (greedy, a fixed number of new tokens), TTFT and TPOT from a
  timestamp taken after every step's logits (the GPU synchronised: generate syncs every step
  anyway to test its stopping criteria); and one bare decode forward (``model(ids, cache)``,
  what a counted decode step is): its wall time (synchronised) and its host time (until the
  forward returns, the GPU not waited for);
- ``profile``: torch.profiler over decode steps: kernels per step and their summed device time
  (the GPU's busy time per step);
- ``shapes``: prefill wall time at four (batch, prompt) shapes, and per decode step the summed
  kernel time and the wall time at batch 1-64 and context 512 and 2048;
- ``train``: a training step (forward, backward, fused AdamW; fp32 weights, bf16 autocast);
- ``compiled``: generate with a static cache and ``torch.compile(mode="reduce-overhead")`` (CUDA
  graphs), the recipe of transformers' docs, TTFT and TPOT as in ``eager``;
- ``lean``: the same config in Hugging Face form and in the lean gpt-fast form
  (scripts/lean_llama.py), both with random bf16 weights, one after the other: a batch-1 decode
  step's synchronised wall time and host time (as in ``eager``'s bare decode) after a 512-token
  prefill, and the lean form's decode step under ``torch.compile(mode="reduce-overhead",
  fullgraph=True)`` (gpt-fast's recipe, CUDA graphs), timed as the eager one.

Every row appends to DIR/gpu_rows.csv (section, model, runtime, batch, prompt_len, new_tokens,
metric, value, unit, detail); times are medians over the steps measured. ``--tiny`` runs every
section on the CPU with scaled-down configs (to test this script without a GPU).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import time

from gpu_workloads import (bare_decode, build, decode_busy, device_of, free, generate_times, hf_config, lean_decode,
                           prompt_ids, sync, timed)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("section", "model", "runtime", "batch", "prompt_len", "new_tokens", "metric", "value", "unit", "detail")
EAGER_MODELS = ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "phi-3-mini",
                "gemma-2-9b", "qwen3-14b")
EAGER_BATCHES = (1, 8, 32)
PROMPT = 512
NEW_TOKENS = 48


class Rows:
    """Appends measurement rows to DIR/gpu_rows.csv, and prints each."""

    def __init__(self, out: str, section: str) -> None:
        os.makedirs(out, exist_ok=True)
        self.path = os.path.join(out, "gpu_rows.csv")
        self.section = section

    def add(self, model: str, runtime: str, batch, prompt, new, metric: str, value: float, unit: str,
            detail: str = "") -> None:
        new_file = not os.path.exists(self.path)
        with open(self.path, "a", newline="") as f:
            w = csv.writer(f)
            if new_file:
                w.writerow(FIELDS)
            w.writerow((self.section, model, runtime, batch, prompt, new, metric, f"{value:.6g}", unit, detail))
        print(f"{self.section:8s} {model:14s} {runtime:8s} b={batch} p={prompt} n={new} {metric} = {value:.6g} {unit} {detail}",
              flush=True)


def per_call_host_s(fn, n: int, dev) -> float:
    """Seconds of host time per call of ``fn`` issued ``n`` times without waiting for the GPU
    (median of 5 runs)."""
    for _ in range(100):
        fn()
    sync(dev)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n)
        sync(dev)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------- host
def section_host(args, rows: Rows) -> None:
    import torch

    dev = device_of(args)
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    rows.add("-", "-", "", "", "", "cpu", 0, "", f"{cpu}; {os.cpu_count()} CPUs; torch {torch.__version__}; "
             f"python {platform.python_version()}; gpu {torch.cuda.get_device_name() if dev.type == 'cuda' else '-'}")
    try:
        from dispatchprof.count.hostcal import measure_loop_ns

        loops = [measure_loop_ns(4000, 5) for _ in range(5)]
        rows.add("-", "-", "", "", "", "python_loop_ns", statistics.median(loops), "ns",
                 "dispatchprof.count.hostcal.measure_loop_ns, median of 5: " + " ".join(f"{x:.1f}" for x in loops))
    except Exception as e:  # the rest of the section needs no dispatchprof
        rows.add("-", "-", "", "", "", "python_loop_ns", float("nan"), "ns", f"failed: {e!r}"[:200])
    x = torch.ones(16, device=dev)
    rows.add("-", "eager", "", "", "", "op_host_us", per_call_host_s(lambda: x + x, 20000, dev) * 1e6, "us",
             "host time of one x + x on a 16-element device tensor (dispatch + launch), issued back to back")
    rows.add("-", "eager", "", "", "", "view_host_us", per_call_host_s(lambda: x.view(4, 4), 20000, dev) * 1e6, "us",
             "host time of one x.view(4, 4)")
    c = torch.ones(16)
    rows.add("-", "eager", "", "", "", "cpu_op_host_us", per_call_host_s(lambda: c + c, 20000, dev) * 1e6, "us",
             "host time of one c + c on a 16-element CPU tensor (dispatch and a tiny CPU kernel)")
    if dev.type == "cuda":
        for kernels in (1, 500):
            g = torch.cuda.CUDAGraph()
            y = x.clone()
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for _ in range(3):
                    y.add_(1)
            torch.cuda.synchronize()
            with torch.cuda.graph(g):
                for _ in range(kernels):
                    y.add_(1)
            rows.add("-", "compiled", "", "", "", f"graph_replay_host_us_{kernels}k",
                     per_call_host_s(g.replay, 200, dev) * 1e6, "us",
                     f"host time of one CUDAGraph.replay() of {kernels} tiny kernels, issued back to back")
            rows.add("-", "compiled", "", "", "", f"graph_replay_wall_us_{kernels}k",
                     timed(g.replay, dev, 50) * 1e6, "us", f"one replay of {kernels} tiny kernels, synchronised")


# --------------------------------------------------------------------------------------- micro
def section_micro(args, rows: Rows) -> None:
    import torch

    dev = device_of(args)
    n = 512 if args.tiny else 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    t = timed(lambda: a @ b, dev, 10)
    rows.add("-", "-", "", "", "", "gemm_bf16_tflops", 2 * n ** 3 / t / 1e12, "TFLOP/s", f"{n}^3 bf16, random data")
    size = (1 << 24) if args.tiny else (1 << 30)
    src = torch.empty(size, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), dev, 10)
    rows.add("-", "-", "", "", "", "copy_GBps", 2 * size / t / 1e9, "GB/s", f"copy of {size} bytes, read + written")
    for k, nn_ in ((4096, 4096), (4096, 14336), (14336, 4096), (2048, 8192), (4096, 128256)):
        if args.tiny:
            k, nn_ = k // 16, nn_ // 16
        w = torch.randn(k, nn_, device=dev, dtype=torch.bfloat16)
        for m in (1, 32):
            v = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            t = timed(lambda: v @ w, dev, 50)
            rows.add("-", "-", m, "", "", f"gemm_{m}x{k}x{nn_}_us", t * 1e6, "us",
                     f"weights {2 * k * nn_ / t / 1e9:.0f} GB/s (synchronised: includes one launch)")
        del w


def each_model(names, args, rows: Rows, runtime: str, measure) -> None:
    """``measure(name)`` for every model name; an exception becomes the model's "error" row and
    the next model runs. GPU memory is freed between models."""
    dev = device_of(args)
    for name in names:
        try:
            measure(name)
        except Exception as e:
            rows.add(name, runtime, "", "", "", "error", float("nan"), "", repr(e)[:300])
        free(dev)


def section_eager(args, rows: Rows) -> None:
    import torch

    dev = device_of(args)

    def measure(name: str) -> None:
        t = time.perf_counter()
        model = build(name, args)
        build_s = time.perf_counter() - t
        with torch.no_grad():
            generate_times(model, 1, 16, 4, dev)  # warm-up
            for batch in EAGER_BATCHES:
                ttft, tpot = generate_times(model, batch, PROMPT, NEW_TOKENS, dev)
                rows.add(name, "eager", batch, PROMPT, NEW_TOKENS, "ttft_s", ttft, "s", "HF generate, DynamicCache")
                rows.add(name, "eager", batch, PROMPT, NEW_TOKENS, "tpot_s", tpot, "s", "HF generate, DynamicCache")
            wall, host = bare_decode(model, 1, PROMPT, dev, 20)
            rows.add(name, "eager", 1, PROMPT, 1, "decode_wall_s", wall, "s", "one model(ids, cache) forward, synchronised")
            rows.add(name, "eager", 1, PROMPT, 1, "decode_host_s", host, "s",
                     f"the same forward until it returns (GPU not waited for); model built in {build_s:.1f} s")

    each_model(args.models or EAGER_MODELS, args, rows, "eager", measure)


def section_profile(args, rows: Rows) -> None:
    dev = device_of(args)
    steps = 5

    def measure(name: str) -> None:
        model = build(name, args)
        for batch in (1, 32):
            kernels, busy, _, prof = decode_busy(model, batch, PROMPT, dev, steps)
            rows.add(name, "eager", batch, PROMPT, 1, "kernels_per_step", kernels, "",
                     "torch.profiler, CUDA events of 5 decode steps")
            rows.add(name, "eager", batch, PROMPT, 1, "device_busy_s", busy, "s",
                     "summed kernel time per decode step (torch.profiler)")
            top = sorted(prof.key_averages(), key=lambda e: -getattr(e, "self_device_time_total", 0))[:6]
            rows.add(name, "eager", batch, PROMPT, 1, "top_kernels", 0, "",
                     "; ".join(f"{e.key[:40]} {e.count / steps:g}x {getattr(e, 'self_device_time_total', 0) / steps:.0f}us"
                               for e in top))

    each_model(args.models or ("llama-3.2-1b", "llama-3.1-8b"), args, rows, "eager", measure)


def section_shapes(args, rows: Rows) -> None:
    """Prefill and decode across batch and context: the synchronised wall time of one prefill
    forward, and per decode step the kernels' summed device time (the step without host time, what
    an engine's CUDA-graphed decode pays in kernels) and the eager wall time."""
    import torch

    dev = device_of(args)
    prefills = ((1, 512), (1, 2048), (1, 8192), (8, 1024))
    decodes = [(b, c) for c in (512, 2048) for b in (1, 8, 32, 64)]
    if args.tiny:
        prefills, decodes = ((1, 64), (2, 32)), ((1, 32), (4, 64))

    def measure(name: str) -> None:
        model = build(name, args)
        for batch, prompt in prefills:
            ids = prompt_ids(model, batch, prompt, dev)
            with torch.no_grad():
                t = timed(lambda: model(ids, use_cache=True), dev, 3)
            rows.add(name, "eager", batch, prompt, 0, "prefill_wall_s", t, "s",
                     "one model(ids) forward with a new cache, synchronised, median of 3")
            free(dev)
        for batch, context in decodes:
            kernels, busy, wall, _ = decode_busy(model, batch, context, dev)
            rows.add(name, "eager", batch, context, 1, "decode_busy_s", busy, "s",
                     f"summed kernel time per decode step (torch.profiler, 4 steps), {kernels:.0f} kernels")
            rows.add(name, "eager", batch, context, 1, "decode_wall_s", wall, "s",
                     "one decode forward, synchronised, median of 3")
            free(dev)

    each_model(args.models or ("llama-3.2-1b", "llama-3.1-8b"), args, rows, "eager", measure)


def section_train(args, rows: Rows) -> None:
    import torch

    dev = device_of(args)
    for name, batch, seq in (("llama-3.2-1b", 4, 1024), ("llama-3.2-1b", 8, 1024)):
        if args.tiny:
            batch, seq = 2, 64
        try:
            model = build(name, args).float().train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev.type == "cuda")
            ids = prompt_ids(model, batch, seq, dev)

            def step():
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    loss = model(ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            t = timed(step, dev, 5)
            peak = torch.cuda.max_memory_allocated() / 2 ** 30 if dev.type == "cuda" else 0.0
            rows.add(name, "train", batch, seq, "", "step_s", t, "s",
                     f"forward + backward + fused AdamW, fp32 weights, bf16 autocast, SDPA; peak {peak:.1f} GiB")
            del model, opt
        except Exception as e:
            rows.add(name, "train", batch, seq, "", "error", float("nan"), "", repr(e)[:300])
        free(dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats()


def section_compiled(args, rows: Rows) -> None:
    import torch

    dev = device_of(args)

    def measure(name: str) -> None:
        model = build(name, args)
        model.generation_config.cache_implementation = "static"  # generate compiles its decode step
        for batch in args.batches:
            with torch.no_grad():
                t = time.perf_counter()
                generate_times(model, batch, PROMPT, NEW_TOKENS, dev)
                warm = time.perf_counter() - t
                generate_times(model, batch, PROMPT, NEW_TOKENS, dev)
                ttft, tpot = generate_times(model, batch, PROMPT, NEW_TOKENS, dev)
            graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            detail = (f"HF generate, cache_implementation static (generate's own torch.compile of the decode "
                      f"step); first call {warm:.0f} s; {graphs} graphs compiled")
            rows.add(name, "compiled", batch, PROMPT, NEW_TOKENS, "ttft_s", ttft, "s", detail)
            rows.add(name, "compiled", batch, PROMPT, NEW_TOKENS, "tpot_s", tpot, "s", detail)
            torch._dynamo.reset()

    each_model(args.models or ("llama-3.2-1b", "llama-3.1-8b"), args, rows, "compiled", measure)


def section_genprof(args, rows: Rows) -> None:
    """Where generate's host time goes: cProfile of a batch-1 generate, its top functions by own time
    written to DIR/genprof.txt."""
    import cProfile
    import io
    import pstats

    import torch

    dev = device_of(args)
    name = (args.models or ["llama-3.2-1b"])[0]
    model = build(name, args)
    with torch.no_grad():
        generate_times(model, 1, PROMPT, 8, dev)
        prof = cProfile.Profile()
        prof.enable()
        ttft, tpot = generate_times(model, 1, PROMPT, 16, dev)
        prof.disable()
        wall, host = bare_decode(model, 1, PROMPT, dev, 10)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(40)
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
    with open(os.path.join(os.path.dirname(rows.path), "genprof.txt"), "w") as f:
        f.write(out.getvalue())
    rows.add(name, "eager", 1, PROMPT, 16, "tpot_s_cprofiled", tpot, "s", f"under cProfile; bare decode {wall * 1e3:.1f} ms")


def section_lean(args, rows: Rows) -> None:
    import torch

    from lean_llama import lean_from_config

    dev = device_of(args)
    steps = 20

    def measure(name: str) -> None:
        model = build(name, args)
        wall, host = bare_decode(model, 1, PROMPT, dev, steps)
        rows.add(name, "eager", 1, PROMPT, 1, "decode_wall_s", wall, "s", "HF form: one model(ids, cache) forward, "
                 "synchronised (this section: paired with the lean form)")
        rows.add(name, "eager", 1, PROMPT, 1, "decode_host_s", host, "s", "HF form: the same forward until it returns")
        del model
        free(dev)
        torch.manual_seed(0)
        with dev:
            lean = lean_from_config(hf_config(name, args.tiny), max_len=PROMPT + 64).to(torch.bfloat16).eval()
            lean.setup_caches(1, torch.bfloat16)
        wall, host = lean_decode(lean, PROMPT, dev, steps)
        rows.add(name, "lean-eager", 1, PROMPT, 1, "decode_wall_s", wall, "s",
                 "lean gpt-fast form (scripts/lean_llama.py): one decode forward, synchronised")
        rows.add(name, "lean-eager", 1, PROMPT, 1, "decode_host_s", host, "s", "lean form: until the forward returns")
        if dev.type == "cuda":
            t = time.perf_counter()
            step = torch.compile(lean, mode="reduce-overhead", fullgraph=True)
            lean_decode(lean, PROMPT, dev, 3, step)
            warm = time.perf_counter() - t
            wall, host = lean_decode(lean, PROMPT, dev, steps, step)
            rows.add(name, "lean-compiled", 1, PROMPT, 1, "decode_wall_s", wall, "s",
                     f"lean form, torch.compile(mode='reduce-overhead', fullgraph=True) decode step, synchronised; "
                     f"first calls {warm:.0f} s")
            torch._dynamo.reset()

    each_model(args.models or ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"), args, rows, "lean", measure)


SECTIONS = {"host": section_host, "micro": section_micro, "eager": section_eager, "profile": section_profile,
            "shapes": section_shapes, "train": section_train, "compiled": section_compiled,
            "genprof": section_genprof, "lean": section_lean}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("section", choices=sorted(SECTIONS))
    ap.add_argument("--out", required=True, help="folder of gpu_rows.csv")
    ap.add_argument("--models", nargs="*", help="catalog names (default: the section's own list)")
    ap.add_argument("--batches", nargs="*", type=int, default=[1], help="batch sizes of the compiled section")
    ap.add_argument("--tiny", action="store_true", help="CPU, scaled-down configs: tests this script")
    args = ap.parse_args(argv)
    SECTIONS[args.section](args, Rows(args.out, args.section))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
