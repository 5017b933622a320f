"""Count inference under accelerate: a small GPT-2 (random weights, CPU) answering a few batches.

    python scripts/examples/inference.py

The first batch is skipped, the next two are counted (one window), simulated on two devices, and
the main process prints the report.
"""

import warnings

import torch
import transformers
from accelerate import Accelerator

from dispatchprof.integrations.accelerate import CountKwargs, profile

warnings.simplefilter("ignore")
accelerator = Accelerator(cpu=True)
config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=128)
model = accelerator.prepare(transformers.GPT2LMHeadModel(config).eval())
results = []
options = CountKwargs(devices=["PIM-AI-1chip", "A6000"], schedule_option={"wait": 1, "active": 2},
                      on_trace_ready=results.append, depth=2, top=5)
with torch.no_grad(), profile(accelerator, options) as prof:
    for _ in range(3):
        model(torch.randint(0, 1000, (4, 32)))
        prof.step()
assert len(results) == 1 and results[0].profile.total().macs > 0
