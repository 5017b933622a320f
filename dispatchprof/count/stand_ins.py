"""How the counter runs ops whose fake/meta kernel refuses a call the CPU kernel runs, or runs it
slowly.

torch 2.13's meta kernel of ``aten._grouped_mm`` (the default experts path of transformers 5
MoE models) accepts bfloat16 operands only, while the CPU kernel multiplies float32 too: a
float32 MoE model built on fake or meta tensors cannot run its experts, with or without the
counter. On fake and meta tensors the counter runs such a call on bfloat16 casts of its
operands and casts the output back to the dtype the CPU kernel returns; the output has the
shape and dtype a real run gives and no values (fake and meta tensors have none). Real tensors
run the op unchanged, and the count is the op's formula either way, so real = fake = meta.

MoE routing is decided by values that fake and meta tensors lack; the grouped product's count
therefore takes the routing assumption of ``op_formulas.moe`` (balanced top-k: the token-expert
pairs spread over min(experts, pairs) experts), on every tensor kind. OpCounter warns with
`ROUTING_ASSUMPTION` at the end of each count that ran a grouped product on fake or meta tensors.

``aten._ctc_loss`` (the CTC loss of Wav2Vec2-style models) has no fake kernel: its ``log_alpha``
output is [batch, T, 2 * max(target_lengths) + 1], a shape set by the target lengths' values.
Where the log-probabilities are fake or meta and the target lengths have values (a real CPU
tensor, as the labels a user passes, or a list of ints), the counter returns empty outputs of the
shapes and dtype the CPU kernel allocates; with valueless target lengths the call runs unchanged
(and fails as it does without the counter).

Some fake and meta kernels return another memory layout than the CPU kernel: the gradient of
``aten.native_layer_norm_backward``, ``aten._log_softmax_backward_data`` and ``aten.mse_loss_backward``
follows an input's strides on fake and meta tensors, while the CPU kernels allocate it contiguous;
batch norm's output and input gradient take the input's suggested memory format on the CPU
(contiguous unless the input is channels-last). The
model's next ``view`` then needs a ``clone`` on fake and meta tensors that the real run does not
make (Swin, MaxViT, Wav2Vec2's CTC head, PatchTST). On fake and meta tensors the counter returns those
gradients contiguous (`CONTIGUOUS_AS_CPU`), as the CPU kernel does, so the op stream that follows
is the real one; the re-layout is the counter's, not the model's, and is not counted.

``aten.mkldnn_rnn_layer_backward`` (the LSTM/GRU backward on CPU) returns the gradients of the two
biases as two tensors on the CPU, but as one tensor twice on fake and meta tensors; autograd then
copies the shared one into the second bias's gradient (a ``new_empty_strided`` + ``copy_`` per
layer the real run does not make). The counter returns the second as a tensor of its own
(`SEPARATE_AS_CPU`).

``aten.convolution`` and ``aten.convolution_backward`` on meta tensors return contiguous outputs (the
meta kernel has no device to choose a backend by), while the CPU's convolution kernels (oneDNN and
the slow 2-D one) lay the output, and the input and weight gradients, out channels-last where the
input or the weight is channels-last (4-D: ``channels_last``, 5-D: ``channels_last_3d``); fake
tensors already follow the CPU rule. A model whose activations are channels-last (SegFormer's
depthwise convolutions after a permute) then copies on meta where the CPU does not. On meta tensors
the counter returns those outputs in the CPU's format (`conv_layout_as_cpu`).

``aten._unsafe_view`` (every ``linear`` and ``matmul`` of a 3-d input ends with one) is the one
op fake tensors never serve from their dispatch cache: each call runs the meta kernel in full, a
tenth of a count of a transformers decoder. It is ``aten.view`` without autograd's view
relation, which the counter's mode (below autograd) never sees: the same view of the same
storage, refused by the same strides. On fake tensors the counter runs it as ``aten.view``,
which the cache serves (`view_on_fake`); the op is recorded as ``_unsafe_view``, as before.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor

from dispatchprof.count.tensors import tensor_kind

aten = torch.ops.aten

ROUTING_ASSUMPTION = (
    "dispatchprof: mixture-of-experts routing has no values on fake or meta tensors; aten._grouped_mm "
    "is counted under the balanced top-k routing assumption (every token-expert pair routed, the pairs "
    "spread over min(experts, pairs) experts); its MULT and MACs do not depend on routing "
    "(docs/zoo.md, 'MoE routing')")


class RoutingAssumptionWarning(UserWarning):
    """Issued when a count depends on the MoE routing assumption (`ROUTING_ASSUMPTION`)."""


class RoutingAssumed:
    """How many grouped products have run under the routing assumption, in this process. OpCounter
    reads it on entry and exit and warns once per count that used the assumption, from the user's
    ``with`` line, so each count's warning has its own call site (Python shows a warning once per
    call site: warned from here, only a process's first count would show it)."""

    calls = 0


