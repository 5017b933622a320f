"""Models with no weights: build on fake tensors so that any size counts in little memory.

``fake_model(build)`` runs ``build()`` (a callable returning an nn.Module, a transformers
config, or a path to a config.json) inside a ``FakeTensorMode``: parameters get shapes and
dtypes but no storage, so a 405B-parameter model builds in seconds and a few hundred MB.
Run the model inside ``fake_mode(model)`` with inputs from ``fake_inputs``. A constructor that
reads values it computed from Python numbers (drop-path rates from a ``linspace``) is built again
with those values real (``count/build_values.py``); the parameters stay fake.

Integer inputs (token ids, labels, image grids) may be the real CPU tensors a user has: the mode
accepts them beside fake tensors, and a model that reads their values (``labels.max()``,
``grid_thw.tolist()``, an image-token count) then runs as on real tensors.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch import nn
from torch._subclasses import FakeTensor, FakeTensorMode
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from dispatchprof.count.build_values import ConstructorValues


def fake_model(build: Callable[[], nn.Module] | Any, *, dtype: torch.dtype | None = None) -> nn.Module:
    """An ``nn.Module`` whose parameters and buffers are fake tensors.

    ``build`` is a zero-argument callable returning a module, or a transformers
    ``PretrainedConfig`` (built with ``AutoModelForCausalLM.from_config``, or ``AutoModel``
    for encoder-only configs). ``dtype`` casts the parameters (e.g. torch.bfloat16).
    """
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    saved_dtype = torch.get_default_dtype()
    try:
        if dtype is not None:
            torch.set_default_dtype(dtype)   # restored below; fake parameters cannot be cast later
        try:
            model = _build_in(mode, build, values=False)
        except (DataDependentOutputException, DynamicOutputShapeException):
            # the constructor reads values it computed from Python numbers: keep those real
            model = _build_in(FakeTensorMode(allow_non_fake_inputs=True), build, values=True)
    finally:
        torch.set_default_dtype(saved_dtype)
    model.eval()
    return model


def _build_in(mode: FakeTensorMode, build: Any, *, values: bool) -> nn.Module:
    """``build`` under ``mode``; with ``values``, under `ConstructorValues` too."""
    with mode, (ConstructorValues() if values else contextlib.nullcontext()):
        with _skip_weight_init():
            model = _build(build)
        if hasattr(model, "tie_weights"):   # transformers ties inside the init we skipped
            model.tie_weights()
    return model


def _build(build: Any) -> nn.Module:
    if callable(build) and not _is_config(build):
        model = build()
    elif _is_config(build):
        model = _from_config(build)
    else:
        raise TypeError(f"fake_model() takes a callable returning an nn.Module or a transformers "
                            f"config, got {type(build).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"fake_model(): the builder returned {type(model).__name__}, not an nn.Module")
    return model


def fake_mode(model: nn.Module) -> FakeTensorMode:
    """The FakeTensorMode that owns ``model``'s fake parameters (to run it and make inputs)."""
    for t in list(model.parameters()) + list(model.buffers()):
        if isinstance(t, FakeTensor):
            return t.fake_mode
    raise ValueError("fake_mode(): the model has no fake parameters; build it with fake_model()")


def fake_inputs(model: nn.Module, *shape: int, dtype: torch.dtype = torch.long, high: int = 2) -> torch.Tensor:
    """A fake tensor of ``shape`` in ``model``'s fake mode (token ids by default)."""
    with fake_mode(model):
        if dtype.is_floating_point:
            return torch.randn(*shape, dtype=dtype)
        return torch.randint(0, high, shape, dtype=dtype)


def _skip_weight_init() -> contextlib.AbstractContextManager:
    """transformers' own switch that skips weight initialisation (values of fake tensors do
    not exist, and some initialisers, such as trunc_normal_, read them); a no-op without it."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        try:
            from transformers.modeling_utils import no_init_weights
        except ImportError:
            return contextlib.nullcontext()
    return no_init_weights()


def _is_config(obj: Any) -> bool:
    return type(obj).__name__.endswith("Config") and hasattr(obj, "to_dict")


def _from_config(config: Any) -> nn.Module:
    import transformers

    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
        try:
            return auto.from_config(config)
        except ValueError:
            continue
    raise ValueError(f"fake_model(): transformers has no model class for {type(config).__name__}")
