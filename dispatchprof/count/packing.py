"""nn.TransformerEncoder's padding-mask fast path on tensors without values (meta, fake).

In eval mode without gradients, ``nn.TransformerEncoder(src, src_key_padding_mask=mask)`` packs
the batch into a nested tensor (``aten._nested_tensor_from_mask``: each sequence with its own
length, padding dropped), runs every layer's fused kernel on it
(``aten._transformer_encoder_layer_fwd``) and writes it out padded (``aten.to_padded_tensor``);
``aten._nested_tensor_from_mask_left_aligned`` first checks that every row of the mask keeps a
run of tokens then pads. Those ops read the mask's values, and torch has no meta or fake kernel
for them, nor nested tensors on meta.

Rule: where the source has no values and the mask the user passed to the encoder has values (a
real CPU tensor: sequence lengths are inputs, as token ids are), the counter runs these four ops
itself and records each with its formula (``op_formulas.transformer_fastpath``) on what the real
device holds, so every record (counts, bytes, inputs, shapes) is the real run's:

- the mask check returns what the real kernel returns, from the mask's values;
- the packing returns a stand-in: a tensor without values of the source's shape, which torch's
  own code (the layers' checks) reads as it reads the nested tensor (same dim, dtype, device;
  ``is_nested`` is only read beside masks the packed call does not pass). What the counter
  records for it is its packed form (`Packed`): ``(L_i, E)`` components, their bytes, a storage
  of its own that lives as long as the stand-in;
- each layer's fused kernel returns a stand-in of the same packing; ``to_padded_tensor`` a
  tensor without values of the padded shape.

A mask without values (meta or fake) cannot say the lengths: the mask check stops with
`MaskValuesError`. A stand-in reaching any module but the encoder's layers (a layer that takes
its slow path on the packed batch) stops with `NestedTensorNotSupported`, as the real run does
under the counter. Torch itself is not changed (no kernel is registered).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch import nn
from torch._subclasses import FakeTensor
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

#: The ops of the padding-mask fast path the counter runs itself on tensors without values.
PACKED_OPS = frozenset({"aten._nested_tensor_from_mask_left_aligned", "aten._nested_tensor_from_mask",
                        "aten._transformer_encoder_layer_fwd", "aten.to_padded_tensor"})
#: The ops the counter records on nested tensors (a real run's packed batch); any other refuses them.
NESTED_FAST_PATH_OPS = frozenset({"aten._transformer_encoder_layer_fwd", "aten.to_padded_tensor"})


class MaskValuesError(RuntimeError):
    """nn.TransformerEncoder's padding-mask fast path with a mask without values (meta, fake)."""

    def __init__(self, op: str) -> None:
        super().__init__(
            f"dispatchprof: {op}: nn.TransformerEncoder's padding-mask fast path packs each sequence "
            f"by the values of src_key_padding_mask, which a meta or fake mask does not have; pass the "
            f"mask as a real CPU tensor (meta or fake src is fine), or build the encoder with "
            f"enable_nested_tensor=False to count the padded batch")


class NestedTensorNotSupported(TypeError):
    """Raised when a counted op receives a nested (jagged or strided nested) tensor, except the
    ops of nn.TransformerEncoder's own nested fast path (`NESTED_FAST_PATH_OPS`)."""

    def __init__(self, op: str) -> None:
        super().__init__(f"dispatchprof: nested tensors are not supported (op {op} got a nested tensor); "
                         f"count the padded dense tensor instead (nt.to_padded_tensor(0.0))")


@contextlib.contextmanager
def _no_modes() -> Iterator[None]:
    """No dispatch mode active (fake tensors' included): the counter's own tensors and reads."""
    with _disable_current_modes(), unset_fake_temporarily():
        yield


def without_values(tensors: Any) -> bool:
    """Whether any of ``tensors`` has no values (a meta tensor or a fake tensor)."""
    return any(t.device.type == "meta" or isinstance(t, FakeTensor) for t in tensors)


class Packed(torch.Tensor):
    """What the counter records for a stand-in of a packed batch: a meta tensor of the packed
    rows' elements, read as the real nested tensor reads (``is_nested``, component sizes, no
    strides, one storage of the packed bytes). Never given to torch's own code."""

    __torch_function__ = torch._C._disabled_torch_function_impl
    lengths: list[int]
    width: int

    @property
    def is_nested(self) -> bool:  # type: ignore[override]
        return True

    def stride(self, *args: Any) -> Any:  # type: ignore[override]
        raise RuntimeError("a packed batch has no strides (as a nested tensor)")

    def component_sizes(self) -> _Sizes:
        """Each sequence's [L_i, E], as a nested tensor's ``_nested_tensor_size()`` gives them."""
        return _Sizes([n, self.width] for n in self.lengths)


class _Sizes(list):
    """Component sizes as ``Tensor.tolist`` gives them, without a tensor (the counter reads them
    under fake tensors, where a real tensor's read would be made fake)."""

    def tolist(self) -> list[list[int]]:
        return [list(size) for size in self]


# torch's name for a nested tensor's component sizes, which the counter's tensor reads call
setattr(Packed, "_nested_tensor_size", Packed.component_sizes)


