"""Counting a transformers decoder with few layers: which models qualify, the same model built
shallower, and where its layers live (dispatchprof.count.layer_repeat repeats them).

A model qualifies when its config says its layers repeat: ``num_hidden_layers`` at the top
level, every per-layer list (a config attribute with one entry per layer, ``layer_types``,
``no_rope_layers``, ``moe_layers``...) repeating as described below, and none of the switches
that make layers differ by depth (`VARYING`: Qwen-MoE's ``decoder_sparse_step``, Llama-4's
``interleave_moe_layer_step``...) set, but a prefix's. `periodic_reason` says '' where it
qualifies, else why not; `shallow_reason` adds what a built model needs (deeper than the counted
depths, its layers in one list).

**After a prefix.** A config whose only difference between layers is a prefix of a kind of its
own (`PREFIX`: DeepSeek-V3's ``first_k_dense_replace`` = 3 dense layers before its MoE layers;
Kimi-K2 and GLM-4.5 have 1) repeats from the end of that prefix: `prefix_layers` is the
prefix's length k (0 where none). Such a decoder is counted with k + 2 and k + 3 layers and its
layer k + 1 repeated (`dispatchprof.count.layer_repeat.repeat_layers_after`).

**Every few layers.** A config whose per-layer lists repeat every p <= `MAX_PERIOD` entries after
the prefix (gpt-oss and Gemma-2's ``layer_types`` alternate sliding and full attention, p = 2;
Qwen3.5 three linear-attention layers then a full one, p = 4; Gemma-3 five sliding then a full
one, p = 6) repeats a block of p layers: `layer_period` is the smallest such p (1 when the lists
are constant, every layer the same), `repeated_block` and `counted_depths` say which layers
repeat and which depths are counted.
`shallow_model` cuts each list to the shallow depth, so layer j of a shallow build is the kind of
layer j of the full one.
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


#: Config switches that make a prefix of layers differ from the rest: the value is the prefix's
#: length in layers (layers 0 .. value - 1 of one kind, the others of another).
PREFIX = ("first_k_dense_replace",)


def prefix_layers(config: Any) -> int:
    """The length of ``config``'s prefix of layers of their own kind (`PREFIX`), 0 where none."""
    return max([int(getattr(config, name, 0) or 0) for name in PREFIX], default=0)


#: The longest block of layers repeated as one (Gemma-3's five sliding then one full layer: 6).
MAX_PERIOD = 8


def _per_layer_lists(config: Any) -> dict[str, list]:
    """``config``'s lists with one entry per layer, by attribute name."""
    layers = config.num_hidden_layers
    return {name: list(value) for name, value in sorted(vars(config).items())
            if isinstance(value, (list, tuple)) and len(value) == layers}


def layer_period(config: Any) -> int:
    """The smallest p <= `MAX_PERIOD` with every per-layer list of ``config`` equal p entries apart
    from `prefix_layers` on and two periods long there at least (1 where each is constant there), 0
    where there is none."""
    k = prefix_layers(config)
    lists = [list(map(repr, value[k:])) for value in _per_layer_lists(config).values()]
    return next((p for p in range(1, MAX_PERIOD + 1)
                 if all(len(v) >= 2 * p and all(v[i] == v[i + p] for i in range(len(v) - p)) for v in lists)), 0)


def periodic_reason(config: Any) -> str:
    """'' when ``config``'s layers from `prefix_layers` on repeat as blocks of `layer_period`
    layers (module docstring, "Every few layers"), else why not."""
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        return "the config has no top-level num_hidden_layers"
    if layer_period(config) == 0:
        k = prefix_layers(config)
        name = next((n for n, v in _per_layer_lists(config).items() if len(set(map(repr, v[k:]))) > 1), None)
        if name is None:
            return f"{layers} layer(s): too few after layer {k} to repeat"
        return f"config.{name} does not repeat every {MAX_PERIOD} or fewer layers from layer {k} on"
    return _switch_reason(config)


def repeated_block(config: Any) -> tuple[int, int]:
    """The first layer and the length of the block of layers that repeats: (k + 1, p) after a
    prefix of k layers (`prefix_layers`), p the `layer_period` (1 where the layers are identical)."""
    return prefix_layers(config) + 1, max(1, layer_period(config))


def counted_depths(config: Any, blocks: int = 2) -> tuple[int, ...]:
    """The depths a decoder is counted with to repeat its layers: one, two, ... ``blocks`` blocks of
    p layers after its first k + 1 (`repeated_block`), then the r = (L - k - 1) mod p layers its
    full depth L ends with: k + 2 and k + 3 where every layer after the prefix is the same (two
    blocks: serving and decoder streams; three: training, whose third depth checks the first two)."""
    first, p = repeated_block(config)
    rest = (config.num_hidden_layers - first) % p
    return tuple(first + b * p + rest for b in range(1, blocks + 1))


def _switch_reason(config: Any) -> str:
    """'' when no `VARYING` switch but a prefix's makes ``config``'s layers differ, else which does."""
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


def shallow_reason(model: torch.nn.Module, blocks: int = 2) -> str:
    """'' when ``model`` can be counted with ``blocks`` >= 2 repeated blocks of layers
    (`counted_depths`) and its counts extended to full depth: its config qualifies
    (`periodic_reason`), it is deeper than the deepest count, its layers are one list; else why not."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config"
    reason = periodic_reason(config)
    if reason:
        return reason
    deepest = counted_depths(config, blocks)[-1]
    if config.num_hidden_layers <= deepest:
        return f"{config.num_hidden_layers} layers: counted as they are"
    if layer_container(model) is None:
        return "no single list of num_hidden_layers layers"
    return ""


__all__ = ["MAX_PERIOD", "PREFIX", "VARYING", "counted_depths", "layer_container", "layer_period", "periodic_reason",
           "prefix_layers", "repeated_block", "shallow_model", "shallow_reason"]
