"""Keep the counter invisible to torch's fast paths, and count on meta what the real device runs.

``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder`` run a
fused kernel (``aten._native_multi_head_attention``, ``aten._transformer_encoder_layer_fwd``,
the nested-tensor encoder) only when ``torch.overrides.has_torch_function`` is False, which an
active torch-function mode makes True. The counter's FusedAttentionMode therefore steps off the
torch-function stack while such a module runs, when it is the innermost mode and torch will take
the fast path (nn.MultiheadAttention: `mha_takes_fast_path`) or may take it (the encoder layer and
encoder: eval mode, the fast path switched on, no autocast, no gradient needed; a module called
inside a suspended layer means the slow path, and the mode goes back first: `FastPathGuard`).
Its dispatch mode stays (torch's checks look for
make_fx's proxy mode only), so the fast path's aten ops are counted as they run. The other checks
torch makes (forward hooks attached to the module itself, tensor subclasses, make_fx tracing) see
nothing of the counter: its module hooks are global, it makes no tensor subclass, and its
dispatch mode is not make_fx's.

Meta tensors stand for a model on a real device, where torch takes the fast path; torch's device
check (``x.device.type`` among cpu, cuda and ``torch.utils.backend_registration.
_privateuse1_backend_name``) refuses meta. For the call of such a module on meta tensors only, the
guard names meta as that third device type (`meta_as_device`) and puts the name back when the
call returns or raises, so torch's own code takes the path the real device takes: the same ops,
counts and bytes as real tensors. The fast path's fused kernels have meta kernels; the
padding-mask encoder's packing reads the mask's values and makes nested tensors, which meta and
fake tensors lack: on them the counter runs those ops itself from the mask the encoder is given
(`dispatchprof.count.packing`), and the guard pushes that mask for the encoder's call.

Where the module's slow path runs (training, gradients, batch_first=False), the mode is active and
``F.multi_head_attention_forward`` runs its own body with the mode still on (`mha_forward_body`):
the attention it calls is recorded as one fused op, as everywhere else.
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.utils.backend_registration as backend_registration
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import _get_current_function_mode, _pop_mode, _push_mode

from dispatchprof.count.fastpath_checks import call_kwargs, mha_takes_fast_path
from dispatchprof.count.packing import Packing

#: The modules whose forward picks a fast path by ``has_torch_function`` (exact types: a subclass
#: may call attention itself in its forward, which the mode must then see).
FAST_PATH_MODULES = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerEncoder)
#: The fast-path modules whose forward calls submodules (the layers; a slow path's attention, norms
#: and linears), and whose fused kernels call none.
_CALLING_MODULES = (nn.TransformerEncoderLayer, nn.TransformerEncoder)
MHA_FORWARD = F.multi_head_attention_forward
_body: list[Any] = []


def mha_forward_body() -> Any:
    """``F.multi_head_attention_forward``'s own code, whose first check (``has_torch_function``,
    True under any torch-function mode, which would hand the call back to the mode) reads False:
    the same code on the same arguments, so the same ops and the same result. Built once; torch
    itself is not changed."""
    if not _body:
        names = dict(vars(F))
        names["has_torch_function"] = _no_torch_function
        fn = types.FunctionType(MHA_FORWARD.__code__, names, MHA_FORWARD.__name__,
                                MHA_FORWARD.__defaults__, MHA_FORWARD.__closure__)
        fn.__kwdefaults__ = MHA_FORWARD.__kwdefaults__
        _body.append(fn)
    return _body[0]


def _no_torch_function(*args: Any) -> bool:
    return False


def fast_path_tensors(module: nn.Module, args: tuple) -> list[torch.Tensor] | None:
    """The tensors torch's fast-path checks look at (positional tensor arguments and the checked
    module's parameters) when ``module`` may take its fast path as far as conditions that do not
    depend on the counter or the device go, checked on what torch checks (for
    nn.TransformerEncoder: its first layer): eval mode, ``torch.backends.mha`` fast path on, no
    autocast, and no gradient needed (grad off, or no parameter or tensor argument requires it);
    None when it may not. A global pre-hook sees positional arguments only: tensors passed by
    keyword are judged by the parameters. The module checks the rest itself."""
    checked = module.layers[0] if isinstance(module, nn.TransformerEncoder) and len(module.layers) else module
    if checked.training or not torch.backends.mha.get_fastpath_enabled() or torch.is_autocast_enabled():
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    tensors.extend(checked.parameters())
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None
    return tensors


def meta_as_device(name: str | None) -> str:
    """Set the device type torch's fast-path checks accept besides cpu and cuda to ``name``
    (``"meta"`` while a module on meta tensors runs); returns the previous name."""
    old = backend_registration._privateuse1_backend_name
    if name is not None:
        backend_registration._privateuse1_backend_name = name
    return old


class FastPathGuard:
    """Global forward pre- and post-hooks that take ``mode`` off the torch-function stack for the
    call of a fast-path module (see the module docstring), on meta tensors name meta as a fast-path
    device for that call, and undo both after, also when the forward raises.

    nn.MultiheadAttention steps off only when torch takes its fast path (`mha_takes_fast_path`).
    nn.TransformerEncoderLayer and nn.TransformerEncoder step off when they may take it: a module
    called inside a layer so suspended means the layer took its slow path (the fused kernel calls
    no module), and inside an encoder it is a layer, which decides for itself; either way the mode
    goes back on the stack first, so the slow path's attention is one record as everywhere.
    An nn.TransformerEncoder so suspended on tensors without values hands its padding mask to
    ``packing`` for its call (`Packing.enter`)."""

    def __init__(self, mode: Any, packing: Packing) -> None:
        self._mode = mode
        self._packing = packing
        self._handles: list[Any] = []
        # [module, device name to restore, mode off the stack, padding mask pushed to packing]
        self._suspended: list[list[Any]] = []

    def install(self) -> None:
        self._handles.append(register_module_forward_pre_hook(self._pre))
        self._handles.append(register_module_forward_hook(self._post, always_call=True))

    def remove(self) -> None:
        while self._suspended:             # an exit mid-forward: the stack as it was found
            self._leave(self._suspended.pop())
        self._packing.clear()
        while self._handles:
            self._handles.pop().remove()

    def _leave(self, entry: list[Any]) -> None:
        meta_as_device(entry[1])
        if entry[3]:
            self._packing.leave()
        if entry[2]:
            _push_mode(self._mode)

    def _pre(self, module: nn.Module, args: tuple) -> None:
        if self._packing.open:         # a packed batch: only the encoder's own layers may run on it
            top = self._suspended[-1][0] if self._suspended else None
            self._packing.refuse_slow_path(module, type(top) is nn.TransformerEncoder)
        if self._suspended and self._suspended[-1][2] and type(self._suspended[-1][0]) in _CALLING_MODULES:
            self._suspended[-1][2] = False          # a module called inside: the mode goes back
            _push_mode(self._mode)
        if type(module) not in FAST_PATH_MODULES or _get_current_function_mode() is not self._mode:
            return None
        tensors = fast_path_tensors(module, args)
        if tensors is None:
            return None
        if type(module) is nn.MultiheadAttention:
            kwargs = call_kwargs(1)
            if kwargs is None or not mha_takes_fast_path(module, args, kwargs):
                return None
        on_meta = any(t.device.type == "meta" for t in tensors)
        pushed = type(module) is nn.TransformerEncoder and self._packing.enter(module, args, call_kwargs(1))
        _pop_mode()
        self._suspended.append([module, meta_as_device("meta") if on_meta else None, True, pushed])
        return None

    def _post(self, module: nn.Module, args: tuple, output: Any) -> None:
        if self._suspended and self._suspended[-1][0] is module:
            self._leave(self._suspended.pop())
