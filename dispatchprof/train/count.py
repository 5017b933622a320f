"""One micro-batch's training step counted on fake tensors and timed op by op on one device.

``count_step`` builds the model weightless (dispatchprof.llm.models.build_model), runs forward
(with the loss on the inputs as labels), backward and one AdamW step under OpCounter, and times
every record with the simulator (dispatchprof.sim.simulate: its tensor-parallel split applies,
attention and MLP blocks at 1/tp with two all-reduces per block). Records are sorted into:

- layer records: their scope lies inside a transformer layer (a scope named ``...layers.N``,
  ``h.N``, ``blocks.N``); the rest (embeddings, final norm, LM head, loss) are "other";
- per phase: forward, backward, optimizer; the device time of each record is its OpTiming's
  time less its collective time (``t_comm``), which is kept apart as tensor-parallel
  communication.

FP8 linears (``fp8=True``): every matrix op that is not attention runs its compute term at the
device's fp8 peak, reached at ``fp8_efficiency`` of the bf16 GEMM's efficiency:
``t_compute * peak_bf16 / peak_fp8 / fp8_efficiency``, and its time becomes
``max(t_compute', t_memory) + unoverlapped * min(...)`` plus its overhead, as in OpTiming.
Fused attention ops (forward and backward) take their simulated time / ``attention_efficiency``;
a model that runs its attention unfused (``attn_implementation`` eager: two batched GEMMs and a
softmax over the full score matrix) is timed op by op, as the simulator times those ops. The step
is counted in training mode: the config's dropout runs.
Both factors are fitted to published training runs (dispatchprof.train.factors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.llm.models import build_model, token_ids
from dispatchprof.results.profile import Profile
from dispatchprof.sim.attention import is_attention
from dispatchprof.sim.device import Device
from dispatchprof.sim.placement import placement_of
from dispatchprof.sim.simulate import simulate
from dispatchprof.sim.timing import OpTiming
from dispatchprof.train.factors import FACTORS, Factors

#: A transformer layer's scope: ``model.layers.3``, ``transformer.h.3``, ``blocks.3``.
LAYER_SCOPE = re.compile(r"^(.*?(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+))(?:\.|$)")
#: An attention module's own scope (not its projections'): ``model.layers.3.self_attn``, ``h.3.attn``.
ATTENTION_SCOPE = re.compile(r"(?:^|\.)(?:self_attn|attn|attention|self_attention)$")
PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds on one GPU of one phase: layer ops, other ops, their tensor-parallel all-reduces,
    the forward attention core (what selective recompute re-runs), the layers' matrix ops that are
    not attention (``linear_s``, part of ``layer_s``), and FLOPs counted."""

    layer_s: float = 0.0
    other_s: float = 0.0
    tp_comm_s: float = 0.0
    attention_s: float = 0.0
    host_s: float = 0.0
    flops: int = 0
    attention_flops: int = 0          # forward attention core's FLOPs
    dynamic_j: float = 0.0            # energy of arithmetic, traffic and collectives (no static power)
    linear_s: float = 0.0


def layer_of(scope: str) -> str | None:
    """The transformer layer scope that holds ``scope``, None outside every layer."""
    m = LAYER_SCOPE.match(scope)
    return m.group(1) if m else None


def build(spec: Any, dtype: torch.dtype = torch.bfloat16) -> torch.nn.Module:
    """The weightless model of a catalog name, config path or hub id."""
    return build_model(spec, dtype)


@dataclass(frozen=True)
class CountedModel:
    """A counted micro-batch training step, before timing: the profile and the model's sizes."""

    model: str
    micro_batch: int
    seq_len: int
    layers: int
    heads: int
    hidden: int
    layer_params: int                 # parameters of all the layers together
    other_params: int                 # embeddings, final norm, LM head
    embedding_params: int             # input token embeddings (a lookup: no FLOPs in MFU's 6N)
    profile: Profile | None = field(repr=False)   # None when timed from few layers (train.depth)
    head_bytes: int = 0               # bytes the forward's ops outside the layers write (embedding, LM head, loss)
    op_saved_bytes: int = 0           # half the layers' forward matmul outputs + their attention outputs (bytes)

    @property
    def params(self) -> int:
        return self.layer_params + self.other_params


@dataclass(frozen=True)
class CountedStep(CountedModel):
    """A counted micro-batch step of a model and its times on one device."""

    phases: dict[str, PhaseTimes] = field(default_factory=dict)
    activation_bytes: int = 0         # forward's peak live bytes: what one micro-batch holds for backward


