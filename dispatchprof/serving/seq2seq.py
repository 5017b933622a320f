"""Encoder-decoder serving (T5, BART, Whisper): the prompt's encoder in the time to first token,
cross-attention in every decode step.

**A request.** Its ``prompt_tokens`` are the encoder's input positions: text tokens for T5 and
BART; for Whisper, whose encoder always reads one 30 s window, they must equal the encoder's
``max_source_positions`` (1500; `dispatchprof.serving.checks.check_fixed_prompts`). The decoder
starts from its one start token.

**Prompt cost** (`count_prompt_model`): the encoder over the P prompt positions and the
decoder's first step (the start token; it projects the encoder output into every layer's
cross-attention keys and values, and samples the first token), counted alone for each prompt
(batch 1), as `dispatchprof.serving.encoder` runs an image. Every op's work is a polynomial of
degree 2 in P (linear layers in P, bidirectional attention in P^2), so counts at four prompt
lengths fit the features (1, P, P^2) and check them (`dispatchprof.serving.fit.fit`); Whisper's
fixed window is counted once. Each op is then timed at its own P (`StepCostModel`).

**Decode step cost** (`count_decode_model`): N decoding sequences, sequence i with k_i
self-attention keys (its start token and generated tokens, the new one included) and e_i
cross-attention keys (its prompt positions): features

    x = (1, N, K = sum k_i, k = max k_i, E = sum e_i, e = max e_i)

(the maxima carry what transformers computes once per padded batch, such as T5's position
bias). Chains of uniform steps are counted, each after one first decoder step that fills the
cross-attention cache (not part of the fit); `fit` checks one step more than it needs.

**The engine's view** (`DecodeBatch`): a decoding sequence has ``computed = P + g - 1`` tokens
(g generated so far), so K = sum(computed) - sum(P) + 2N, k = max g + 1, E = sum P, e = max P.
The KV blocks follow ``computed`` as for a decoder-only model: a sequence holds its prompt's
cross-attention keys and values and its decoder tokens' self-attention ones, which cost the same
per token in these models (the decoder's layers, heads and head size; the larger is taken
should they differ).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any, Sequence

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.count.fake import fake_mode
from dispatchprof.llm.generation import StepSpan, cache_layer_bytes, model_dtype
from dispatchprof.llm.models import token_ids
from dispatchprof.serving.composition import Composition
from dispatchprof.serving.counting import CountedStep, counted_steps
from dispatchprof.serving.engine import DecodeBatch
from dispatchprof.serving.fit import fit
from dispatchprof.serving.step_cost import StepCost, StepCostModel
from dispatchprof.sim.placement import Scenarios

#: Prompt lengths counted for the prompt cost: three coefficients and one check.
PROMPT_DESIGN = (2, 3, 4, 6)
#: Decode chains counted for the step cost: (sequences, prompt positions, decode steps after the
#: first decoder step); six coefficients and one check.
DECODE_DESIGN = ((1, 2, 3), (2, 3, 2), (3, 5, 1), (1, 6, 1))


def is_encoder_decoder(model: torch.nn.Module) -> bool:
    """Whether the model's config says it is an encoder-decoder (T5, BART, Whisper)."""
    return bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))


def fixed_prompt(model: torch.nn.Module) -> int | None:
    """The encoder positions of a model whose encoder reads a fixed window (Whisper: 1500), else
    None (any prompt length)."""
    if getattr(model.get_encoder(), "main_input_name", "input_ids") == "input_ids":
        return None
    return int(model.config.max_source_positions)


def decode_composition(d: DecodeBatch) -> Composition:
    """The decode-step features of the module docstring from the engine's view."""
    if d.n == 0:
        return Composition((1, 0, 0, 0, 0, 0))
    return Composition((1, d.n, d.computed_sum - d.prompt_sum + 2 * d.n, d.generated_max + 1, d.prompt_sum,
                        d.prompt_max))


def _encoder_input(model: torch.nn.Module, prompt_tokens: int) -> dict[str, torch.Tensor]:
    """One prompt's encoder input: token ids, or Whisper's log-mel frames of its window."""
    encoder = model.get_encoder()
    if fixed_prompt(model) is None:
        return {"input_ids": token_ids(model, 1, prompt_tokens)}
    frames = prompt_tokens * encoder.conv1.stride[0] * encoder.conv2.stride[0]
    dtype = model_dtype(model)
    with fake_mode(model):
        return {"input_features": torch.empty(1, model.config.num_mel_bins, frames, dtype=dtype)}


def _new_cache() -> Any:
    from transformers import DynamicCache, EncoderDecoderCache
    return EncoderDecoderCache(DynamicCache(), DynamicCache())


