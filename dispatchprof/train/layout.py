"""A training layout: how many GPUs, how the model and the batch are split over them.

``devices = dp * tp * pp * cp``; ranks are numbered tp fastest, then cp, then dp, then pp
(Megatron's default order), so a tp (and cp) group lies inside a node when it fits in one, a
dp group spans nodes when tp * cp * dp > gpus_per_node, and pipeline neighbours are
tp * cp * dp ranks apart. A step runs ``global_batch`` sequences: each of the dp replicas runs
``grad_accum = global_batch / (micro_batch * dp)`` micro-batches of ``micro_batch`` sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: none; selective: the attention core again (Megatron); op: every other matmul and every op that is
#: neither a matmul nor attention again (torchtitan's per-op selective checkpointing); full: each
#: layer's forward again.
Recompute = Literal["none", "selective", "op", "full"]
Schedule = Literal["1f1b", "interleaved"]
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class TrainLayout:
    """One training configuration (sizes are counts of GPUs or sequences)."""

    devices: int
    micro_batch: int
    global_batch: int
    seq_len: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    zero: int = 0                    # 0: plain data parallel (DDP); 1, 2, 3: ZeRO stages (3 = FSDP)
    schedule: Schedule = "1f1b"
    vp: int = 1                      # model chunks per pipeline stage (interleaved 1F1B)
    recompute: Recompute = "none"
    fp8: bool = False
    gpus_per_node: int = 8
    tp_overlap: bool = False         # TP collectives overlapped with the block's GEMMs (Megatron/TE userbuffers)
    sequence_parallel: bool = True   # False: Megatron's tensor parallelism without sequence parallelism

    @property
    def dp(self) -> int:
        return self.devices // (self.tp * self.pp * self.cp)

    @property
    def replicas(self) -> int:
        """Ranks that hold the same slice of the weights: the data-parallel ranks times the
        context-parallel ranks (tp apart, cp fastest). Gradients are reduced over them and ZeRO /
        FSDP shard over them: Megatron's data-parallel group with context parallelism, torchtitan's
        FSDP mesh ``dp_shard_cp``."""
        return self.dp * self.cp

    @property
    def grad_accum(self) -> int:
        """Micro-batches per replica per step."""
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def nodes(self) -> int:
        return max(1, self.devices // self.gpus_per_node)

    def spans_nodes(self, stride: int, size: int) -> bool:
        """Whether a group of ``size`` ranks ``stride`` apart crosses a node boundary."""
        return size > 1 and stride * size > self.gpus_per_node

    def ranks_per_node(self, stride: int, size: int) -> int:
        """Ranks of a group of ``size`` ranks ``stride`` apart that share a node (at least 1)."""
        return max(1, min(size, self.gpus_per_node // stride))

    def group(self, stride: int, size: int) -> tuple[bool, int]:
        """(spans nodes, ranks per node) of a group: the arguments of `Links.link`."""
        return self.spans_nodes(stride, size), self.ranks_per_node(stride, size)


def stage_layers(layers: int, pp: int, vp: int) -> int:
    """Layers on the slowest pipeline stage: ``vp`` chunks of ``ceil(layers / (pp * vp))`` layers
    (a split that does not divide evenly leaves the others a layer short)."""
    return -(-layers // (pp * vp)) * vp


def check_layout(lay: TrainLayout, layers: int, heads: int) -> TrainLayout:
    """``lay`` itself, or a ValueError naming what is wrong and what is allowed."""
    for name in ("devices", "micro_batch", "global_batch", "seq_len", "tp", "pp", "cp", "vp", "gpus_per_node"):
        v = getattr(lay, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
    if lay.zero not in ZERO_STAGES:
        raise ValueError(f"zero must be one of {ZERO_STAGES}, got {lay.zero!r}")
    if lay.recompute not in get_args(Recompute):
        raise ValueError(f"recompute must be one of {get_args(Recompute)}, got {lay.recompute!r}")
    if lay.schedule not in get_args(Schedule):
        raise ValueError(f"schedule must be one of {get_args(Schedule)}, got {lay.schedule!r}")
    model = lay.tp * lay.pp * lay.cp
    if lay.devices % model:
        raise ValueError(f"tp x pp x cp = {lay.tp} x {lay.pp} x {lay.cp} = {model} does not divide the "
                         f"{lay.devices} devices; their product times the data-parallel size must equal the "
                         f"device count")
    if lay.global_batch % (lay.micro_batch * lay.dp):
        raise ValueError(f"global batch {lay.global_batch} is not divisible by micro-batch x data-parallel size = "
                         f"{lay.micro_batch} x {lay.dp} = {lay.micro_batch * lay.dp}")
    if lay.pp * lay.vp > layers:
        raise ValueError(f"pp x vp = {lay.pp * lay.vp} is larger than the model's {layers} layers")
    if lay.schedule == "1f1b" and lay.vp != 1:
        raise ValueError(f"vp={lay.vp} needs schedule 'interleaved'")
    if lay.schedule == "interleaved" and (lay.pp == 1 or lay.grad_accum % lay.pp):
        raise ValueError(f"the interleaved schedule needs pp > 1 and micro-batches per step ({lay.grad_accum}) "
                         f"divisible by pp ({lay.pp})")
    if heads % lay.tp:
        allowed = ", ".join(str(n) for n in range(1, heads + 1) if heads % n == 0)
        raise ValueError(f"tp={lay.tp} does not divide the model's {heads} attention heads; allowed: {allowed}")
    if lay.seq_len % lay.cp:
        raise ValueError(f"cp={lay.cp} does not divide seq_len {lay.seq_len}")
    return lay
