"""Runtimes: how a software stack turns the counted op records into kernels, before timing.

The counts stay as counted (they are what the model's code asks for); a runtime only says which
of those ops become kernels, what traffic they really move and what the host pays to launch them.
Its decisions are one `OpPlan` per record (read by `dispatchprof.sim.timing.time_op`) and a
`RuntimeChanges` summary that reports show.

- ``eager`` (PyTorch eager): every op is its own kernel, launched from the host at
  ``host_overhead_us`` each; a growing KV cache is copied as counted (``torch.cat``); attention is
  timed as counted (``OpCounter(causal="computed")`` counts a causal mask's scores only).
- ``compiled`` (torch.compile + CUDA graphs): one graph launch per step (``graph_launch_us`` on
  the step's first op); every run of consecutive pointwise / reduction ops (no MACs) on one device
  is one fused kernel whose traffic is its inputs and outputs only: a tensor produced and
  consumed inside the run is neither written nor read back, and an input read by several ops of
  the run is read once. A ``cat`` joins such a run (Inductor lowers a concatenation of pointwise
  results into the kernel that computes them, as in rotary embeddings' ``rotate_half``) unless it
  writes a KV cache (`writes_kv_cache`); a static KV cache is written in place (a cache ``cat``
  moves only the new token's keys or values: read once, written once). A causal attention op runs
  as a flash kernel that skips the score tiles its mask hides (`skips_masked_tiles`): its work is
  the computed tiles' share of the counted work (`dispatchprof.sim.attention.flash_work_share`;
  traffic unchanged).
- ``serving`` (TensorRT-LLM / vLLM style engines): as compiled (fused attention and MLP epilogues
  are the fused pointwise runs around the fused attention op), and the prefill computes the
  logits of the last position only (the LM head's work and activation traffic divided by the
  prompt length; its weights are still read once). The engine's host also works per sequence of
  a step (scheduling it, preparing its inputs, sampling its token: ``sequence_host_us`` each):
  a step's graph launch carries its sequences, the batch of its first attention op's query
  (`dispatchprof.sim.attention.step_sequences`).

**Routed experts as grouped kernels** (compiled and serving): engines run a mixture-of-experts
layer's routed experts as grouped kernels (vLLM's and SGLang's fused_moe, TensorRT-LLM's MoE
kernels, transformers' ``grouped_mm`` experts path), while a count taken expert by expert (the
catalog's balanced routing, `dispatchprof.llm.models`) records each expert's GEMMs and
activation on their own. In one pass through a routed-experts module (consecutive records of one
step whose scope has a path component ``experts``: `is_routed_expert`), the kernels of one op and
operand shapes (the first dimension aside: each expert's tokens) are one grouped kernel: the
first launches it, the others add their work and traffic but no launch (`group_experts`).
Their GEMMs are timed at the profile's ``expert_matrix_efficiency`` where it gives one
(`OpPlan.grouped`): an engine's grouped expert GEMMs reach less of the peak than a dense GEMM
of the same dtype (devices/nvidia.yaml, from measured MoE kernels: scripts/moe_efficiency.py).
Eager keeps every op its own kernel, as counted.

A KV cache stored narrower than the model's dtype (``kv_dtype``: fp8, int8, int4, as engines
do) is a plan too (`narrow_kv_cache`), under every runtime: the keys and values an attention op
reads, and the cached part a KV-cache append still copies, move ``kv_bits / element bits`` of
their counted bytes; the rest is removed traffic, as fusion's is.

A step is one ``OpCounter.phase`` block (a prefill, one decode step); without phase blocks the
whole count is one step.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Literal, Sequence, get_args

from dispatchprof.results.records import OpRecord
from dispatchprof.sim.attention import (flash_work_share, is_causal_flash, query_positions, reads_kv,
                                        step_sequences)
from dispatchprof.sim.device import WEIGHT_BITS, dtype_key
from dispatchprof.sim.timing import OpPlan

Runtime = Literal["eager", "compiled", "serving"]
RUNTIMES: tuple[str, ...] = get_args(Runtime)
#: Ops that never join a fused pointwise run: data movement and gathers stay their own kernels
#: (a ``cat`` joins one unless it writes a KV cache: `is_fusible`).
UNFUSED_OPS = frozenset({"aten.embedding", "aten.index_select", "aten.index", "aten.copy_",
                         "aten.arange", "aten.scatter", "aten.gather", "aten.index_add", "aten.sort", "aten.topk"})
LM_HEAD_NAMES = ("lm_head", "embed_out", "output")
#: A routed-experts scope: a path component named exactly "experts" (not "shared_experts").
ROUTED_EXPERTS = re.compile(r"(?:^|\.)experts(?:\.|$)")
#: Storage bits of a record's dtype key (dtype_key), for the KV-cache narrowing.
_ELEMENT_BITS = {"fp64": 64, **WEIGHT_BITS}


def check_runtime(runtime: str, where: str = "runtime") -> str:
    """``runtime`` itself, or a ValueError naming the allowed runtimes."""
    if runtime not in RUNTIMES:
        raise ValueError(f"{where} must be one of {RUNTIMES}, got {runtime!r}")
    return runtime


@dataclass(frozen=True)
class RuntimeChanges:
    """What a runtime changed against the counted op stream (reported next to the results)."""

    runtime: str = "eager"
    kernels: int = 0               # kernels launched (records minus those fused into another)
    fused_chains: int = 0          # runs of pointwise ops fused into one kernel
    fused_ops: int = 0             # ops that launched no kernel of their own (inside a chain)
    removed_bytes: int = 0         # traffic the fusion and in-place KV writes removed
    kv_bytes_in_place: int = 0     # of which: KV cache copies avoided
    logits_share: float = 1.0      # share of the prefill's LM head kept (serving)
    kv_dtype: str | None = None    # the KV cache's storage dtype, None for the model's own
    kv_bytes_narrowed: int = 0     # traffic removed by storing the KV cache in kv_dtype
    flash_ops: int = 0             # causal attention ops run as tile-skipping flash kernels
    flash_share: float = 1.0       # share of those ops' counted MACs that they compute

    def describe(self) -> str:
        """One line: the runtime and what it fused or removed."""
        if self.runtime == "eager":
            text = f"runtime eager: {self.kernels} kernels, each launched from the host; KV cache copied as counted"
            return text + self._kv_text()
        text = (f"runtime {self.runtime}: {self.kernels} kernels in one graph per step; {self.fused_ops} ops fused "
                f"into {self.fused_chains} pointwise chains; {self.removed_bytes:,} bytes of traffic removed "
                f"({self.kv_bytes_in_place:,} by writing the KV cache in place)")
        if self.logits_share != 1.0:
            text += "; logits for the last position only"
        if self.flash_ops:
            kernels = "kernel that skips" if self.flash_ops == 1 else "kernels that skip"
            text += (f"; causal attention in {self.flash_ops} flash {kernels} masked tiles: "
                     f"{self.flash_share:.1%} of the counted MACs computed")
        return text + self._kv_text()

    def _kv_text(self) -> str:
        if self.kv_dtype is None:
            return ""
        return f"; KV cache stored in {self.kv_dtype} ({self.kv_bytes_narrowed:,} bytes of traffic less)"


def is_fusible(r: OpRecord, records: Sequence[OpRecord]) -> bool:
    """A pointwise or reduction op that a compiler fuses with its neighbours, or a ``cat`` that
    does not write a KV cache."""
    return (not r.cost.macs and r.op not in UNFUSED_OPS and not r.cost.comm_bytes
            and not writes_kv_cache(r, records))


def writes_kv_cache(r: OpRecord, records: Sequence[OpRecord]) -> bool:
    """A ``cat`` that writes a KV cache: an append (`is_kv_append`), or a cache's first write, a
    ``cat`` whose first input is empty (the cache holds nothing yet)."""
    return r.op == "aten.cat" and bool(r.inputs) and (r.inputs[0][1] == 0 or is_kv_append(r, records))


def skips_masked_tiles(r: OpRecord, runtime: str) -> bool:
    """Whether ``runtime`` runs ``r`` as a causal flash kernel that skips the score tiles its mask
    hides: a causal attention op (`is_causal_flash`) under any runtime but eager."""
    return runtime != "eager" and is_causal_flash(r)


@functools.lru_cache(maxsize=1 << 16)
def is_routed_expert(scope: str) -> bool:
    """Whether ``scope`` lies in a routed-experts module (`ROUTED_EXPERTS`); remembered per scope
    (a count holds each scope many times)."""
    return ROUTED_EXPERTS.search(scope) is not None


def group_experts(records: Sequence[OpRecord], kernel: list[bool], starts: set[int]) -> int:
    """Mark the routed experts' repeated kernels as members of one grouped kernel (module
    docstring): within a pass through one experts module, a kernel whose op and operand shapes
    (first dimension aside) an earlier kernel of the pass had launches none. Returns how many."""
    grouped, seen, scope = 0, set(), None
    for k, r in enumerate(records):
        if not is_routed_expert(r.scope):
            scope = None
            continue
        module = r.scope[:ROUTED_EXPERTS.search(r.scope).end()].rstrip(".")
        if module != scope or k in starts:
            scope, seen = module, set()
        if not kernel[k]:
            continue
        key = (r.op, tuple(s[1:] for s in r.shapes[:1]), tuple(r.shapes[1:]))
        if key in seen:
            kernel[k] = False
            grouped += 1
        else:
            seen.add(key)
    return grouped


def is_kv_append(r: OpRecord, records: Sequence[OpRecord]) -> bool:
    """A KV cache update: a ``cat`` whose first input is the previous version of the cache (made by
    another ``cat``) and whose last input is the new token's keys or values."""
    if r.op != "aten.cat" or len(r.inputs) < 2:
        return False
    producer = r.inputs[0][0]
    return 0 <= producer < len(records) and records[producer].op == "aten.cat"


