"""Keep the counter invisible to torch's fast paths.

``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder`` run a
fused kernel (``aten._native_multi_head_attention``, ``aten._transformer_encoder_layer_fwd``,
the nested-tensor encoder) only when ``torch.overrides.has_torch_function`` is False, which an
active torch-function mode makes True. The counter's FusedAttentionMode therefore steps off the
torch-function stack while such a module runs, when it is the innermost mode and the module's
other conditions that do not depend on the counter allow the fast path (eval mode, the fast path
switched on, no autocast, tensors not on the meta device, no gradient needed). Its dispatch mode
stays (torch's checks look for make_fx's proxy mode only), so the fast path's aten ops are
counted as they run. The other checks torch makes (forward hooks attached to the module itself,
tensor subclasses, make_fx tracing) see nothing of the counter: its module hooks are global,
it makes no tensor subclass, and its dispatch mode is not make_fx's.

Where the module's slow path runs (training, gradients, meta tensors), the mode stays active and
``F.multi_head_attention_forward`` runs its own body with the mode still on (`mha_forward_body`):
the attention it calls is recorded as one fused op, as everywhere else.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import _get_current_function_mode, _pop_mode, _push_mode

#: The modules whose forward picks a fast path by ``has_torch_function`` (exact types: a subclass
#: may call attention itself in its forward, which the mode must then see).
FAST_PATH_MODULES = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerEncoder)
MHA_FORWARD = F.multi_head_attention_forward
#: The ops nn.TransformerEncoder's padding-mask fast path runs on the nested tensor it makes
#: itself: counted (each sequence with its own length); any other op refuses nested tensors.
NESTED_FAST_PATH_OPS = frozenset({"aten._transformer_encoder_layer_fwd", "aten.to_padded_tensor"})
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


def fast_path_possible(module: nn.Module, args: tuple) -> bool:
    """Whether ``module`` may take its fast path as far as conditions that do not depend on the
    counter go, checked on what torch checks (for nn.TransformerEncoder: its first layer): eval
    mode, ``torch.backends.mha`` fast path on, no autocast, no tensor on the meta device, and no
    gradient needed (grad off, or no parameter or tensor argument requires it). A global pre-hook
    sees positional arguments only: tensors passed by keyword are judged by the parameters'
    device. The module checks the rest itself."""
    checked = module.layers[0] if isinstance(module, nn.TransformerEncoder) and len(module.layers) else module
    if checked.training or not torch.backends.mha.get_fastpath_enabled() or torch.is_autocast_enabled():
        return False
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    tensors.extend(checked.parameters())
    if any(t.device.type == "meta" for t in tensors):
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


class FastPathGuard:
    """Global forward pre- and post-hooks that take ``mode`` off the torch-function stack for the
    call of a fast-path module (see the module docstring) and put it back after, also when the
    forward raises. Nested fast-path modules inside one already running leave the stack alone."""

    def __init__(self, mode: Any) -> None:
        self._mode = mode
        self._handles: list[Any] = []
        self._suspended: list[nn.Module] = []

    def install(self) -> None:
        self._handles.append(register_module_forward_pre_hook(self._pre))
        self._handles.append(register_module_forward_hook(self._post, always_call=True))

    def remove(self) -> None:
        while self._suspended:             # an exit mid-forward: the stack as it was found
            self._suspended.pop()
            _push_mode(self._mode)
        while self._handles:
            self._handles.pop().remove()

    def _pre(self, module: nn.Module, args: tuple) -> None:
        if type(module) not in FAST_PATH_MODULES or _get_current_function_mode() is not self._mode:
            return None
        if fast_path_possible(module, args):
            _pop_mode()
            self._suspended.append(module)
        return None

    def _post(self, module: nn.Module, args: tuple, output: Any) -> None:
        if self._suspended and self._suspended[-1] is module:
            self._suspended.pop()
            _push_mode(self._mode)
