"""Training factors fitted to published training throughput, with their provenance.

The simulator times each op from the device profile (dispatchprof.sim.timing). Two kinds of
kernel in a training step reach less than that, and are scaled here:

- ``fp8_efficiency``: FP8 linears (Transformer Engine, torchao float8) reach this fraction of the
  bf16 GEMM's efficiency at the fp8 peak (scaling, casting, amax reductions, transposes);
- ``attention_efficiency``: fused attention forward and backward (flash attention, cuDNN)
  reach this fraction of the simulated attention time's speed (the backward's recomputation of the
  scores and its atomics).

Fitted by ``scripts/validate_training.py --fit`` on the "fit" rows of
scripts/data/published_training.csv (minimum median |error| of tokens/s/GPU over a grid of
0.05 steps); the "held-out" rows are never used to fit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Factors:
    fp8_efficiency: float = 1.0
    attention_efficiency: float = 1.0


#: The shipped factors: ``scripts/validate_training.py --fit`` on the 46 fit rows of
#: scripts/data/published_training.csv (2026-11-28, refitted when the NVIDIA profiles took their
#: measured ``attention_efficiency``, scripts/attention_kernels.py: the simulated attention time this
#: factor scales is now the device's attention kernels', no longer the GEMMs' 0.8 of the peak):
#: attention 0.7 on the 21 bf16 fit rows, then fp8 0.75 on the 25 FP8 fit rows; fit rows' median
#: |error| 3.1% (docs/training.md).
FACTORS = Factors(fp8_efficiency=0.75, attention_efficiency=0.7)