def kv_copy_bytes(r: OpRecord) -> int:
    """The bytes a KV-cache append (`is_kv_append`) moves copying the cache: all its traffic but
    reading and writing the new tokens' keys or values (its last input). An in-place write
    removes them; a narrow cache (`narrow_kv_cache`) narrows what is left of them."""
    return max(0, (r.cost.bytes_read or 0) + (r.cost.bytes_written or 0) - 2 * r.inputs[-1][1])


def plan_runtime(records: Sequence[OpRecord], runtime: str, step_starts: Sequence[int],
                 devices: Sequence[str]) -> tuple[list[OpPlan], RuntimeChanges]:
    """One OpPlan per record (host launch, kernel or fused, bytes removed, logits share) and what
    changed. ``step_starts`` are the indices where a step begins; ``devices[i]`` names the device
    of record i (a fused run never spans two devices)."""
    check_runtime(runtime)
    n = len(records)
    starts = set(step_starts) | {0}
    if runtime == "eager":
        return [OpPlan(host="op") for _ in range(n)], RuntimeChanges("eager", kernels=n)
    removed = [0] * n
    kernel = [True] * n
    chains = fused = kv_saved = 0
    consumers = _consumers(records)
    fusible = [is_fusible(r, records) for r in records]
    i = 0
    while i < n:
        if not fusible[i]:
            if is_kv_append(records[i], records):
                cut = kv_copy_bytes(records[i])
                removed[i] += cut
                kv_saved += cut
            i += 1
            continue
        j = i
        while j + 1 < n and fusible[j + 1] and devices[j + 1] == devices[i] and j + 1 not in starts:
            j += 1
        if j > i:
            chains += 1
            fused += j - i
            _fuse(records, i, j, consumers, removed, kernel)
        i = j + 1
    group_experts(records, kernel, starts)
    share = [1.0] * n
    logits = 1.0
    sequences: dict[int, int] = {}
    if runtime == "serving":
        sequences = step_sequences(records, starts)
        positions = query_positions(records)
        for k, r in enumerate(records):
            if r.cost.macs and r.scope.rsplit(".", 1)[-1] in LM_HEAD_NAMES and positions.get(r.phase, 1) > 1:
                share[k] = logits = 1.0 / positions[r.phase]
    flash = [k for k, r in enumerate(records) if skips_masked_tiles(r, runtime)]
    work = [1.0] * n
    for k in flash:
        work[k] = flash_work_share(records[k])
    plans = [OpPlan(removed_bytes=removed[k], kernel=kernel[k], host="graph" if k in starts else "",
                    activation_share=share[k], sequences=sequences.get(k, 0), work_share=work[k],
                    grouped=is_routed_expert(records[k].scope)) for k in range(n)]
    counted = sum(records[k].cost.macs for k in flash)
    computed = sum(records[k].cost.macs * work[k] for k in flash)
    changes = RuntimeChanges(runtime, sum(kernel), chains, fused, sum(removed), kv_saved, logits,
                             flash_ops=len(flash), flash_share=computed / counted if counted else 1.0)
    return plans, changes


