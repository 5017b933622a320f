"""Serving's counted step chains: kept per model for reuse (`CountMemo`), and for a decoder counted
with few layers.

The step cost model (`dispatchprof.serving.cost`) counts a handful of uniform step chains of the
whole model. A decoder whose layers are identical modules (`dispatchprof.llm.layer_repeat
.layer_period` 1) is instead counted with 2 and 3 layers on the same chain, and the profile of
the full depth is built from the two (`dispatchprof.count.layer_repeat.repeat_layers`: records,
producers, scopes). A decoder whose layers are identical after a prefix of k layers of another
kind (`dispatchprof.llm.layer_repeat.prefix_layers`: DeepSeek-V3's 3 dense layers before 58 MoE
layers, k = 3) is counted with k + 2 and k + 3 layers, the prefix as it is and its layer k + 1
repeated (`repeat_layers_after`). A decoder whose layer kinds repeat every p layers
(`dispatchprof.llm.layer_repeat.layer_period`: gpt-oss, Gemma-2 and -3, Qwen3.5) repeats the
block of p layers from layer k + 1, counted with one and two such blocks;
`dispatchprof.llm.layer_repeat.counted_depths` gives the two depths. A chain's steps keep their
place: a step's first and last record positions, like every whole-model quantity, are linear in
the depth (the step's prefix, one block per layer, its suffix), so position(L) = position(m) +
(L - m) / p x (position(m) - position(m - p)) for the deeper count's m layers; its KV bytes per
layer follow `per_layer_after`'s rule.

The result is proved by the caller: the design's first chain is counted at full depth and the
others repeated, so the cost model's own checks (one op stream in every chain, every quantity on
one plane over the compositions) compare repeated chains with a direct count; where they fail,
the whole design is counted at full depth (`dispatchprof.serving.cost.fit_design`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from dispatchprof.count.layer_repeat import LayerRepeatError, per_layer_after, repeat_layers_after
from dispatchprof.llm.generation import StepSpan
from dispatchprof.llm.generation import count_steps as generation_steps
from dispatchprof.llm.layer_repeat import (counted_depths, layer_container, repeated_block, shallow_model,
                                           shallow_reason)
from dispatchprof.results.profile import Profile
from dispatchprof.sim.placement import Scenarios


def repeated_steps(model: torch.nn.Module, batch: int, tokens: Sequence[int], scenarios: Any,
                   **options: Any) -> tuple[Profile, list[StepSpan]]:
    """The profile and step spans of `dispatchprof.llm.generation.count_steps` on ``model`` at its
    full depth, from counts of the same chain with `counted_depths` layers (module docstring); ``options``
    are count_steps' keywords. Raises `LayerRepeatError` where the layers do not repeat."""
    container, layers = layer_container(model), model.config.num_hidden_layers
    shallow, (first, period) = counted_depths(model.config), repeated_block(model.config)
    counted = []
    for n in shallow:
        c, spans = generation_steps(shallow_model(model, n), batch, tokens, scenarios, **options)
        counted.append((c.profile, spans))
    (short, short_spans), (long, long_spans) = counted
    profile = repeat_layers_after(short, long, container, layers, first, period)
    blocks = (layers - shallow[-1]) // period

    def at_depth(shorter: int, longer: int) -> int:
        return longer + blocks * (longer - shorter)

    spans = [StepSpan(lo.tokens, lo.past, at_depth(sh.start, lo.start), at_depth(sh.end, lo.end),
                      per_layer_after(lo.kv_layer_bytes, sh.kv_layer_bytes, layers, first, period))
             for sh, lo in zip(short_spans, long_spans)]
    if spans and spans[-1].end != len(profile.records):
        raise ValueError(f"repeated steps end at record {spans[-1].end} of {len(profile.records)}")
    return profile, spans


class CountMemo:
    """Counts of one model's chains kept for reuse: a count (its records and spans) depends on the
    model, the batch and the tokens per step only; the devices (``scenarios``), ``tp``,
    ``runtime``, ``kv_dtype``, ``weight_dtype`` and ``bound`` enter when its records are planned
    (`counted_steps`: the counter records no device), so layouts of other tensor-parallel sizes
    (``plan``) and other devices reuse one count.

    **Few layers.** A decoder whose layers are identical (`dispatchprof.serving.repeat`) has its
    first chain counted at full depth and every other chain counted with few layers (`depths`) and
    repeated: `fit_design` fits them together, so the cost model's checks (one op stream, one
    plane) compare the repeated chains with the direct one, and counts every chain at full depth
    where they fail (``full_depth_reason`` says why chains are counted whole)."""

    def __init__(self, model: torch.nn.Module, repeat: bool = True) -> None:
        self.model = model
        self._counts: dict[tuple, tuple[Profile, list[StepSpan], bool]] = {}
        self.full_depth_reason = shallow_reason(model) if repeat else "layer repetition switched off"
        self._direct: tuple | None = None        # the chain counted at full depth beside repeated ones

    @property
    def repeated(self) -> bool:
        """Whether a chain held was built from counts with few layers."""
        return any(r for _, _, r in self._counts.values())

    def count_full_depth(self, reason: str) -> None:
        """Count every chain at full depth from now on (the repeated ones are dropped)."""
        self.full_depth_reason = reason
        self._counts = {k: v for k, v in self._counts.items() if not v[2]}

    def get(self, batch: int, tokens: Sequence[int], scenarios: Scenarios) -> tuple[Profile, list[StepSpan]]:
        """The profile and spans of ``batch`` sequences stepping ``tokens``, counted on first use
        (with ``scenarios``, which the records do not depend on: a later call on other devices
        reuses them)."""
        key = (batch, tuple(tokens))
        if key not in self._counts:
            if not self.full_depth_reason and self._direct not in (None, key):
                try:
                    profile, spans = repeated_steps(self.model, batch, tokens, scenarios, logits_to_keep=1)
                    self._counts[key] = (profile, spans, True)
                except LayerRepeatError as e:
                    self.count_full_depth(str(e))
            if key not in self._counts:
                c, spans = generation_steps(self.model, batch, tokens, scenarios, logits_to_keep=1)
                self._counts[key] = (c.profile, spans, False)
                self._direct = self._direct or key
        profile, spans, _ = self._counts[key]
        return profile, spans


__all__ = ["CountMemo", "repeated_steps"]
