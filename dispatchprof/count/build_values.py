"""Values a model's constructor computes from Python numbers, kept real under ``fake_model``.

Some constructors read values they computed themselves: timm's stochastic-depth rates
(``[x.item() for x in torch.linspace(0, rate, depth)]``), transformers' ConvNeXt
(``torch.linspace(...).tolist()``), timm's RegNet widths (``torch.unique`` of an ``arange``
product). Under ``FakeTensorMode`` those tensors are fake and the read fails, with or without a
counter. ``ConstructorValues`` is a dispatch mode entered inside the fake mode for the build only:

- a value factory (``arange``, ``linspace``, ``logspace``) runs for real on the CPU;
- an op whose tensor inputs are all real (none fake) runs for real too, so values derived from
  those factories stay real and can be read;
- everything else goes to the fake mode: ``empty``, ``zeros``, ``ones``, ``full``, ``randn`` and the
  like (the parameters and their initialisers), and any op that touches a fake tensor.

So the parameters stay fake and only tensors computed from Python numbers carry values; such a
tensor kept as a buffer (a relative-position index, say) is a real CPU tensor in the fake model,
counted like a fake one (the counts see shapes and dtypes only).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

aten = torch.ops.aten

#: Factories whose output values follow from their Python arguments (not weights, not random).
VALUE_FACTORIES = frozenset({aten.arange, aten.linspace, aten.logspace})


class ConstructorValues(TorchDispatchMode):
    """Runs value factories and ops on real tensors only outside the fake mode (module docstring)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        real = (func.overloadpacket in VALUE_FACTORIES if not tensors
                else not any(isinstance(t, FakeTensor) or t.device.type == "meta" for t in tensors))
        if real:
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        return func(*args, **kwargs)
