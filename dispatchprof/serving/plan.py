"""The sizing search: which layout of a model on a device serves given traffic within SLOs on
the fewest GPUs, and the Pareto front of the layouts tried.

**Candidates** (`candidates`): aggregated replicas of tensor parallelism tp in `TPS` (tp dividing
the attention heads; one node of 8 GPUs at most), R replicas with R x tp <= max_gpus; for a
mixture-of-experts model also expert parallelism over G = 2, 4, 8 GPUs, with attention data
parallelism 1 or G; and disaggregated P prefill + D decode replicas of one tp each (P, D >= 1,
(P + D) tp <= max_gpus). Each candidate is simulated under the same requests (`serve`).

**Scores.** Per candidate: output tokens/s per GPU (throughput per GPU) and tokens/s per user =
1 / mean TPOT (interactivity), mean TTFT and mean TPOT. **The front**: candidates no other beats
on both tokens/s per GPU and tokens/s per user (ties kept). **The answer**: among the candidates
whose mean TTFT and mean TPOT meet the SLOs, the fewest GPUs, then the most tokens/s per GPU;
none meeting them: the candidates closest to them (the largest of TTFT / SLO and TPOT / SLO the
smallest), reported as such.

**Engine flags** (`engine_commands`): vLLM ``vllm serve MODEL --tensor-parallel-size tp
[--data-parallel-size R] [--enable-expert-parallel]`` and SGLang ``python -m
sglang.launch_server --model-path MODEL --tp tp [--dp R] [--ep G --enable-dp-attention]``; a
disaggregated layout names the prefill and decode servers' flags (vLLM ``--kv-transfer-config``
with the NIXL connector; SGLang ``--disaggregation-mode prefill|decode``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

#: Tensor-parallel sizes tried (one node).
TPS = (1, 2, 4, 8)
#: Expert-parallel sizes tried for a mixture-of-experts model.
EPS = (2, 4, 8)


@dataclass(frozen=True)
class Candidate:
    """One layout: ``replicas`` of ``tp`` (x ``ep`` / ``dp_attention``), or ``prefill`` + ``decode``
    replicas of ``tp`` each (disaggregated)."""

    tp: int
    replicas: int = 1
    ep: int = 1
    dp_attention: int = 1
    prefill: int = 0
    decode: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def gpus_per_replica(self) -> int:
        return self.ep if self.ep > 1 else self.tp

    @property
    def gpus(self) -> int:
        n = self.prefill + self.decode if self.disaggregated else self.replicas
        return n * self.gpus_per_replica

    def text(self) -> str:
        if self.disaggregated:
            return f"{self.prefill}P+{self.decode}D x tp{self.tp}"
        if self.ep > 1:
            return f"{self.replicas} x ep{self.ep} dp-attn{self.dp_attention}"
        return f"{self.replicas} x tp{self.tp}"


@dataclass(frozen=True)
class Outcome:
    """A candidate's simulated scores (seconds; tokens/s)."""

    candidate: Candidate
    tokens_per_s_per_gpu: float
    ttft_s: float
    tpot_s: float

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1 / self.tpot_s if self.tpot_s > 0 else float("inf")

    def meets(self, slo_ttft_s: float, slo_tpot_s: float) -> bool:
        return self.ttft_s <= slo_ttft_s and self.tpot_s <= slo_tpot_s

    def distance(self, slo_ttft_s: float, slo_tpot_s: float) -> float:
        """The larger of TTFT / its SLO and TPOT / its SLO (<= 1: met)."""
        return max(self.ttft_s / slo_ttft_s, self.tpot_s / slo_tpot_s)


def candidates(heads: int, max_gpus: int, experts: int | None = None, disaggregated: bool = True) -> list[Candidate]:
    """The layouts of the module docstring, fewest GPUs first."""
    if max_gpus < 1:
        raise ValueError(f"max_gpus must be a whole number >= 1, got {max_gpus!r}")
    out = []
    for tp in TPS:
        if heads % tp or tp > max_gpus:
            continue
        out += [Candidate(tp, r) for r in range(1, max_gpus // tp + 1)]
        if disaggregated:
            n = max_gpus // tp
            out += [Candidate(tp, prefill=p, decode=d) for p in range(1, n) for d in range(1, n - p + 1)]
    for g in EPS if experts else ():
        if experts % g or g > max_gpus:
            continue
        for a in (1, g):
            if heads % (g // a):
                continue
            out += [Candidate(g // a, r, ep=g, dp_attention=a) for r in range(1, max_gpus // g + 1)]
    return sorted(set(out), key=lambda c: (c.gpus, c.disaggregated, c.tp, c.ep, c.replicas, c.prefill))


def search(cands: Iterable[Candidate], evaluate: Callable[[Candidate], Outcome | None]) -> list[Outcome]:
    """Every candidate's outcome (``evaluate`` None: it does not fit, left out)."""
    return [o for o in map(evaluate, cands) if o is not None]


def pareto(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Outcomes no other beats on both tokens/s per GPU and tokens/s per user, by tokens/s per user."""
    front = [o for o in outcomes
             if not any(p.tokens_per_s_per_gpu >= o.tokens_per_s_per_gpu and
                        p.tokens_per_s_per_user >= o.tokens_per_s_per_user and
                        (p.tokens_per_s_per_gpu, p.tokens_per_s_per_user) !=
                        (o.tokens_per_s_per_gpu, o.tokens_per_s_per_user) for p in outcomes)]
    return sorted(front, key=lambda o: o.tokens_per_s_per_user)


def cheapest(outcomes: Sequence[Outcome], slo_ttft_s: float, slo_tpot_s: float) -> tuple[Outcome | None, list[Outcome]]:
    """(the fewest-GPU outcome meeting both SLOs, most tokens/s per GPU among equals; None when
    none does) and, when none does, the three closest (`Outcome.distance`)."""
    good = [o for o in outcomes if o.meets(slo_ttft_s, slo_tpot_s)]
    if good:
        return min(good, key=lambda o: (o.candidate.gpus, -o.tokens_per_s_per_gpu)), []
    return None, sorted(outcomes, key=lambda o: o.distance(slo_ttft_s, slo_tpot_s))[:3]


def engine_commands(model: str, c: Candidate) -> list[str]:
    """vLLM and SGLang command lines of a candidate (module docstring)."""
    if c.disaggregated:
        nixl = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
        return [f"{c.prefill} x vllm serve {model} --tensor-parallel-size {c.tp} {nixl}   (prefill)",
                f"{c.decode} x vllm serve {model} --tensor-parallel-size {c.tp} {nixl}   (decode)",
                f"{c.prefill} x python -m sglang.launch_server --model-path {model} --tp {c.tp} "
                f"--disaggregation-mode prefill",
                f"{c.decode} x python -m sglang.launch_server --model-path {model} --tp {c.tp} "
                f"--disaggregation-mode decode"]
    vllm = f"vllm serve {model} --tensor-parallel-size {c.tp}"
    sglang = f"python -m sglang.launch_server --model-path {model} --tp {c.gpus_per_replica}"
    if c.ep > 1:
        vllm += f" --data-parallel-size {c.dp_attention} --enable-expert-parallel"
        sglang += f" --ep {c.ep}" + (f" --dp {c.dp_attention} --enable-dp-attention" if c.dp_attention > 1 else "")
    if c.replicas > 1:
        vllm, sglang = f"{c.replicas} x {vllm}", f"{c.replicas} x {sglang}"
    return [vllm, sglang]


__all__ = ["Candidate", "Outcome", "candidates", "cheapest", "engine_commands", "pareto", "search"]
