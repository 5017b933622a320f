"""docs/serving.md's per-sequence host figure: Llama-3.1-8B served (serving runtime, no engine)
on an H100-SXM profile whose graph launch is 300 us, with 0 and 40 us of host time per sequence
of a step; 500 Poisson requests at 50 req/s (seed 0), 256 prompt + 256 output tokens.

    python scripts/serving_sequence_host.py      # one count of the model, reused for both figures
"""

from __future__ import annotations

import dataclasses
import warnings

from dispatchprof.llm.models import build_model
from dispatchprof.serving import generate_requests, prepare_serving, simulate_serving
from dispatchprof.serving.repeat import CountMemo
from dispatchprof.sim.catalog import load_device

SEQUENCE_HOST_US = (0.0, 40.0)


def main() -> None:
    requests = generate_requests(50.0, 500, "256", "256")
    model = build_model("llama-3.1-8b", generator=True)
    counts = CountMemo(model)
    print("llama-3.1-8b, H100-SXM with graph_launch_us 300, 500 requests at 50 req/s, 256 + 256 tokens")
    print(f"{'sequence_host_us':>16} {'TTFT p50':>9} {'TPOT p50':>9}")
    for us in SEQUENCE_HOST_US:
        device = dataclasses.replace(load_device("H100-SXM"), graph_launch_us=300.0, sequence_host_us=us)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            setup = prepare_serving(model, device, counts=counts)
        s = simulate_serving(setup, requests).summary
        print(f"{us:>16g} {1e3 * s.ttft_s.median:>7.2f}ms {1e3 * s.tpot_s.median:>7.2f}ms")


if __name__ == "__main__":
    main()
