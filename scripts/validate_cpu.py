"""How close are simulated times to real ones? Calibrate this CPU, then predict and measure.

    python scripts/validate_cpu.py [--markdown]

The host profile comes from `dispatchprof.sim.calibrate.measure()` (matmul and element-wise
throughput per dtype, copy bandwidth, per-op launch overhead). Each case is a real forward pass
(random weights, CPU, no_grad): its ops are counted once and simulated on the host profile
(predicted), and the pass is timed (median of several runs, measured). Target: median absolute
error under 25%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def cases():
    import transformers as tf

    import zoo

    def hf(name, batch, seq):
        def build():
            from dispatchprof.llm.catalog import catalog, load_config
            cls = tf.AutoModel if catalog()[name].auto == "model" else tf.AutoModelForCausalLM
            torch.manual_seed(0)
            return cls.from_config(load_config(name)).eval(), {"input_ids": torch.randint(0, 1000, (batch, seq))}
        return (f"{name} {batch}x{seq}", build)

    def cnn(batch, size):
        def build():
            torch.manual_seed(0)
            return zoo.ResNetish().eval(), {"x": torch.randn(batch, 3, size, size)}
        return (f"resnet-style CNN {batch}x3x{size}x{size}", build)

    return [hf("gpt2", 1, 16), hf("gpt2", 1, 256), hf("gpt2", 8, 128), hf("bert-base", 1, 32),
            hf("bert-base", 8, 256), cnn(1, 32), cnn(64, 64)]


def measure_forward(model, inputs, repeats: int) -> float:
    with torch.no_grad():
        model(**inputs)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            model(**inputs)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    from tabulate import tabulate

    from dispatchprof import OpCounter
    from dispatchprof.sim.calibrate import calibrated_device, measure

    warnings.simplefilter("ignore")
    cal = measure()
    device = calibrated_device(cal)
    rows, errors = [], []
    for name, build in cases():
        model, inputs = build()
        with torch.no_grad(), OpCounter(devices=device) as c:
            model(**inputs)
        predicted = c.simulated().total.time_s
        measured = measure_forward(model, inputs, args.repeats)
        error = (predicted - measured) / measured
        errors.append(abs(error))
        rows.append([name, c.total().calls, f"{predicted * 1e3:.2f}", f"{measured * 1e3:.2f}", f"{100 * error:+.1f}%"])
    fmt = "github" if args.markdown else "simple"
    print(tabulate(rows, headers=["case", "ops", "predicted ms", "measured ms", "error"], tablefmt=fmt))
    print(f"\nmedian absolute error: {100 * statistics.median(errors):.1f}% (target < 25%); host: "
          f"matmul fp32 {cal.matrix_flops['fp32'] / 1e9:.0f} GFLOP/s, copy {cal.copy_bytes_per_s / 1e9:.1f} GB/s, "
          f"launch overhead {cal.launch_overhead_s * 1e6:.1f} us, {cal.threads} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