def _decoder_step(model: torch.nn.Module, encoded: torch.Tensor, cache: Any, batch: int) -> None:
    model(decoder_input_ids=token_ids(model, batch, 1), encoder_outputs=(encoded,), past_key_values=cache,
          use_cache=True)


class PromptCost:
    """One prompt's cost on one scenario: the fitted StepCostModel for P >= 2 and a one-token
    prompt counted on its own (its op stream differs: transformers drops a dimension of one),
    each P costed once."""

    def __init__(self, fitted: StepCostModel, one: StepCostModel, fixed: bool) -> None:
        self.fitted, self.one, self.fixed = fitted, one, fixed
        self.cost = lru_cache(maxsize=None)(self._cost)

    def _cost(self, prompt_tokens: int) -> StepCost:
        if self.fixed:
            return self.fitted.cost(Composition((1,)))
        if prompt_tokens == 1:
            return self.one.cost(Composition((1,)))
        return self.fitted.cost(Composition((1, prompt_tokens, prompt_tokens * prompt_tokens)))


def count_prompt_model(model: torch.nn.Module, scenarios: Scenarios, *, weight_dtype: str | None = None,
                       bound: bool = False, runtime: str = "serving", tp: int = 1,
                       kv_dtype: str | None = None) -> dict[str, PromptCost]:
    """Per scenario, the prompt cost of the module docstring."""
    fixed = fixed_prompt(model)

    def count(p: int, row: tuple[int, ...]) -> CountedStep:
        inputs = _encoder_input(model, p)
        with torch.no_grad(), OpCounter(devices=scenarios, weight_dtype=weight_dtype, bound=bound, runtime=runtime,
                                        tp=tp) as c:
            with c.phase("prefill"):
                encoded = model.get_encoder()(**inputs).last_hidden_state
                _decoder_step(model, encoded, _new_cache(), 1)
        span = StepSpan(p, 0, 0, c.records_counted, ())
        [step] = counted_steps(c.profile, [span], scenarios, 1, 0.0, weight_dtype=weight_dtype, bound=bound,
                               runtime=runtime, tp=tp, kv_dtype=kv_dtype)
        return dataclasses.replace(step, x=row)

    if fixed is not None:
        fitted = one = fit([count(fixed, (1,))])
    else:
        fitted = fit([count(p, (1, p, p * p)) for p in PROMPT_DESIGN])
        one = fit([count(1, (1,))])
    return {name: PromptCost(fitted[name], one[name], fixed is not None) for name in scenarios}


def count_decode_model(model: torch.nn.Module, scenarios: Scenarios, *, weight_dtype: str | None = None,
                       bound: bool = False, runtime: str = "serving", tp: int = 1, kv_dtype: str | None = None,
                       design: Sequence[tuple[int, int, int]] = DECODE_DESIGN) -> tuple[list[CountedStep], float]:
    """The counted decode steps of ``design`` (their features set) and the KV bytes per token of
    one device (module docstring)."""
    hidden = model.config.d_model
    dtype = model_dtype(model)
    steps: list[CountedStep] = []
    per_token = 0.0
    for batch, prompt, decode_steps in design:
        with fake_mode(model):
            encoded = torch.empty(batch, prompt, hidden, dtype=dtype)
        cache = _new_cache()
        spans = []
        with torch.no_grad(), OpCounter(devices=scenarios, weight_dtype=weight_dtype, bound=bound, runtime=runtime,
                                        tp=tp) as c:
            for i in range(1 + decode_steps):
                start = c.records_counted
                with c.phase("decode" if i else "prefill"):
                    _decoder_step(model, encoded, cache, batch)
                spans.append(StepSpan(1, i, start, c.records_counted, ()))
        self_bytes = sum(cache_layer_bytes(cache.self_attention_cache)) / (batch * (1 + decode_steps))
        cross_bytes = sum(cache_layer_bytes(cache.cross_attention_cache)) / (batch * prompt)
        per_token = max(self_bytes, cross_bytes) / tp
        counted = counted_steps(c.profile, spans, scenarios, batch, per_token, weight_dtype=weight_dtype, bound=bound,
                                runtime=runtime, tp=tp, kv_dtype=kv_dtype)
        for i, step in enumerate(counted[1:], start=1):
            view = DecodeBatch(batch, batch * (prompt + i - 1), prompt + i - 1, batch * prompt, prompt, i)
            steps.append(dataclasses.replace(step, x=tuple(int(v) for v in decode_composition(view).x)))
    return steps, per_token


__all__ = ["DECODE_DESIGN", "PROMPT_DESIGN", "PromptCost", "count_decode_model",
           "count_prompt_model",
           "decode_composition", "fixed_prompt", "is_encoder_decoder"]
