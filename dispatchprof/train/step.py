"""A training step at scale: the counted micro-batch step (dispatchprof.train.count) split over
the GPUs of a layout (dispatchprof.train.layout), its communication placed where the frameworks
issue it and overlapped as they overlap it. Seconds per GPU; docs/training.md has the model.

Per micro-batch on the slowest pipeline stage (the last: its layers plus the LM head and loss):

    F = fwd_layers / (pp cp) + fwd_other / (tp cp)       (the counted times already split by tp)
    B = bwd_layers / (pp cp) + bwd_other / (tp cp)
    R = full: fwd_layers / (pp cp); selective: fwd_attention / (pp cp); op: (fwd_linears / 2 +
        fwd_layers - fwd_linears - fwd_attention) / (pp cp), torchtitan's policy that saves the
        output of every other matmul and of attention; none: 0
    T = tp_comm / (pp cp)  (two all-reduces per block, forward and backward, exposed; full
        recompute runs the forward's again; with tp_overlap, as Megatron's userbuffers overlap
        them with the block's GEMMs, only what exceeds the layers' compute, recompute included),
        at the TP group's link as every other collective of the step (`tp_link_scale`)
    P = 2 vp sends of the stage's output (micro_batch x seq/cp x hidden x 2 bytes / tp) when pp > 1;
        without sequence parallelism each received tensor is then all-gathered over the TP group
        (Megatron-LM's scatter/gather optimization, `pp_gather_s`)
    C = cp: all-gather of K and V forward and reduce-scatter of their gradients backward, per
        layer, overlapped with that layer's attention (`exposed_s`)
    t_micro = F + B + R + T + P + C
    pipeline = (m + (pp-1)/vp) t_micro                   (dispatchprof.train.schedule)

Data parallel over the N = dp x cp ranks that hold the same weights (`TrainLayout.replicas`), with
G = the GPU's parameters (`memory` module's worst stage):

    zero 0, 1, 2: the gradients (reduce dtype) all-reduced (ZeRO 1-2: reduce-scattered, and the
        weights all-gathered after the optimizer, the same bytes) in one bucket per layer during the
        last micro-batch's backward; the weights' all-gather (ZeRO 1-2) overlaps the next forward
    zero 3 (FSDP): per layer and micro-batch, an all-gather of the bf16 weights before its forward
        and its backward, and a reduce-scatter of its gradients after its backward, prefetched one
        layer ahead; the other parameters are gathered whole, exposed
    optimizer = counted AdamW time x OPTIMIZER_WIDTH x G / params, divided by N for ZeRO >= 1

    step = pipeline + exposed data-parallel communication + optimizer + host

tokens/s/GPU = global_batch x seq_len / step / devices. MFU = model FLOPs / (step x devices x
bf16 matrix peak), model FLOPs per token = 6 N' + 12 L h s (N' = parameters less the input
embedding lookup, unless tied to the LM head; L layers, h hidden, s sequence length: PaLM's
and torchtitan's definition, attention not halved for causality). Counted MFU uses the counted
FLOPs (forward + backward + recompute + optimizer) instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dispatchprof.sim.device import Device
from dispatchprof.units import nbytes
from dispatchprof.sim.placement import placement_of
from dispatchprof.count.layer_repeat import LayerRepeatError
from dispatchprof.train.count import CountedStep, build, count_step
from dispatchprof.train.depth import repeated_step
from dispatchprof.train.layout import TrainLayout, check_layout, stage_layers
from dispatchprof.sim.links import SCALE_OUT_GB_PER_S, Links, links_of, ring_allreduce_s, ring_gather_s, send_s
from dispatchprof.train.memory import PARAM_BYTES, Memory, memory_per_gpu
from dispatchprof.train.schedule import bubble_fraction, exposed_s, pipeline_s

#: The counted AdamW step runs on bf16 states; fp32 master weights, momentum and variance move
#: twice the bytes (every op of the step is elementwise and memory-bound).
OPTIMIZER_WIDTH = 2
#: Bytes per gradient element reduced: FSDP2 reduces in fp32 (torchtitan's default
#: mixed_precision_reduce), Megatron's data parallel in the weights' bf16 (grad_reduce_in_fp32 off).
REDUCE_BYTES = {0: 2, 1: 2, 2: 2, 3: 4}
#: NVLink 4 and later (900 GB/s both ways and up: H100, H200, B200, GB200) are switched by
#: NVSwitches that reduce in the switch (NVLink SHARP): nccl-tests' 8x H100 all_reduce bus bandwidth,
#: 460-480 GB/s (dispatchprof.sim.links, nvlink4), is above the 450 GB/s one-way link, so a TP
#: all-reduce inside such a node keeps the datasheet rate; earlier NVLink (A100: 600) reaches
#: `BUS_EFFICIENCY` of it, as the step's other collectives.
IN_SWITCH_REDUCTION_GB_PER_S = 900


@dataclass(frozen=True)
class TrainingResult:
    """One training step of a layout: its time, breakdown (seconds per GPU), throughput,
    MFU, energy and memory per GPU."""

    model: str
    device: str
    layout: TrainLayout
    params: int
    step_s: float
    breakdown: dict[str, float]
    tokens_per_s_per_gpu: float
    mfu: float
    counted_mfu: float
    model_flops_per_token: float
    energy_per_step_j: float
    memory: Memory
    capacity_bytes: float | None
    bubble_fraction: float
    counted: CountedStep = field(repr=False)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else self.memory.total <= self.capacity_bytes

    def days_for(self, tokens: float) -> float:
        """Days to train ``tokens`` tokens."""
        return tokens / (self.tokens_per_s_per_gpu * self.layout.devices) / 86400

    def over_capacity(self) -> str:
        """One line saying by how much the memory is over, and the largest component; '' if it fits."""
        if self.fits is not False:
            return ""
        name, size = max(self.memory.items(), key=lambda kv: kv[1])
        return (f"does not fit: {nbytes(self.memory.total)} per GPU needed, {nbytes(self.capacity_bytes)} "
                f"on {self.device} ({nbytes(self.memory.total - self.capacity_bytes)} over; largest: {name} "
                f"{nbytes(size)}); try --recompute full, more --zero, --tp or --pp, or a smaller --micro-batch")


def profile_training(model: Any, device: Any, layout: TrainLayout, *, runtime: str = "compiled",
                     counted: CountedStep | None = None, name: str | None = None,
                     scale_out_gb_per_s: float = SCALE_OUT_GB_PER_S, few_layers: bool = True) -> TrainingResult:
    """Simulate one training step of ``model`` (a catalog name, config path or hub id) on
    ``layout.devices`` GPUs like ``device`` (module docstring). ``counted`` reuses a count of the
    same model, micro-batch, sequence length, tp and fp8. ``scale_out_gb_per_s``: each GPU's
    network bandwidth across nodes, GB/s one way (default one 400 Gb/s NIC per GPU, as DGX H100;
    a DGX A100 has one 200 Gb/s HDR NIC per GPU: 25). ``few_layers``: a decoder of identical
    layers is counted with 2, 3 and 4 layers and its step extended to full depth
    (dispatchprof.train.depth), the full depth counted where that does not apply or its check fails."""
    if not scale_out_gb_per_s > 0:
        raise ValueError(f"scale_out_gb_per_s must be > 0 GB/s, got {scale_out_gb_per_s!r}")
    dev = placement_of(device).devices[0]
    if counted is None:
        net = build(model)
        cfg = net.config
        layers = int(getattr(cfg, "num_hidden_layers", 0) or getattr(cfg, "n_layer", 0))
        check_layout(layout, layers, int(cfg.num_attention_heads))
        counted = counted_step(net, name or str(model), layout, dev, runtime=runtime, few_layers=few_layers)
    check_layout(layout, counted.layers, counted.heads)
    links = links_of(dev, scale_out_gb_per_s) if layout.devices > 1 else Links(1.0, 0.0, 1.0, 0.0)
    return split_step(counted, dev, layout, links)


def counted_step(net: Any, name: str, layout: TrainLayout, dev: Device, *, runtime: str = "compiled",
                 few_layers: bool = True) -> CountedStep:
    """The counted micro-batch step of ``net`` for ``layout`` on ``dev``: from few layers where
    they repeat (`profile_training`'s ``few_layers``), else counted at full depth."""
    options = dict(tp=layout.tp, fp8=layout.fp8, runtime=runtime)
    if few_layers:
        try:
            return repeated_step(net, name, layout.micro_batch, layout.seq_len, dev, **options)
        except LayerRepeatError:
            pass
    return count_step(net, name, layout.micro_batch, layout.seq_len, dev, **options)


def split_step(s: CountedStep, dev: Device, lay: TrainLayout, links: Links) -> TrainingResult:
    """The step of ``lay`` from a counted micro-batch step (module docstring)."""
    fwd, bwd, opt = s.phases["forward"], s.phases["backward"], s.phases["optimizer"]
    tp, pp, cp, dp, vp, m = lay.tp, lay.pp, lay.cp, lay.dp, lay.vp, lay.grad_accum
    share = stage_layers(s.layers, pp, vp) / s.layers      # the slowest stage's share of the layers: 1/pp
    stage = cp / share
    f_layers, b_layers = fwd.layer_s / stage, bwd.layer_s / stage
    f = f_layers + fwd.other_s / (tp * cp)
    b = b_layers + bwd.other_s / (tp * cp)
    op = (fwd.layer_s - fwd.linear_s / 2 - fwd.attention_s) / stage
    recompute = {"none": 0.0, "selective": fwd.attention_s / stage, "op": op, "full": f_layers}[lay.recompute]
    again = fwd.tp_comm_s if lay.recompute == "full" else 0.0      # the recomputed forward's collectives
    tp_comm = (fwd.tp_comm_s + bwd.tp_comm_s + again) / stage * tp_link_scale(dev, lay, links)
    if lay.tp_overlap:                               # hidden under the layers' compute, unless longer
        tp_comm = max(0.0, tp_comm - f_layers - b_layers - recompute)
    act = lay.micro_batch * lay.seq_len / cp * s.hidden * PARAM_BYTES
    bw, lat = links.link(*lay.group(tp * cp * dp, pp))
    p2p = 2 * vp * (send_s(act / tp, bw, lat) + pp_gather_s(act, lay, links)) if pp > 1 else 0.0
    cp_comm = _cp_comm(s, lay, links, fwd.attention_s / stage)
    t_micro = f + b + recompute + tp_comm + p2p + cp_comm
    pipe = pipeline_s(m, pp, vp, t_micro)
    gpu_params = s.layer_params * share / tp + s.other_params / tp
    dp_exposed = _dp_comm(s, lay, links, gpu_params, f_layers, b_layers, m)
    shard = lay.replicas if lay.zero >= 1 else 1
    optimizer = (opt.layer_s + opt.other_s) * OPTIMIZER_WIDTH * gpu_params / s.params / shard
    host = (fwd.host_s + bwd.host_s) * m / stage + opt.host_s
    step = pipe + dp_exposed + optimizer + host
    breakdown = {"compute": m * (f + b), "recompute": m * recompute, "tp comm": m * tp_comm,
                 "cp comm": m * cp_comm, "pp p2p": m * p2p, "bubble": pipe - m * t_micro,
                 "dp comm exposed": dp_exposed, "optimizer": optimizer, "host": host}
    tokens = lay.global_batch * lay.seq_len
    embedding = 0 if s.embedding_params >= s.other_params else s.embedding_params   # tied: the head's FLOPs stay
    per_token = 6 * (s.params - embedding) + 12 * s.layers * s.hidden * lay.seq_len
    peak = dev.peak_flops("bf16", True)
    # NB: "op" counts half the forward's FLOPs outside attention (its matmuls dominate them)
    extra = {"none": 0, "selective": fwd.attention_flops, "op": (fwd.flops - fwd.attention_flops) // 2,
             "full": fwd.flops}[lay.recompute]
    counted_flops = (fwd.flops + bwd.flops + extra) * lay.global_batch / lay.micro_batch + opt.flops * dp
    dynamic = (fwd.dynamic_j + bwd.dynamic_j) * m / stage + opt.dynamic_j * gpu_params / s.params / shard
    energy = lay.devices * (dynamic + dev.static_power_w * step)
    layer_input = lay.micro_batch * lay.seq_len * s.hidden * PARAM_BYTES
    mem = memory_per_gpu(gpu_params, s.layer_params / s.layers, s.layers, s.activation_bytes, dp=lay.replicas, tp=tp,
                         pp=pp, cp=cp, vp=vp, m=m, zero=lay.zero, recompute=lay.recompute, layer_input_bytes=layer_input,
                         reduce_bytes=REDUCE_BYTES[lay.zero], share=share, head_bytes=s.head_bytes,
                         op_saved_bytes=s.op_saved_bytes)
    cap = dev.memory_capacity_gb * 1e9 if dev.memory_capacity_gb else None
    return TrainingResult(s.model, dev.name, lay, s.params, step, breakdown, tokens / step / lay.devices,
                          per_token * tokens / step / lay.devices / peak,
                          counted_flops / step / lay.devices / peak, per_token, energy, mem, cap,
                          bubble_fraction(m, pp, vp) if pp > 1 else 0.0, s)


def tp_link_scale(dev: Device, lay: TrainLayout, links: Links) -> float:
    """The factor that puts the counted step's tensor-parallel collectives on the TP group's link.
    The simulator times each all-reduce at the profile's one-way interconnect rate
    (``interconnect_gb_per_s / 2``: `dispatchprof.sim.timing.allreduce`); the step times every
    other collective at `Links` (dispatchprof.sim.links: its ``BUS_EFFICIENCY`` applied, scale-out
    for a group that spans nodes), so the TP collectives are scaled by the ratio of the two rates.
    Inside a node whose NVLink reduces in the switch (`IN_SWITCH_REDUCTION_GB_PER_S`) the datasheet
    rate stands (factor 1). NB: the per-collective latency is scaled with the bandwidth term
    (microseconds beside milliseconds)."""
    if lay.tp == 1:
        return 1.0
    spans, per_node = lay.group(1, lay.tp)
    if not spans and dev.interconnect_gb_per_s >= IN_SWITCH_REDUCTION_GB_PER_S:
        return 1.0
    bw, _ = links.link(spans, per_node)
    return dev.interconnect_gb_per_s / 2 * 1e9 / bw


def pp_gather_s(act: float, lay: TrainLayout, links: Links) -> float:
    """Seconds of the all-gather that follows each pipeline receive of ``act`` bytes (one
    micro-batch's stage output) without sequence parallelism: Megatron-LM sends each tensor-parallel
    rank 1/tp of the replicated activation across the stage boundary and all-gathers it over the TP
    group after the receive (``scatter_gather_tensors_in_pipeline``: Narayanan et al. 2021,
    arXiv 2104.04473, section 4.1; megatron/p2p_communication.py, ``_communicate``: the receive is
    followed by ``gather_split_1d_tensor``, on the critical path). With sequence parallelism the
    tensor is already split by sequence and nothing is gathered; 0 then and for tp = 1."""
    if lay.sequence_parallel or lay.tp == 1:
        return 0.0
    bw, lat = links.link(*lay.group(1, lay.tp))
    return ring_gather_s(act, lay.tp, bw, lat)


def fsdp_layer_bytes(layer_params: float, dp: int) -> tuple[float, float]:
    """Bytes each GPU sends for one layer of ``layer_params`` parameters (its tensor-parallel
    slice) under FSDP over ``dp`` ranks: the all-gather of its bf16 weights,
    ``(dp-1)/dp * layer_params * 2``, and the reduce-scatter of its gradients in the reduce dtype,
    ``(dp-1)/dp * layer_params * 4`` (ring algorithms: each rank sends all but its own shard)."""
    part = (dp - 1) / dp * layer_params
    return part * PARAM_BYTES, part * REDUCE_BYTES[3]


def _cp_comm(s: CountedStep, lay: TrainLayout, links: Links, attention: float) -> float:
    """Context parallelism per micro-batch: K and V of each layer all-gathered forward and their
    gradients reduce-scattered backward over the cp group, overlapped with its attention."""
    if lay.cp == 1:
        return 0.0
    kv = 2 * lay.micro_batch * lay.seq_len * s.hidden * PARAM_BYTES / lay.tp    # upper bound: K, V as wide as Q
    bw, lat = links.link(*lay.group(lay.tp, lay.cp))
    layers = stage_layers(s.layers, lay.pp, lay.vp)
    per_layer = ring_gather_s(kv, lay.cp, bw, lat)
    return 2 * exposed_s(per_layer, attention / max(layers, 1), layers)


def _dp_comm(s: CountedStep, lay: TrainLayout, links: Links, gpu_params: float, f_layers: float,
             b_layers: float, m: int) -> float:
    """Exposed data-parallel communication per step (module docstring)."""
    dp = lay.replicas
    if dp == 1:
        return 0.0
    bw, lat = links.link(*lay.group(lay.tp, dp))
    layers = stage_layers(s.layers, lay.pp, lay.vp)
    layer_params = s.layer_params / s.layers / lay.tp
    f_l, b_l = f_layers / layers, b_layers / layers
    if lay.zero >= 3:
        sent_gather, sent_scatter = fsdp_layer_bytes(layer_params, dp)
        gather, scatter = sent_gather / bw + lat, sent_scatter / bw + lat
        other = ring_gather_s(s.other_params / lay.tp * PARAM_BYTES, dp, bw, lat)
        per_micro = other + exposed_s(gather, f_l, layers) + exposed_s(gather + scatter, b_l, layers) + other
        return m * per_micro
    grads = ring_allreduce_s(gpu_params * REDUCE_BYTES[lay.zero], dp, bw, lat)
    if lay.zero == 0:
        return exposed_s(grads / layers, b_l, layers)
    half = grads / 2                                  # reduce-scatter in backward, all-gather of weights after
    return exposed_s(half / layers, b_l, layers) + exposed_s(half / layers, f_l, layers)