def narrow_kv_cache(records: Sequence[OpRecord], plans: list[OpPlan], changes: RuntimeChanges,
                    kv_dtype: str | None) -> tuple[list[OpPlan], RuntimeChanges]:
    """The plans with the KV cache stored in ``kv_dtype`` (a key of WEIGHT_BITS; None: unchanged).

    Cache traffic is the key and value inputs of an attention op and the cached part of an append
    (`is_kv_append`): what it still moves after the runtime's removals, less reading and writing
    the new tokens (their keys and values are written as computed, as a prefill's are, which no
    op of the count copies; so a step's narrowed bytes grow with its cached tokens alone, as the
    serving step cost model's features need). It moves kv_bits / b of its bytes, b being the
    storage bits of the record's dtype (records in a dtype no narrower keep theirs)."""
    if kv_dtype is None:
        return plans, changes
    kv_bits = WEIGHT_BITS[kv_dtype]
    out, narrowed = list(plans), 0
    for k, r in enumerate(records):
        bits = _ELEMENT_BITS.get(dtype_key(r.dtype))
        if bits is None or kv_bits >= bits:
            continue
        if reads_kv(r):
            cache = r.inputs[1][1] + r.inputs[2][1]
        elif is_kv_append(r, records):
            cache = max(0, kv_copy_bytes(r) - plans[k].removed_bytes)
        else:
            continue
        cut = int(cache * (1 - kv_bits / bits))
        if cut > 0:
            out[k] = dataclasses.replace(plans[k], removed_bytes=plans[k].removed_bytes + cut)
            narrowed += cut
    return out, dataclasses.replace(changes, removed_bytes=changes.removed_bytes + narrowed, kv_dtype=kv_dtype,
                                    kv_bytes_narrowed=narrowed)


def _consumers(records: Sequence[OpRecord]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for k, r in enumerate(records):
        for producer, _, _ in r.inputs:
            if producer >= 0:
                out.setdefault(producer, set()).add(k)
    return out


def _fuse(records: Sequence[OpRecord], i: int, j: int, consumers: dict[int, set[int]], removed: list[int],
          kernel: list[bool]) -> None:
    """Records i..j become one kernel: internal tensors are neither written nor read back, and a
    tensor from outside is read once."""
    seen: set[tuple[int, int]] = set()
    for k in range(i, j + 1):
        r = records[k]
        kernel[k] = k == i
        for producer, nbytes, tensor in r.inputs:
            if i <= producer <= j or (producer, tensor) in seen:
                removed[k] += nbytes
            seen.add((producer, tensor))
        users = consumers.get(k, set())
        if users and all(i <= u <= j for u in users):
            removed[k] += r.cost.bytes_written or 0