def in_format(out: Any, fmt: torch.memory_format, positions: Any) -> Any:
    """``out`` (a tensor, or a tuple whose outputs at ``positions`` are re-laid) in memory format ``fmt``."""
    if isinstance(out, torch.Tensor):
        return out.contiguous(memory_format=fmt)
    return type(out)(o.contiguous(memory_format=fmt) if i in positions and isinstance(o, torch.Tensor)
                     else o for i, o in enumerate(out))

def _valueless(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and tensor_kind(t) != "real"


def grouped_mm_in_bf16(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` run on bf16 casts of its operands where they have no values (fake or meta), the result
    cast back to the dtype a real run returns; counted in `RoutingAssumed` (OpCounter warns)."""
    def run(a: torch.Tensor, b: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not _valueless(a):
            return call(a, b, *args, **kwargs)
        RoutingAssumed.calls += 1
        if a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16:
            return call(a, b, *args, **kwargs)
        out_dtype = kwargs.get("out_dtype") or (args[2] if len(args) > 2 and args[2] is not None else a.dtype)
        bf = torch.bfloat16
        args = tuple(x.to(bf) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in args)
        kwargs = {k: v.to(bf) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                  for k, v in kwargs.items() if k != "out_dtype"}
        return call(a.to(bf), b.to(bf), *args, **kwargs).to(out_dtype)

    return run


def _length_values(lengths: Any) -> list[int] | None:
    """The target lengths as ints, or None where they have no values (a fake or meta tensor)."""
    if isinstance(lengths, torch.Tensor):
        return None if _valueless(lengths) else [int(v) for v in lengths.reshape(-1).tolist()]
    return [int(v) for v in lengths]


def ctc_loss_shapes(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` where log_probs has values or the target lengths have none; else the CPU kernel's
    outputs without values: neg_log_likelihood [N] and log_alpha [N, T, 2 * max(target_lengths) + 1]
    (log_probs [T, N, C]), both in log_probs' dtype."""
    def run(log_probs: torch.Tensor, targets: Any, input_lengths: Any, target_lengths: Any,
            *args: Any, **kwargs: Any) -> Any:
        lengths = _length_values(target_lengths) if _valueless(log_probs) else None
        if lengths is None or log_probs.dim() != 3:
            return call(log_probs, targets, input_lengths, target_lengths, *args, **kwargs)
        steps, batch = log_probs.shape[0], log_probs.shape[1]
        states = 2 * max(lengths, default=0) + 1
        return log_probs.new_empty((batch,)), log_probs.new_empty((batch, steps, states))

    return run


#: packet -> (the outputs its CPU kernel lays out by rule, the argument whose suggested memory
#: format it takes, or None for contiguous). Their fake and meta kernels follow an input's strides
#: instead; tests/test_stand_in_layouts.py compares the three kernels.
CONTIGUOUS_AS_CPU: dict[Any, tuple[tuple[int, ...], int | None]] = {
    aten.native_layer_norm_backward: ((0,), None),
    aten._log_softmax_backward_data: ((0,), None),
    aten.mse_loss_backward: ((0,), None),
    aten.native_batch_norm: ((0,), 0),               # the input's suggested format (channels-last kept)
    aten.native_batch_norm_backward: ((0,), 1),
}


def contiguous_as_cpu(rule: tuple[tuple[int, ...], int | None]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper laying the outputs at ``rule[0]`` (all of a single output: (0,)) out contiguous, or in
    the suggested memory format of argument ``rule[1]``, where the first argument has no values;
    real tensors run unchanged."""
    from torch._prims_common import suggest_memory_format

    positions, like = rule

    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if not _valueless(args[0]):
                return out
            fmt = torch.contiguous_format if like is None else suggest_memory_format(args[like])
            return in_format(out, fmt, positions)
        return run
    return wrap


#: packet -> (i, j): its CPU kernel returns outputs i and j as separate tensors, its fake and meta
#: kernels as one tensor twice.
SEPARATE_AS_CPU = {aten.mkldnn_rnn_layer_backward: (3, 4)}


def separate_as_cpu(pair: tuple[int, int]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper giving output ``pair[1]`` a tensor of its own where it is output ``pair[0]`` (fake or
    meta tensors); real tensors run unchanged."""
    i, j = pair

    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if out[i] is None or out[i] is not out[j]:
                return out
            out = list(out)
            out[j] = torch.empty_like(out[i])
            return tuple(out)
        return run
    return wrap


def cpu_conv_format(input: torch.Tensor, weight: torch.Tensor) -> torch.memory_format | None:
    """The memory format of the CPU convolution kernels' outputs: channels-last where the input or the
    weight suggests it (4-D ``channels_last``, 5-D ``channels_last_3d``), else None (contiguous)."""
    from torch._prims_common import suggest_memory_format

    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(input.dim())
    if fmt is None or fmt not in (suggest_memory_format(input), suggest_memory_format(weight)):
        return None
    return fmt


def conv_layout_as_cpu(outputs: tuple[int, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper laying the outputs at ``outputs`` (all of a single output: (0,)) out in
    `cpu_conv_format` of the call's input and weight (``convolution``'s arguments 0 and 1,
    ``convolution_backward``'s 1 and 2) where they are meta tensors; other kinds run unchanged."""
    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            first = 1 if isinstance(out, tuple) else 0
            x, w = args[first], args[first + 1]
            if x.device.type != "meta":
                return out
            fmt = cpu_conv_format(x, w)
            return out if fmt is None else in_format(out, fmt, outputs)
        return run
    return wrap


#: packet -> the outputs its CPU kernels lay out channels-last by `cpu_conv_format` (meta tensors)
CONV_LAYOUT_AS_CPU = {aten.convolution: (0,), aten.convolution_backward: (0, 1)}


def view_on_fake(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` (``aten._unsafe_view``) run as ``aten.view`` where its input is a fake tensor
    (module docstring); other kinds run unchanged."""
    view = aten.view.default._op

    def run(*args: Any, **kwargs: Any) -> Any:
        self = args[0] if args else kwargs.get("self")
        return (view if isinstance(self, FakeTensor) else call)(*args, **kwargs)
    return run


#: packet -> wrapper of its callable: how the counter runs the packet's calls.
STAND_INS: dict[Any, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    aten._grouped_mm: grouped_mm_in_bf16, aten._ctc_loss: ctc_loss_shapes, aten._unsafe_view: view_on_fake,
    **{packet: contiguous_as_cpu(rule) for packet, rule in CONTIGUOUS_AS_CPU.items()},
    **{packet: separate_as_cpu(pair) for packet, pair in SEPARATE_AS_CPU.items()},
    **{packet: conv_layout_as_cpu(outs) for packet, outs in CONV_LAYOUT_AS_CPU.items()}}


def runner(packet: Any, call: Callable[..., Any]) -> Callable[..., Any]:
    """The callable the counter runs for ``packet``: ``call`` itself, or its stand-in."""
    wrap = STAND_INS.get(packet)
    return call if wrap is None else wrap(call)
