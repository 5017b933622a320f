"""Serving's counted steps from a decoder counted with few layers.

The step cost model (`dispatchprof.serving.cost`) counts a handful of uniform step chains of the
whole model. A decoder whose layers are identical modules (`dispatchprof.llm.layer_repeat
.uniform_reason`) is instead counted with 2 and 3 layers on the same chain, and the profile of
the full depth is built from the two (`dispatchprof.count.layer_repeat.repeat_layers`: records,
producers, scopes). A chain's steps keep their place: a step's first and last record positions,
like every whole-model quantity, are linear in the depth (the step's prefix, one block per layer,
its suffix), so position(L) = position(3) + (L - 3) x (position(3) - position(2)); its KV bytes
per layer follow `per_layer`'s rule.

The result is proved by the caller: the design's first chain is counted at full depth and the
others repeated, so the cost model's own checks (one op stream in every chain, every quantity on
one plane over the compositions) compare repeated chains with a direct count; where they fail,
the whole design is counted at full depth (`dispatchprof.serving.cost.count_design`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from dispatchprof.count.layer_repeat import per_layer, repeat_layers
from dispatchprof.llm.generation import StepSpan
from dispatchprof.llm.generation import count_steps as generation_steps
from dispatchprof.llm.layer_repeat import layer_container, shallow_model, uniform_reason
from dispatchprof.results.profile import Profile

#: The depths counted: n and n + 1 layers, n >= 2 (`repeat_layers`).
SHALLOW = (2, 3)


def repeatable(model: torch.nn.Module) -> str:
    """'' when ``model`` can be counted with few layers and repeated, else why not."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config"
    reason = uniform_reason(config)
    if reason:
        return reason
    if config.num_hidden_layers <= SHALLOW[-1]:
        return f"{config.num_hidden_layers} layers: counted as they are"
    if layer_container(model) is None:
        return "no single list of num_hidden_layers layers"
    return ""


def repeated_steps(model: torch.nn.Module, batch: int, tokens: Sequence[int], scenarios: Any,
                   **options: Any) -> tuple[Profile, list[StepSpan]]:
    """The profile and step spans of `dispatchprof.llm.generation.count_steps` on ``model`` at its
    full depth, from counts of the same chain with 2 and 3 layers (module docstring); ``options``
    are count_steps' keywords. Raises `LayerRepeatError` where the layers do not repeat."""
    container, layers = layer_container(model), model.config.num_hidden_layers
    counted = []
    for n in SHALLOW:
        c, spans = generation_steps(shallow_model(model, n), batch, tokens, scenarios, **options)
        counted.append((c.profile, spans))
    (short, short_spans), (long, long_spans) = counted
    profile = repeat_layers(short, long, container, layers)
    extra = layers - SHALLOW[-1]

    def at_depth(shorter: int, longer: int) -> int:
        return longer + extra * (longer - shorter)

    spans = [StepSpan(lo.tokens, lo.past, at_depth(sh.start, lo.start), at_depth(sh.end, lo.end),
                      per_layer(lo.kv_layer_bytes, sh.kv_layer_bytes, layers))
             for sh, lo in zip(short_spans, long_spans)]
    if spans and spans[-1].end != len(profile.records):
        raise ValueError(f"repeated steps end at record {spans[-1].end} of {len(profile.records)}")
    return profile, spans


__all__ = ["SHALLOW", "repeatable", "repeated_steps"]
