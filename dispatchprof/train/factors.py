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
#: scripts/data/published_training.csv (2026-11-26, refitted after the Megatron-LM rows' attention
#: became unfused, which the attention factor no longer scales): attention 0.4 on the 21 bf16 fit
#: rows, then fp8 0.7 on the 25 FP8 fit rows; the same after the TP collectives moved onto the
#: TP group's link (A100) and the Megatron-LM rows' scale-out to 25 GB/s: fit rows' median |error|
#: 4.6% (docs/training.md).
FACTORS = Factors(fp8_efficiency=0.7, attention_efficiency=0.4)
