"""Counting a transformers decoder with few layers: which models qualify, the same model built
shallower, and where its layers live (dispatchprof.count.layer_repeat repeats them).

A model qualifies when its config says every layer is the same: ``num_hidden_layers`` at the top
level, no per-layer list (a config attribute with one entry per layer, ``layer_types``,
``no_rope_layers``, ``moe_layers``...) whose entries differ, and none of the switches that make
layers differ by depth (`VARYING`: DeepSeek-V3's ``first_k_dense_replace``, Qwen-MoE's
``decoder_sparse_step``, Llama-4's ``interleave_moe_layer_step``...). Gemma-3 and gpt-oss
(alternating sliding and global attention), DeepSeek-V3 (dense then MoE) and Llama-4 (chunked and
global attention, no-RoPE layers) are counted at full depth: `uniform_reason` says why.

**After a prefix.** A config whose only difference between layers is a prefix of a kind of its
own (`PREFIX`: DeepSeek-V3's ``first_k_dense_replace`` = 3 dense layers before its MoE layers;
Kimi-K2 and GLM-4.5 have 1) repeats from the end of that prefix: `prefix_layers` is the
prefix's length k, `prefix_reason` says '' where every layer from k on is the same module (each
per-layer list constant from entry k on, every other `VARYING` switch at its value that keeps
layers identical). Such a decoder is counted with k + 2 and k + 3 layers and its layer k + 1
repeated (`dispatchprof.count.layer_repeat.repeat_layers_after`); k = 0 is the uniform case.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from dispatchprof.count.fake import fake_model
from dispatchprof.llm.engine_forms import as_engines_run

#: Config switches under which layers differ by depth, and the value that keeps them identical.
VARYING = {"first_k_dense_replace": 0, "decoder_sparse_step": 1, "interleave_moe_layer_step": 1,
           "moe_layer_freq": 1, "cross_attention_layers": None, "full_attn_idxs": None}


def uniform_reason(config: Any) -> str:
    """'' when ``config``'s layers are identical modules by its fields, else why not (module docstring)."""
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return "the config has no top-level num_hidden_layers"
    for name, value in sorted(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) == layers and len(set(map(repr, value))) > 1:
            return f"config.{name} differs between layers"
    for name, same in VARYING.items():
        value = getattr(config, name, same)
        if value is not None and value != same:
            return f"config.{name} = {value!r} makes layers differ by depth"
    return ""


#: Config switches that make a prefix of layers differ from the rest: the value is the prefix's
#: length in layers (layers 0 .. value - 1 of one kind, the others of another).
PREFIX = ("first_k_dense_replace",)


def prefix_layers(config: Any) -> int:
    """The length of ``config``'s prefix of layers of their own kind (`PREFIX`), 0 where none."""
    return max([int(getattr(config, name, 0) or 0) for name in PREFIX], default=0)


def prefix_reason(config: Any) -> str:
    """'' when ``config``'s layers from `prefix_layers` on are identical modules by its fields, else
    why not (module docstring, "After a prefix"); with no prefix, `uniform_reason`."""
    k = prefix_layers(config)
    if k == 0:
        return uniform_reason(config)
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return "the config has no top-level num_hidden_layers"
    for name, value in sorted(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) == layers and len(set(map(repr, value[k:]))) > 1:
            return f"config.{name} differs between layers {k} .. {layers - 1}"
    for name, same in VARYING.items():
        value = getattr(config, name, same)
        if name not in PREFIX and value is not None and value != same:
            return f"config.{name} = {value!r} makes layers differ by depth"
    return ""


def shallow_model(model: torch.nn.Module, layers: int) -> torch.nn.Module:
    """``model`` (a weightless transformers model, `dispatchprof.llm.models.build_model`) built
    again with ``layers`` layers: the same class, config, dtype, experts implementation and module
    swaps (`dispatchprof.llm.engine_forms`); each
    per-layer config list cut to ``layers`` entries."""
    config = copy.deepcopy(model.config)
    total = config.num_hidden_layers
    for name, value in list(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) == total:
            setattr(config, name, type(value)(value[:layers]))
    config.num_hidden_layers = layers
    dtype = next(model.parameters()).dtype
    return as_engines_run(fake_model(lambda: type(model)(config), dtype=dtype))  # as build_model does


def layer_container(model: torch.nn.Module) -> str | None:
    """The module path of ``model``'s list of ``num_hidden_layers`` layers ("model.layers"), or
    None where there is not exactly one such list."""
    layers = getattr(model.config, "num_hidden_layers", None)
    found = [name for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    return found[0] if len(found) == 1 else None


__all__ = ["PREFIX", "VARYING", "layer_container", "prefix_layers", "prefix_reason", "shallow_model",
           "uniform_reason"]


def shallow_reason(model: torch.nn.Module, deepest: int, layers_reason=uniform_reason) -> str:
    """'' when ``model`` can be counted with at most ``deepest`` layers and its counts extended to
    full depth (``layers_reason`` of its config is '': by default its layers repeat from the first,
    `uniform_reason`; it is deeper than ``deepest``; its layers are one list), else why not."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config"
    reason = layers_reason(config)
    if reason:
        return reason
    if config.num_hidden_layers <= deepest:
        return f"{config.num_hidden_layers} layers: counted as they are"
    if layer_container(model) is None:
        return "no single list of num_hidden_layers layers"
    return ""
