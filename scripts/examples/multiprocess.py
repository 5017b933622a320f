"""Count data-parallel training on several processes, then merge the per-rank files.

    torchrun --nproc_per_node 2 scripts/examples/multiprocess.py OUTDIR      # gloo, CPU

(``accelerate launch --multi_gpu ...`` does the same on GPUs; on CPU, ``accelerate launch --cpu
--num_processes 2`` needs an MPI launcher, so torchrun is the simple way there.)

Each process writes OUTDIR/dispatchprof_{rank}.json; the gradient all-reduce of DDP is counted as
communication; the main process prints the merged report (also: dispatchprof merge OUTDIR).
"""

import sys
import warnings

import torch
from accelerate import Accelerator
from torch import nn

from dispatchprof.integrations.accelerate import CountKwargs, profile
from dispatchprof.report.ranks import merge_report
from dispatchprof.results.ranks import load_ranks

warnings.simplefilter("ignore")
out_dir = sys.argv[1] if len(sys.argv) > 1 else "dispatchprof_ranks"
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
with profile(accelerator, CountKwargs(devices="A100-80GB", output_trace_dir=out_dir, print_report=False)) as prof:
    for _ in range(2):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        accelerator.backward(nn.functional.mse_loss(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
        prof.step()
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    print(merge_report(load_ranks([out_dir]), devices="A100-80GB"))
