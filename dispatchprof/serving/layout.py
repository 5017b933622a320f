"""How one serving replica spreads a model over its GPUs (a `Layout`), and the step time that
follows: tensor parallelism of attention, expert parallelism (EP) of the MoE layers beside
attention data parallelism, and pipeline parallelism (PP).

**GPUs of a replica.** ``tp`` devices share each batch's attention (heads split, as `serve --tp`
always did). With ``ep`` = G > 1 the replica has G GPUs and every MoE layer's routed experts are
spread over all G (E / G experts each); ``dp_attention`` = A groups of G / A GPUs each run the
attention (and every op outside the routed experts: router, shared experts, norms, embeddings,
LM head) of their own 1/A of the batch, with tensor parallelism tp = G / A inside a group. This
covers both engines' spellings: vLLM ``--tensor-parallel-size t --data-parallel-size A
--enable-expert-parallel`` (EP size = t x A) and SGLang ``--tp G --dp A --enable-dp-attention
--ep G``. With ``pp`` = P the replica is P such groups in a pipeline: G P GPUs (``gpus``).

**Expert step time (EP).** The counted model (tp-split as `dispatchprof.sim.parallel` splits it,
routing balanced as `op_formulas.moe` assumes) is timed twice per step:
- every op outside the routed experts (a scope with a path component ``experts``:
  `dispatchprof.sim.runtime.is_routed_expert`) at
  one attention group's share of the step (`Composition.split`(A): sums / A, maxima kept);
- every routed-expert op at the whole step's composition with its work and activation traffic
  times F / A and its weights times 1 / A (`dispatchprof.serving.work.scaled`): the busiest of
  the G devices holds 1 / G of the experts' weights (the count's tp share, 1 / t, over A) and
  runs F times the mean device's 1 / G of the token-expert pairs. **F = ``expert_skew`` >= 1** is
  the load-imbalance factor: the busiest device's expert work over the mean (1: balanced; the
  step waits for the busiest device). GEMM tile efficiency stays that of the counted shape.
- with attention data parallelism (A > 1), per MoE layer a dispatch and a combine all-to-all
  over the G ranks (`all_to_all_bytes`): the step's T tokens x top-k x hidden x the activation
  bytes go out once each way, 1 / G of them from each rank, the busiest rank F times that:
  ``2 x all_to_all_s(F T k h b / G, G, bw, lat)`` per layer (`dispatchprof.sim.links`, the
  scale-up link inside a node of `GPUS_PER_NODE`, the scale-out one across nodes). Without it
  (A = 1) there is none: every rank of the tensor-parallel group holds all the step's tokens,
  runs its own experts on them, and the all-reduce after the MoE block (the count's, as in any
  tensor-parallel layer) sums their outputs, as the engines run it: vLLM's FusedMoE takes its
  all-to-all kernels only when ``dp_size > 1 and use_ep``
  (vllm/model_executor/layers/fused_moe/config.py, ``use_all2all_kernels``), TensorRT-LLM's MoE
  layers all-reduce their output ``if not self.enable_attention_dp and self.mapping.tp_size > 1``
  (tensorrt_llm/_torch/models/modeling_qwen3_moe.py), SGLang's ``moe_a2a_backend`` defaults to
  ``"none"`` (python/sglang/srt/server_args.py).
**Active experts.** Serving counts a mixture-of-experts model on batches of B x E / gcd(E, k)
sequences (`dispatchprof.llm.shape_generic.batch_step`), where balanced routing (the count's
assumption, `op_formulas.moe`) gives every expert T k / E token-expert pairs: one op stream,
linear in the composition, every expert's weights read. A step of T tokens reads the weights of
the experts its tokens reach: each token picks k of the E experts, so an expert is missed by all
T tokens with probability (1 - k / E)^T when tokens route independently (the pairs per expert
stay T k / E on average, as counted), and the routed-expert ops read 1 - (1 - min(1, F k / E))^T
of the busiest device's expert weights (`LayoutCost.active_share`; F = 1 without EP). A decode
step of one sequence through DeepSeek-V3 (k = 8 of 256) reads 8 experts' weights per layer, not
256; 16 sequences through Qwen3-235B (8 of 128) reach 1 - (15/16)^16 = 64% of the experts, not
all 128 (pairs spread one per expert would be an upper bound).

The MoE block's own all-reduce in the count (at tp > 1: the shared experts' row-parallel
output) is kept.

**Pipeline (PP).** Decoder layer i runs on stage floor(i P / L) (L layers; ops before the first
layer on stage 0, after the last on stage P - 1). As vLLM and SGLang run PP, P micro-batches
are in flight (vLLM: one scheduler per virtual engine, `run_engine` replicas; SGLang: P
micro-batches of the event loop): each advances one step per pipeline cycle of P x (the slowest
stage's device time + one boundary's activation send, T x hidden x activation bytes,
`send_s`), plus the step's launch. So the replica's throughput is one micro-batch step per
stage time, and a step's latency is the full cycle (the pipeline is assumed full: at low load
a lone micro-batch would take the sum of the stages instead, up to P - 1 stage times less).

**Memory.** Per device: the weights outside the experts at the count's tp share, the experts'
at 1 / A of that (by their bytes in the weight dtype: `expert_fraction`), everything over P stages; the KV cache
of a group's own sequences. A replica's scheduler gets A x the blocks of one device, divided
over its P virtual engines.

**Energy.** (The busiest device's dynamic energy + static power x the step's time) x A per
tensor-parallel share; `ServingSetup` multiplies by tp as before.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch

from dispatchprof.serving.cost import Composition, StepCost, StepCostModel
from dispatchprof.serving.work import OpForm, op_timing, scaled
from dispatchprof.sim.device import Device
from dispatchprof.sim.links import GPUS_PER_NODE, all_to_all_s, links_of, send_s
from dispatchprof.sim.quantization import WeightDtype, parameter_bytes
from dispatchprof.sim.runtime import is_routed_expert
from dispatchprof.sim.timing import OpTiming

#: A decoder layer's index in a scope path.
LAYER = re.compile(r"\.(?:layers|h|layer|blocks)\.(\d+)(?:\.|$)")
#: Config fields naming the routed experts and the experts per token.
EXPERT_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")


@dataclass(frozen=True)
class Layout:
    """One replica's parallelism (module docstring)."""

    tp: int = 1
    ep: int = 1
    dp_attention: int = 1
    pp: int = 1
    expert_skew: float = 1.0

    @property
    def gpus(self) -> int:
        """GPUs of one replica: tp x dp_attention x pp (= ep x pp with experts spread)."""
        return self.tp * self.dp_attention * self.pp

    @property
    def plain(self) -> bool:
        """Tensor parallelism only (the step cost model as counted)."""
        return self.ep == 1 and self.dp_attention == 1 and self.pp == 1 and self.expert_skew == 1.0


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def layout_of(tp: int | None = None, ep: int = 1, dp_attention: int = 1, pp: int = 1,
              expert_skew: float = 1.0) -> Layout:
    """The Layout of these engine figures, checked among themselves (``tp`` None: ep / dp_attention
    with experts spread, else 1); a ValueError naming what was wrong and what is allowed."""
    for name, v in (("ep", ep), ("dp_attention", dp_attention), ("pp", pp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
    if not expert_skew >= 1:
        raise ValueError(f"expert_skew must be >= 1 (the busiest device's expert work over the mean), "
                         f"got {expert_skew!r}")
    if ep == 1:
        if dp_attention > 1:
            raise ValueError(f"dp_attention={dp_attention} needs expert parallelism: give ep (the replica's GPUs, "
                             f"a multiple of {dp_attention})")
        if expert_skew != 1:
            raise ValueError("expert_skew needs expert parallelism (ep > 1)")
        return Layout(tp or 1, 1, 1, pp, 1.0)
    if ep % dp_attention:
        raise ValueError(f"dp_attention={dp_attention} does not divide the replica's {ep} GPUs (ep={ep}); "
                         f"allowed: {_divisors(ep)}")
    attention_tp = ep // dp_attention
    if tp is not None and tp != attention_tp:
        raise ValueError(f"tp={tp} with ep={ep} and dp_attention={dp_attention}: attention runs tensor-parallel over "
                         f"ep / dp_attention = {attention_tp} GPUs; give tp={attention_tp} or leave it out")
    return Layout(attention_tp, ep, dp_attention, pp, float(expert_skew))


def moe_of(config: Any) -> tuple[int, int] | None:
    """(routed experts, experts per token) of a model config; None for a dense model."""
    experts = next((getattr(config, f) for f in EXPERT_FIELDS if isinstance(getattr(config, f, None), int)), None)
    top_k = getattr(config, "num_experts_per_tok", None)
    return (experts, top_k) if experts and isinstance(top_k, int) else None


def check_model(layout: Layout, config: Any) -> None:
    """EP must divide the routed experts (and needs an MoE model), PP the decoder layers."""
    if layout.ep > 1:
        moe = moe_of(config)
        if moe is None:
            raise ValueError(f"ep={layout.ep} needs a mixture-of-experts model; this one has no routed experts "
                             f"(config fields {', '.join(EXPERT_FIELDS)})")
        if moe[0] % layout.ep:
            raise ValueError(f"ep={layout.ep} does not divide the model's {moe[0]} routed experts; allowed: "
                             f"{_divisors(moe[0])}")
    if layout.pp > 1:
        layers = getattr(config, "num_hidden_layers", None)
        if not isinstance(layers, int):
            raise ValueError(f"pp={layout.pp} needs the model's decoder layers (config num_hidden_layers)")
        if layers % layout.pp:
            raise ValueError(f"pp={layout.pp} does not divide the model's {layers} layers; allowed: "
                             f"{_divisors(layers)}")


def stage_of(scopes: Sequence[str], layers: int, pp: int) -> list[int]:
    """Per op (scopes in stream order) its pipeline stage: layer i on floor(i pp / layers); ops
    before the first layer on stage 0, those after a layer on that layer's stage."""
    out, stage = [], 0
    for scope in scopes:
        m = LAYER.search(scope)
        if m:
            stage = int(m.group(1)) * pp // layers
        out.append(stage)
    return out


def all_to_all_bytes(tokens: float, top_k: int, hidden: int, element_bytes: int, ranks: int) -> float:
    """Bytes one rank sends in a dispatch (or combine) of ``tokens`` tokens: each goes to its
    ``top_k`` experts as a ``hidden`` vector, 1 / ``ranks`` of them from each rank."""
    return tokens * top_k * hidden * element_bytes / ranks


def expert_fraction(model: torch.nn.Module, weight_dtype: WeightDtype = None) -> float:
    """The routed experts' share of the model's parameter bytes, each parameter stored as
    ``weight_dtype`` stores its module's (`dispatchprof.sim.quantization`)."""
    total = experts = 0.0
    for name, p in model.named_parameters():
        nbytes = parameter_bytes(weight_dtype, name, p)
        total += nbytes
        if is_routed_expert(name):
            experts += nbytes
    return experts / total if total else 0.0


class LayoutCost:
    """A step's (seconds, joules) on a `Layout` from the counted step cost model (module docstring)."""

    def __init__(self, model: StepCostModel, layout: Layout, *, layers: int, experts: int, top_k: int, hidden: int,
                 element_bytes: int, device: Device) -> None:
        self.model, self.layout = model, layout
        self.expert = [is_routed_expert(s) for s in model.scopes]
        self.expert_groups = sorted({g for g, e in zip(model.order, self.expert) if e})
        self.stage = stage_of(model.scopes, layers, layout.pp)
        moe_layers = [set() for _ in range(layout.pp)]
        for scope, e, s in zip(model.scopes, self.expert, self.stage):
            m = LAYER.search(scope)
            if e and m:
                moe_layers[s].add(m.group(1))
        self.moe_layers = [len(m) for m in moe_layers]
        self.experts, self.top_k, self.hidden, self.element_bytes = experts, top_k, hidden, element_bytes
        links = links_of(device) if layout.gpus > 1 else None
        self.ep_link = links.link(layout.ep > GPUS_PER_NODE, GPUS_PER_NODE) if links and layout.ep > 1 else None
        self.pp_link = links.link(layout.gpus > GPUS_PER_NODE, 1) if links and layout.pp > 1 else None

    def active_share(self, tokens: float) -> float:
        """The share of the busiest device's experts that a step of ``tokens`` tokens reads:
        1 - (1 - min(1, F k / E))^T (module docstring, "Active experts")."""
        if not self.experts:
            return 1.0
        return 1.0 - (1.0 - min(1.0, self.layout.expert_skew * self.top_k / self.experts)) ** tokens

    def exchange_s(self, tokens: float) -> float:
        """One MoE layer's dispatch and combine on the busiest rank; none without attention data
        parallelism (module docstring)."""
        if self.ep_link is None or self.layout.dp_attention == 1:
            return 0.0
        g = self.layout.ep
        nbytes = self.layout.expert_skew * all_to_all_bytes(tokens, self.top_k, self.hidden, self.element_bytes, g)
        return 2 * all_to_all_s(nbytes, g, *self.ep_link)

    def cost(self, c: Composition) -> StepCost:
        """(seconds, joules) of a step of composition ``c`` (module docstring). Every op of the
        stream takes its group's timing (an expert op its group's at the whole step's share), so
        the step is evaluated over the distinct timings at once (`_Stream`): the timeline's end
        ``max_i(issued_i + d_i + ... + d_n)`` (`dispatchprof.sim.timeline.step_time`), the
        stages' and the energy's sums as counts of ops per timing (tests compare it with the
        ops one by one, to 1e-12)."""
        m, lay = self.model, self.layout
        timings, stream = self._timings(c)
        time_s = np.array([t.time_s if t is not None else 0.0 for t in timings])
        host = np.array([t.t_host if t is not None else 0.0 for t in timings])
        full = stream.step_time(time_s, host)
        tokens = c.x[1]
        exchange = self.exchange_s(tokens)
        if lay.pp == 1:
            time = full + self.moe_layers[0] * exchange
        else:
            stages = stream.stages @ time_s + np.array(self.moe_layers) * exchange
            boundary = send_s(tokens * self.hidden * self.element_bytes, *self.pp_link) if self.pp_link else 0.0
            launch = full - float(stream.counts @ time_s)
            time = launch + lay.pp * (float(stages.max()) + boundary)
        dynamic = float(stream.counts @ np.array([t.dynamic_j if t is not None else 0.0 for t in timings]))
        return StepCost(time, (dynamic + m.static_power_w * time) * lay.dp_attention)

    def breakdown(self, c: Composition) -> list[OpShare]:
        """The ops of a step of composition ``c`` by timing, as `cost` sums them: per distinct
        timing the op's form, whether it is a routed expert's (timed at the whole step's share),
        how many ops of the step take it, and the timing (one device; seconds per op). The
        exchange all-to-alls and the host timeline are not in it."""
        timings, stream = self._timings(c)
        groups = len(self.model.groups)
        return [OpShare(self.model.groups[s % groups].form, s >= groups, float(n), timings[s])
                for s, n in enumerate(stream.counts) if n and timings[s] is not None]

    def _timings(self, c: Composition) -> tuple[list, _Stream]:
        """A step's timings (per group, then per group's routed-expert timing) and its op stream."""
        m, lay = self.model, self.layout
        a = lay.dp_attention
        local = c.split(a)
        timings = list(m.op_timings(local))
        if self.expert_groups:
            experts = self._expert_timings(m.group_values(c), self.active_share(c.x[1]) / a, lay.expert_skew / a,
                                           c.flash_share)
            timings += [experts.get(g) for g in range(len(timings))]
        return timings, self._stream(m.present(local))

    def _expert_timings(self, whole: list[list[float]], weights: float, work: float, share: float) -> dict:
        """Per routed-expert group, its op timed at the whole step's quantities with its work times
        ``work`` (F / A) and its weights times ``weights`` (`scaled`); a group's timing is kept
        while its quantities do not change (a decode run changes only the context's ops)."""
        m, last, out = self.model, self._expert_last, {}
        for g in self.expert_groups:
            form = m.groups[g].form
            key = (tuple(whole[g]), work, weights, share if form.flash else 1.0)
            if g not in last or last[g][0] != key:
                last[g] = (key, op_timing(form, scaled(form, whole[g], work, weights), m.devices, m.weight_dtype,
                                          share))
            out[g] = last[g][1]
        return out

    @functools.cached_property
    def _expert_last(self) -> dict:
        return {}

    @functools.cached_property
    def _streams(self) -> dict:
        return {}

    def _stream(self, present: Sequence[bool] | None) -> _Stream:
        """The op stream of the steps where ``present`` ops run (None: all; the step cost model
        hands the same sequence for every step of one kind), as indices into the step's timings:
        op i takes timing ``order[i]``, or ``groups + order[i]`` (its group's expert timing) for
        a routed-expert op."""
        key = None if present is None else id(present)      # the step cost model keeps one per step kind
        kept = self._streams.get(key)
        if kept is None or kept[0] is not present:
            groups = len(self.model.groups)
            slots = np.array([g + groups * e for g, e in zip(self.model.order, self.expert)], dtype=np.int64)
            stage = np.array(self.stage, dtype=np.int64)
            if present is not None:
                keep = np.array(present, dtype=bool)
                slots, stage = slots[keep], stage[keep]
            kept = self._streams[key] = (present, _Stream(slots, stage, 2 * groups, self.layout.pp))
        return kept[1]


class OpShare(NamedTuple):
    """The ops of a step that take one timing (`LayoutCost.breakdown`)."""

    form: OpForm
    expert: bool          # a routed expert's op, timed at the whole step's share
    count: float          # ops of the step that take it
    timing: OpTiming      # one op's (seconds, joules) on one device


class _Stream:
    """A step's ops as indices into per-step arrays of timings (``slots``), with what the step's
    evaluation needs of them, built once: how many ops take each timing (``counts``; per
    pipeline stage: ``stages``), and per pattern of timings the host issues (t_host > 0) the
    timeline's entries (`step_time`)."""

    #: Up to this many issued ops the timeline is kept as entries (an issued op, then the run of
    #: ops the host does not issue after it, as counts per timing); beyond, op by op.
    ENTRIES = 64

    def __init__(self, slots: np.ndarray, stage: np.ndarray, width: int, pp: int) -> None:
        self.slots, self.width = slots, width
        self.counts = np.bincount(slots, minlength=width).astype(np.float64)
        self.stages = np.zeros((pp, width))
        np.add.at(self.stages, (stage, slots), 1.0)
        self._timelines: dict[bytes, tuple[np.ndarray, np.ndarray] | None] = {}

    def step_time(self, time_s: np.ndarray, host: np.ndarray) -> float:
        """The step's end on the host/device timeline (`dispatchprof.sim.timeline.step_time`) of
        its ops with these per-timing device and host seconds: max over i of issued_i + d_i +
        ... + d_n, the issued times summed over the ops the host issues."""
        if not len(self.slots):
            return 0.0
        issued = host > 0
        key = issued.tobytes()
        if key not in self._timelines:
            self._timelines[key] = self._timeline(issued)
        entries = self._timelines[key]
        if entries is None:                                  # op by op
            d, h = time_s[self.slots], host[self.slots]
        else:
            d, h = entries[0] @ time_s, entries[1] @ host
        return float(np.max(np.cumsum(h) + np.cumsum(d[::-1])[::-1]))

    def _timeline(self, issued: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The timeline's entries as rows of counts per timing: each issued op alone, then the
        run of ops the host does not issue after it (the ops before the first issued one first);
        the device time's rows and the host time's (the issued ops' rows only). None where more
        than `ENTRIES` ops are issued."""
        where = np.nonzero(issued[self.slots])[0]
        if len(where) > self.ENTRIES:
            return None
        cuts = [*where.tolist(), len(self.slots)]
        device = np.zeros((2 * len(where) + 1, self.width))
        device[0] = np.bincount(self.slots[:cuts[0]], minlength=self.width)
        for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
            device[2 * j + 1, self.slots[a]] = 1.0
            device[2 * j + 2] = np.bincount(self.slots[a + 1:b], minlength=self.width)
        host = np.zeros_like(device)
        host[1::2] = device[1::2]
        return device, host


__all__ = ["Layout", "LayoutCost", "OpShare", "all_to_all_bytes", "check_model", "expert_fraction", "layout_of",
           "moe_of", "stage_of"]