def packed(lengths: list[int], width: int, dtype: torch.dtype) -> Packed:
    """A `Packed` of sequences of ``lengths`` tokens of ``width`` elements."""
    with _no_modes():       # a plain meta tensor, whatever mode is active
        buffer = torch.empty(sum(lengths) * width, dtype=dtype, device="meta")
    out = torch.Tensor._make_subclass(Packed, buffer)
    out.lengths, out.width = list(lengths), width
    return out


def _standin(like: torch.Tensor, shape: Any, form: Packed | None) -> torch.Tensor:
    """A tensor without values of ``shape`` (made by the modes below the counter: fake under
    fake tensors), carrying its packed form."""
    out = like.new_empty(tuple(shape))
    if form is not None:
        out._dispatchprof_packed = form
    return out


def _packed_form(t: Any) -> Packed | None:
    return getattr(t, "_dispatchprof_packed", None) if isinstance(t, torch.Tensor) else None


class Packing:
    """One counter's packing state: the keep masks of the padding-mask encoders running on tensors
    without values (innermost last), and whether a packed batch is between its packing and its
    padding. The forward hooks (`dispatchprof.count.fastpath.FastPathGuard`) push and pop masks;
    the counting mode calls `run` for `PACKED_OPS` on tensors without values."""

    def __init__(self) -> None:
        self.keep: list[torch.Tensor | None] = []
        self.open = 0

    def enter(self, module: nn.Module, args: tuple, kwargs: dict | None) -> bool:
        """At an nn.TransformerEncoder call that may take its fast path: push the rows it keeps
        (``src_key_padding_mask.logical_not()``, as torch computes them) when its source has no
        values and a padding mask is given; None when that mask has no values. True if pushed."""
        given = dict(zip(("src", "mask", "src_key_padding_mask"), args), **(kwargs or {}))
        src, pad = given.get("src"), given.get("src_key_padding_mask")
        if not isinstance(src, torch.Tensor) or not isinstance(pad, torch.Tensor) or not without_values([src]):
            return False
        if without_values([pad]):
            self.keep.append(None)
        else:
            with _no_modes():     # the counter's own read: not an op of the model
                self.keep.append(pad.detach().logical_not())
        return True

    def leave(self) -> None:
        self.keep.pop()
        self.open = 0

    def clear(self) -> None:
        self.keep.clear()
        self.open = 0

    def refuse_slow_path(self, module: nn.Module, inside_encoder: bool) -> None:
        """Raise where ``module`` is called while a packed batch is open, unless it is one of the
        encoder's layers called by the encoder (``inside_encoder``): a slow path on the batch."""
        if self.open and not (inside_encoder and type(module) is nn.TransformerEncoderLayer):
            raise NestedTensorNotSupported(f"{type(module).__name__}'s forward")

    @staticmethod
    def diverts(name: str, args: tuple) -> bool:
        """Whether the counter runs this call of one of `PACKED_OPS` itself: the mask ops on tensors
        without values, the layer and padding ops on a stand-in."""
        if name in NESTED_FAST_PATH_OPS:
            return bool(args) and _packed_form(args[0]) is not None
        return without_values([a for a in args[:2] if isinstance(a, torch.Tensor)])

    def run(self, func: Any, name: str, args: tuple, kwargs: dict, count: Any) -> Any:
        """Run one of `PACKED_OPS` that `diverts` (module docstring); ``count(func, args, kwargs,
        out)`` records it with what the real device holds."""
        if name == "aten._nested_tensor_from_mask_left_aligned":
            keep = self._keep(name, args[1])
            with _no_modes():
                left = torch.arange(keep.shape[1]) < keep.sum(1)[:, None]
                out = bool(torch.equal(keep, left))
            count(func, args, kwargs, out)
            return out
        if name == "aten._nested_tensor_from_mask":
            src = args[0]
            with _no_modes():
                lengths = [int(n) for n in self._keep(name, args[1]).sum(1).tolist()]
            form = packed(lengths, src.shape[-1], src.dtype)
            out = _standin(src, src.shape, form)
            count(func, args, kwargs, form)
            self.open += 1
            return out
        form = args[0]._dispatchprof_packed            # a stand-in (`diverts`)
        shadow_args = (form, *args[1:])
        if name == "aten._transformer_encoder_layer_fwd":
            twin = packed(form.lengths, form.width, form.dtype)
            out = _standin(args[0], args[0].shape, twin)
            count(func, shadow_args, kwargs, twin)
            return out
        size = kwargs.get("output_size", args[2] if len(args) > 2 else None)
        if size is None:
            size = (len(form.lengths), max(form.lengths), form.width)
        out = _standin(args[0], size, None)
        count(func, shadow_args, kwargs, out)
        self.open = max(0, self.open - 1)
        return out

    def _keep(self, name: str, mask: torch.Tensor) -> torch.Tensor:
        """The rows kept: the mask's own values where it has them, else the encoder's."""
        if not without_values([mask]):
            with _no_modes():
                return mask.bool()
        keep = self.keep[-1] if self.keep else None
        if keep is None or tuple(keep.shape) != tuple(mask.shape):
            raise MaskValuesError(name)
        return keep