def count_model(model: torch.nn.Module, name: str, micro_batch: int, seq_len: int) -> CountedModel:
    """Count one micro-batch's forward (loss on the inputs as labels), backward and AdamW step, with
    the model in training mode (its config's dropout runs, as in training), then put back in the
    mode it was in."""
    ids = token_ids(model, micro_batch, seq_len)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    was_training = model.training
    model.train()
    try:
        with OpCounter(model, host_time=False) as c:
            with c.phase("forward"):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            with c.phase("optimizer"):
                opt.step()
    finally:
        model.train(was_training)
    opt.zero_grad(set_to_none=True)
    return CountedModel(name, micro_batch, seq_len, *model_sizes(model), c.profile, *forward_bytes(c.profile))


def model_sizes(model: torch.nn.Module) -> tuple[int, int, int, int, int, int]:
    """(layers, heads, hidden, layer_params, other_params, embedding_params) of a model, as
    `CountedModel` holds them."""
    cfg = model.config
    layer_params = sum(p.numel() for n, p in model.named_parameters() if layer_of(n) is not None)
    other = sum(p.numel() for n, p in model.named_parameters() if layer_of(n) is None)
    embedding = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    layers = int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "n_layer", 0))
    return layers, int(cfg.num_attention_heads), int(cfg.hidden_size), layer_params, other, embedding


def forward_bytes(profile: Profile) -> tuple[int, int]:
    """(head_bytes, op_saved_bytes) of a counted step (`CountedModel`): bytes the forward's ops
    outside the layers write; half the layers' forward matmul outputs plus their attention outputs."""
    forward = [r for r in profile.records if r.phase == "forward"]
    head = sum(r.cost.bytes_written for r in forward if layer_of(r.scope) is None)
    inside = [r for r in forward if layer_of(r.scope) is not None]
    saved = sum(r.cost.bytes_written for r in inside if is_attention(r)) + \
        sum(r.cost.bytes_written for r in inside if r.cost.macs > 0 and not is_attention(r)) // 2
    return head, saved


@dataclass(frozen=True)
class SimulatedModel:
    """A counted step's op timings on one device with tensor parallelism ``tp``."""

    counted: CountedModel
    device: Device
    tp: int
    ops: tuple[OpTiming, ...] = field(repr=False)
    host_s: float                     # host time the timeline leaves exposed


def simulate_model(m: CountedModel, device: Device, *, tp: int = 1, runtime: str = "compiled") -> SimulatedModel:
    """Every record of a counted step timed on ``device`` (dispatchprof.sim.simulate)."""
    sim = simulate(m.profile, placement_of(device), runtime=runtime, tp=tp)
    host = max(0.0, sim.total.time_s - sum(t.time_s for t in sim.ops))
    return SimulatedModel(m, device, tp, sim.ops, host)


@dataclass(frozen=True)
class OpTable:
    """A simulated step's op times reduced to what the training factors act on (plain numbers, so a
    validation can keep it): ``rows`` are (phase, in a layer, kind, t_compute, t_memory,
    unoverlapped, t_overhead, ops) with kind "linear" (a matrix op that is not attention: FP8 scales
    its compute term), "attention" (a fused attention op), "core" (in a model that runs no fused
    attention op, every op in an attention module's own scope: the unfused attention core, score
    GEMM, mask, softmax, dropout and GEMM with V, what selective recompute re-runs) or "other";
    identical ops (every layer's) share one row, and the rows other than "linear" are summed into
    their busy seconds (t_compute 0). ``sums`` per phase: TP collective seconds, FLOPs, the forward
    attention core's FLOPs, dynamic joules."""

    rows: tuple[tuple[str, bool, str, float, float, float, float, int], ...]
    sums: dict[str, tuple[float, int, int, float]]
    host_s: float


def op_table(s: SimulatedModel) -> OpTable:
    """The op table of a simulated step (`OpTable`); an op's host transfers (``t_transfer``: in a
    training step only the token ids' upload, the one tensor that comes from the host) count in its
    ``t_overhead`` slot."""
    rows: dict[tuple, int] = {}
    busy: dict[tuple, float] = {}
    sums = {p: [0.0, 0, 0, 0.0] for p in PHASES}
    records = s.counted.profile.records
    fused = any(is_attention(r) for r in records)
    for t in s.ops:
        r = records[t.record]
        phase = r.phase if r.phase in sums else "forward"
        attention = is_attention(r) or (not fused and ATTENTION_SCOPE.search(r.scope) is not None)
        kind = ("attention" if fused else "core") if attention else "linear" if r.cost.macs > 0 else "other"
        inside = layer_of(r.scope) is not None
        if kind == "linear":
            key = (phase, inside, kind, t.t_compute, t.t_memory, t.unoverlapped, t.t_overhead + t.t_transfer)
            rows[key] = rows.get(key, 0) + 1
        else:
            busy[phase, inside, kind] = busy.get((phase, inside, kind), 0.0) + op_seconds(t, 1.0, False)
        flops = r.cost.add + r.cost.mult
        a = sums[phase]
        a[0] += t.t_comm
        a[1] += flops
        a[2] += flops if phase == "forward" and attention else 0
        a[3] += t.dynamic_j
    out = [(*k, n) for k, n in rows.items()] + [(*k, 0.0, v, 0.0, 0.0, 1) for k, v in busy.items()]
    return OpTable(tuple(out), {p: tuple(a) for p, a in sums.items()}, s.host_s)


