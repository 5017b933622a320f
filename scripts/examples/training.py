"""Count a training loop under accelerate: forward, backward and optimizer step as phases.

    python scripts/examples/training.py

Real tensors, so each phase's wall time is measured too (achieved FLOP/s), as DeepSpeed's flops
profiler prints them.
"""

import warnings

import torch
from accelerate import Accelerator
from torch import nn

from dispatchprof.integrations.accelerate import CountKwargs, profile

warnings.simplefilter("ignore")
accelerator = Accelerator(cpu=True)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, optimizer = accelerator.prepare(model, optimizer)
results = []
with profile(accelerator, CountKwargs(devices="H100-SXM", schedule_option={"wait": 1, "active": 1},
                                      on_trace_ready=results.append, depth=1, top=5)) as prof:
    for _ in range(2):
        x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        prof.step()
phases = {r.phase for r in results[0].profile.records}
assert phases == {"forward", "backward", "optimizer"}, phases
