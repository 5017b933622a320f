"""Memory per GPU of a training layout, in bytes.

Model states follow the ZeRO paper's mixed-precision accounting (Rajbhandari et al. 2020,
section 3.1): per parameter ``PARAM_BYTES`` (bf16 weights) + ``GRAD_BYTES`` (bf16 gradients) +
``OPTIMIZER_BYTES`` (AdamW: fp32 master weights, momentum and variance), 16 bytes in all. On one GPU
the parameters are its pipeline stage's share of the layers plus the other parameters
(embeddings, LM head: counted whole on every stage, the worst stage's bound), split over tp.
ZeRO-1 divides the optimizer state by ``dp``, ZeRO-2 the gradients too, ZeRO-3 (FSDP) the weights
too; ``dp`` here is every rank that holds the same weights, the data-parallel times the
context-parallel ranks (`TrainLayout.replicas`).

Activations are counted: the forward's peak live bytes for one micro-batch of the whole model
(``activation_bytes``), divided by pp (a stage's layers), tp (tensor and sequence parallel) and cp,
times the micro-batches a stage holds at once: 1F1B's first stage holds ``min(pp, m)`` of them,
interleaved 1F1B ``(1 + (pp-1)/(pp*vp))`` times that (Korthikanti et al. 2022, section 4.2.3).
Full recompute keeps each layer's input (micro_batch x seq x hidden x 2 bytes) and, at the
largest, one layer's activations or what the forward's ops outside the layers wrote
(``head_bytes``: the embedding output, the LM head's logits, the loss's upcast and log-softmax,
which the head's backward holds while it runs), split like the activations; selective recompute re-runs the attention core, which a fused (flash) attention
already does not store, so it keeps what no recompute keeps. Per-op recompute (torchtitan's
policy) keeps each layer's input, every other matmul output and the attention outputs
(``op_saved_bytes``, counted) and, at the largest, one layer's activations or ``head_bytes``.

Communication buffers: FSDP holds two layers' gathered bf16 weights (the prefetch) and one layer's
unsharded gradients in the reduce dtype; data parallel holds two gradient buckets of
``BUCKET_PARAMS`` parameters in fp32 (Megatron's default bucket). The fragmentation margin is
``FRAGMENTATION`` of all the rest (assumed: PyTorch's caching allocator).
"""

from __future__ import annotations

from dataclasses import dataclass

PARAM_BYTES = 2
GRAD_BYTES = 2
OPTIMIZER_BYTES = 12
BUCKET_PARAMS = 40_000_000
FRAGMENTATION = 0.10


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU by component."""

    params: float
    grads: float
    optimizer: float
    activations: float
    comm_buffers: float
    margin: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.comm_buffers + self.margin

    def items(self) -> list[tuple[str, float]]:
        return [("parameters", self.params), ("gradients", self.grads), ("optimizer", self.optimizer),
                ("activations", self.activations), ("comm buffers", self.comm_buffers), ("margin", self.margin)]


def model_states(params: float, dp: int, zero: int) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of ``params`` parameters on one GPU under ZeRO ``zero``."""
    w, g, o = params * PARAM_BYTES, params * GRAD_BYTES, params * OPTIMIZER_BYTES
    return (w / dp if zero >= 3 else w, g / dp if zero >= 2 else g, o / dp if zero >= 1 else o)


def in_flight(pp: int, m: int, vp: int) -> float:
    """Micro-batches whose activations the first stage holds: min(pp, m), times
    (1 + (pp-1)/(pp*vp)) with interleaving (vp > 1)."""
    held = min(pp, m)
    return held * (1 + (pp - 1) / (pp * vp)) if vp > 1 else float(held)


def memory_per_gpu(params: float, layer_params: float, layers: int, activation_bytes: float, *, dp: int, tp: int,
                   pp: int, cp: int, vp: int, m: int, zero: int, recompute: str, layer_input_bytes: float,
                   reduce_bytes: int, share: float | None = None, head_bytes: float = 0.0,
                   op_saved_bytes: float = 0.0) -> Memory:
    """Memory of one GPU (module docstring); ``params`` is the GPU's parameter count before ZeRO,
    ``layer_params`` one layer's, ``activation_bytes`` one micro-batch's whole-model forward peak,
    ``layer_input_bytes`` one layer's input for one micro-batch (unsplit), ``share`` the stage's
    share of the layers (default 1/pp), ``head_bytes`` what the forward's ops outside the layers
    write for one micro-batch (unsplit), ``op_saved_bytes`` what per-op recompute keeps of all the
    layers for one micro-batch (unsplit)."""
    share = 1 / pp if share is None else share
    w, g, o = model_states(params, dp, zero)
    split = tp * cp
    held = in_flight(pp, m, vp)
    transient = max(activation_bytes / layers, head_bytes)         # one layer's backward, or the head's
    if recompute == "full":
        acts = (layers * share * layer_input_bytes * held + transient) / split
    elif recompute == "op":
        acts = (share * (layers * layer_input_bytes + op_saved_bytes) * held + transient) / split
    else:
        acts = activation_bytes * share / split * held
    if zero >= 3:
        buffers = 2 * layer_params / tp * PARAM_BYTES + layer_params / tp * reduce_bytes
    else:
        buffers = 2 * min(params, BUCKET_PARAMS) * 4 if dp > 1 else 0.0
    rest = w + g + o + acts + buffers
    return Memory(w, g, o, acts, buffers, rest * FRAGMENTATION)