def phase_times(table: OpTable, fp8: float = 1.0, attention_efficiency: float = 1.0) -> dict[str, PhaseTimes]:
    """Per-phase times of an op table: linears' compute term scaled by ``fp8`` (`op_seconds`),
    attention divided by ``attention_efficiency``; host time shared in proportion to op time."""
    acc = {p: [0.0, 0.0, 0.0, 0.0] for p in PHASES}     # layer, other, forward attention core, layer linears
    for phase, inside, kind, tc, tm, u, overhead, n in table.rows:
        sec = busy_s(tc * fp8 if kind == "linear" else tc, tm, u) + overhead
        if kind == "attention":
            sec /= attention_efficiency
        if kind in ("attention", "core") and phase == "forward":
            acc[phase][2] += sec * n
        if kind == "linear" and inside:
            acc[phase][3] += sec * n
        acc[phase][0 if inside else 1] += sec * n
    ops = sum(a[0] + a[1] for a in acc.values()) or 1.0
    return {p: PhaseTimes(a[0], a[1], table.sums[p][0], a[2], table.host_s * (a[0] + a[1]) / ops,
                          int(table.sums[p][1]), int(table.sums[p][2]), table.sums[p][3], a[3]) for p, a in acc.items()}


def step_from(m: CountedModel, table: OpTable, device: Device, activation_bytes: int, *, fp8: bool = False,
              factors: Factors = FACTORS) -> CountedStep:
    """The counted step of ``m`` from its op table on ``device`` and its forward peak
    ``activation_bytes``, FP8 linears and the training factors applied (module docstring)."""
    ratio = fp8_ratio(device) / factors.fp8_efficiency if fp8 else 1.0
    return CountedStep(**{f.name: getattr(m, f.name) for f in fields(CountedModel)},
                       phases=phase_times(table, ratio, factors.attention_efficiency), activation_bytes=activation_bytes)


def step_of(s: SimulatedModel, *, fp8: bool = False, factors: Factors = FACTORS) -> CountedStep:
    """The per-phase times of a simulated step, with FP8 linears and the training factors applied."""
    peak = dict(s.counted.profile.phase_peaks).get("forward", 0)
    return step_from(s.counted, op_table(s), s.device, peak, fp8=fp8, factors=factors)


def time_model(m: CountedModel, device: Device, *, tp: int = 1, fp8: bool = False,
               runtime: str = "compiled") -> CountedStep:
    """Time a counted step on ``device`` with tensor parallelism ``tp`` (module docstring)."""
    return step_of(simulate_model(m, device, tp=tp, runtime=runtime), fp8=fp8)


def count_step(model: torch.nn.Module, name: str, micro_batch: int, seq_len: int, device: Device, *,
               tp: int = 1, fp8: bool = False, runtime: str = "compiled") -> CountedStep:
    """Count and time one micro-batch's forward, backward and AdamW step (module docstring)."""
    return time_model(count_model(model, name, micro_batch, seq_len), device, tp=tp, fp8=fp8, runtime=runtime)


def fp8_ratio(device: Device) -> float:
    """peak_bf16 / peak_fp8 of the matrix tables; a ValueError for a device without fp8."""
    if "fp8" not in device.matrix_tflops or "bf16" not in device.matrix_tflops:
        raise ValueError(f"--fp8 needs a device with fp8 and bf16 matrix peaks; {device.name!r} lists "
                         f"{sorted(device.matrix_tflops)}")
    return device.matrix_tflops["bf16"] / device.matrix_tflops["fp8"]


def busy_s(t_compute: float, t_memory: float, unoverlapped: float) -> float:
    """An op's busy time as OpTiming's: the longer of its compute and memory terms plus the
    unoverlapped share of the shorter."""
    return max(t_compute, t_memory) + unoverlapped * min(t_compute, t_memory)


def op_seconds(t: OpTiming, fp8: float, linear: bool) -> float:
    """One op's device time and host transfers, without its collectives (`op_table`); a linear's
    compute term scaled by ``fp8``."""
    return busy_s(t.t_compute * fp8 if linear else t.t_compute, t.t_memory, t.unoverlapped) + t.t_overhead + t.t_transfer
