"""The step's schedule as pure formulas: pipeline bubbles and the communication left exposed by
overlapping it with compute. Times are seconds.

1F1B over ``pp`` stages with ``m`` micro-batches, each taking ``t`` (forward + backward) on a
stage: the step takes ``(m + pp - 1) t``, of which ``(pp - 1) t`` is bubble, a fraction
``(pp - 1) / (m + pp - 1)``. The interleaved schedule (``vp`` model chunks per stage) cuts the
bubble ``vp`` times: ``(m + (pp - 1) / vp) t`` (Narayanan et al. 2021, section 2.2).

Overlap with a prefetch depth of one (FSDP's per-layer all-gather of layer i+1 while layer i
computes; Megatron's bucketed gradient reduce while the backward continues): over ``n`` equal
chunks whose communication ``c`` runs beside compute ``f``, the first chunk's communication waits
for nothing to hide behind, and every later one shows what it has over its chunk's compute:
``exposed = c + (n - 1) * max(0, c - f)``.
"""

from __future__ import annotations


def pipeline_s(m: int, pp: int, vp: int, t_micro: float) -> float:
    """Seconds of ``m`` micro-batches through ``pp`` stages (``vp`` chunks each) at ``t_micro`` per
    micro-batch per stage: ``(m + (pp - 1) / vp) * t_micro``."""
    return (m + (pp - 1) / vp) * t_micro


def bubble_fraction(m: int, pp: int, vp: int = 1) -> float:
    """Share of the step a stage idles: ``((pp - 1) / vp) / (m + (pp - 1) / vp)``."""
    idle = (pp - 1) / vp
    return idle / (m + idle)


def exposed_s(comm: float, compute: float, chunks: int) -> float:
    """Communication left exposed when ``chunks`` chunks of ``comm`` each overlap the previous
    chunk's ``compute`` (prefetch depth one): ``comm + (chunks - 1) * max(0, comm - compute)``."""
    if chunks <= 0 or comm <= 0:
        return 0.0
    return comm + (chunks - 1) * max(0.0, comm - compute)
