"""Shape-generic counts of a model: count a few small shapes once, then answer every batch size,
prompt length and cache length exactly without counting again (dispatchprof.count.generic).

The fit is made the first time a shape is asked for:

- a decoder (`DecoderStream`): one count runs a prefill of ``n`` tokens for ``batch`` sequences
  then one decode step of one token per sequence with the cache of those ``n`` tokens, exactly as
  ``profile_generation`` counts. The profile taken after the prefill is the prefill of a prompt of
  ``n`` tokens; the whole profile is the decode step at cache length ``n`` (with its setup prefill,
  so that the simulator sees where the cache lives). The multi-token query (prefill) and the
  one-token query (decode step) are separate parts of the stream, each fitted on its own.
  Variables (batch, n), degrees (1, 2): 6 counts on the grid batch in {1, 2}, n in {32, 64, 128},
  and a held-out check at (3, 200). Region: n >= 32 and, with a sliding window, below it; other
  shapes are counted directly. A window of 200 tokens or fewer (gpt-oss's 128) leaves no room
  below it: the grid's lengths are then W + 32, W + 64, W + 128, held out W + 200, and the region
  n >= W + 32 (`length_region`). A model whose op stream at batch 1 differs from batch 2's (Gemma-2:
  a copy that a batch of one does not need) is fitted on batch sizes 2, 3 (held out 4) instead, and
  batch 1 counted directly.
- an encoder or encoder-decoder (`ForwardStream`): one forward of ``batch x seq_len`` tokens (and
  ``batch x decoder_len`` decoder tokens) on the same grid (degree 2 in each length), held-out
  (3, 200[, 191]).

Why n >= 32: peaks of live bytes are maxima over the moments of a step, and for short lengths
the moment that holds them changes often (measured on a 2-layer Llama); on the grid 32..128 they
follow the length-dependent tensors, and where they still miss the held-out check they are
listed as approximate (dispatchprof.count.generic). Every other number is a polynomial at every
shape the tests tried (batch 1 included, lengths from 2).

Mixture-of-experts decoders: under balanced routing (dispatchprof.llm.models.balanced_split) a pass
of T tokens routes T k token-expert pairs, split over E experts as evenly as integers allow. That
split is a polynomial in T only where E divides T k: elsewhere some experts get one pair more (a
floor), and a decode step with T k < E leaves experts idle, whose GEMMs are skipped (another op
stream). So a MoE decoder is fitted on batch sizes that are multiples of `batch_step` (E /
gcd(E, k): 4 for Mixtral's 8 experts, top 2), where the decode step's T = batch and the prefill's
T = batch x n both split evenly; other batch sizes are counted directly.

Where the fit fails (the op stream changes inside the grid, or the held-out check differs on
anything but a peak), the stream's ``reason`` says why and every shape is counted directly.
`Memo` keeps the last simulated prefills and steps for callers that ask for the same one again
(a sweep's output lengths share them).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import torch

from dispatchprof.count.counter import OpCounter
from dispatchprof.count.generic import GenericFit, Sizes, fit_generic
from dispatchprof.count.layer_repeat import LayerRepeatError, per_layer_after, repeat_layers_after
from dispatchprof.llm.layer_repeat import (counted_depths, layer_container, repeated_block, shallow_model,
                                           shallow_reason)
from dispatchprof.llm.models import token_ids
from dispatchprof.llm.odd_batch import BatchFit, fit_batch
from dispatchprof.results.profile import Profile

#: The fit's grid and held-out point (module docstring).
BATCHES, HELD_BATCH = (1, 2), 3
LENGTHS, HELD_LENGTH = (32, 64, 128), 200


def fit_regime(count: Callable[[Sizes], tuple[Profile, tuple[int, ...]]], lengths: int,
               high: int | None = None, batch_step: int = 1, offset: int = 0, first_batch: int = 1) -> GenericFit:
    """Fit ``count((batch, n1, ...))`` (``lengths`` length variables) on the grid; with
    ``batch_step`` s the batch sizes of the grid are multiples of s (s, 2s; held out 3s); with
    ``offset`` the lengths of the grid and the held-out point are that much longer (a region
    above a sliding window); with ``first_batch`` 2 the batch sizes start at 2s (2s, 3s; held out
    4s: a model whose op stream at batch 1 is another)."""
    if high is not None and high < HELD_LENGTH + offset:
        return GenericFit(None, f"a sliding window keeps one op stream up to {high} tokens only, short of the "
                                f"fit's held-out length {HELD_LENGTH + offset}")
    names = ("n", "m")[:lengths]
    batches = tuple((b + first_batch - 1) * batch_step for b in BATCHES)
    grid = tuple(n + offset for n in LENGTHS)
    return fit_generic(count, ("batch", *names), (batches, *(grid,) * lengths),
                       held_out(lengths, batch_step, offset, first_batch), (batches[0],) + (grid[0],) * lengths,
                       (None,) + (high,) * lengths)


def held_out(lengths: int, batch_step: int = 1, offset: int = 0, first_batch: int = 1) -> Sizes:
    """The held-out point of `fit_regime`'s grid."""
    return ((HELD_BATCH + first_batch - 1) * batch_step, HELD_LENGTH + offset) + \
        (HELD_LENGTH + offset - 9,) * (lengths - 1)


def experts_of(model: torch.nn.Module) -> tuple[int, int] | None:
    """(experts E, experts per token k) of a mixture-of-experts model, else None."""
    config = getattr(model, "config", None)
    experts = next((getattr(config, a) for a in ("num_local_experts", "num_experts", "n_routed_experts")
                    if isinstance(getattr(config, a, None), int)), None)
    top_k = getattr(config, "num_experts_per_tok", None)
    if not experts or not isinstance(top_k, int) or top_k < 1:
        return None
    return experts, top_k


def batch_step(model: torch.nn.Module) -> int:
    """The batch sizes a decoder's fit holds for are the multiples of this: 1, or for a
    mixture-of-experts model (E experts, top k) E / gcd(E, k), the smallest batch whose decode step
    routes the same number of token-expert pairs to every expert under balanced routing
    (`dispatchprof.llm.models.balanced_split`): then every pass's tokens T (batch, batch x n) split
    evenly, T k / E each, a polynomial; other batch sizes give some experts one pair more (a floor,
    not a polynomial) or none (their GEMMs skipped: another op stream)."""
    moe = experts_of(model)
    return 1 if moe is None else moe[0] // math.gcd(*moe)


def _cache_layer_bytes(cache) -> tuple[int, ...]:
    out = []
    for layer in getattr(cache, "layers", ()):
        out.append(sum(t.numel() * t.element_size() for t in (getattr(layer, "keys", None),
                                                              getattr(layer, "values", None))
                       if isinstance(t, torch.Tensor)))
    return tuple(out)


def length_region(model: torch.nn.Module) -> tuple[int, int | None]:
    """(offset, high) of a decoder's fit: the grid's lengths are offset by ``offset``, and the fit
    holds for cache lengths up to ``high`` (None: unbounded). Without a sliding window (0, None);
    with a window of W tokens, below it (0, W - 2) where the grid and its held-out point fit there,
    else above it (W, None): every sliding layer then attends to its W latest keys, so the op
    stream is again one and its numbers polynomials in the lengths (gpt-oss's window of 128)."""
    w = getattr(getattr(model, "config", None), "sliding_window", None)
    if not isinstance(w, int) or w <= 0:
        return 0, None
    return (0, w - 2) if w - 2 >= HELD_LENGTH else (w, None)


class Memo:
    """The last `SIZE` results its callers derived from a stream (simulated steps, keyed by the
    caller with everything they depend on), so that shapes sharing a prefill or a decode step
    (a sweep's output lengths) simulate it once."""

    SIZE = 32

    def __init__(self) -> None:
        self._items: OrderedDict = OrderedDict()

    def get(self, key, make: Callable[[], Any]) -> Any:
        """The value under ``key``, made by ``make()`` the first time."""
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self._items[key] = make()
        if len(self._items) > self.SIZE:
            self._items.popitem(last=False)
        return value


@dataclass(frozen=True)
class DecoderStep:
    """A decode step at cache length ``past`` for ``batch`` sequences, as a direct count gives it."""

    profile: Profile                 # the setup prefill of ``past`` tokens, then the step
    step_start: int                  # index of the step's first record
    prefill_kv: tuple[int, ...]      # KV bytes per layer after the setup prefill
    kv: tuple[int, ...]              # KV bytes per layer after the step


class DecoderStream:
    """A decoder's prefill and decode step at any (batch, length) of its region (module docstring)."""

    def __init__(self, model: torch.nn.Module, host_time: bool | str = True, repeat_layers: bool = True) -> None:
        self.model, self.host_time = model, host_time
        self.offset, self.high = length_region(model)   # the lengths' region (`length_region`)
        self.batch_step = batch_step(model)
        self.moe = experts_of(model)          # (experts, top k) of a MoE model, else None
        self.odd: dict[int, BatchFit] = {}    # fits of MoE batch sizes that are not multiples of batch_step
        self.fits: tuple[GenericFit, GenericFit] | None = None     # (decode step, prefill)
        self.memo = Memo()
        self.repeat = ShallowCounts(model, host_time) if repeat_layers else None
        #: why the fit counted the model at full depth ('' when its grid counts repeated layers)
        self.full_depth_reason = "" if repeat_layers else "layer repetition switched off"

    def regime(self, batch: int = 1) -> tuple[GenericFit, GenericFit]:
        """The fits (decode step, prefill), made on first use."""
        if self.fits is None:
            if self.repeat is not None:
                self.full_depth_reason = self.repeat.reason
            if not self.full_depth_reason:
                try:
                    self.fits = self._fit(self.repeat.count)
                except LayerRepeatError as e:
                    self.full_depth_reason = str(e)
                else:
                    if self.fits[0].profile is None:    # the held-out direct count disagrees: full depth
                        self.full_depth_reason = f"repeated layers failed the full-depth check: {self.fits[0].reason}"
            if self.full_depth_reason:
                self.fits = self._fit(self.count)
        return self.fits

    def _fit(self, count: Callable[[int, int], tuple[DecoderStep, DecoderStep]]) -> tuple[GenericFit, GenericFit]:
        """The fits (decode step, prefill) from ``count`` at the grid points and a direct count of
        the full model at the held-out point (which checks ``count`` too)."""
        snapshots: dict[Sizes, tuple[Profile, tuple[int, ...]]] = {}
        steps: dict[Sizes, tuple[Profile, tuple[int, ...]]] = {}
        first = 1

        def count_step(sizes: Sizes) -> tuple[Profile, tuple[int, ...]]:
            if sizes not in steps:
                direct = sizes == held_out(1, self.batch_step, self.offset, first)
                prefill, step = (self.count if direct else count)(*sizes)
                snapshots[sizes] = (prefill.profile, prefill.prefill_kv)
                steps[sizes] = step.profile, (step.step_start, *step.prefill_kv, *step.kv)
            return steps[sizes]

        step = fit_regime(count_step, 1, self.high, self.batch_step, self.offset)
        if step.profile is None and step.differs == (2 * self.batch_step, LENGTHS[0] + self.offset):
            first = 2                     # batch 1's op stream is another (module docstring): fit from 2 on
            step = fit_regime(count_step, 1, self.high, self.batch_step, self.offset, first)
        prefill = fit_regime(lambda s: snapshots[s], 1, self.high, self.batch_step, self.offset, first) \
            if step.profile else step
        if step.profile is not None and prefill.profile is None:
            step = GenericFit(None, "prefill: " + prefill.reason, step.counts)
        return step, prefill

    @property
    def reason(self) -> str:
        """Why every shape is counted directly ('' when the fit answers its region)."""
        return self.regime()[0].reason

    def fits_for(self, batch: int) -> tuple[GenericFit, GenericFit]:
        """The fits (decode step, prefill) that answer ``batch``: the stream's, or for a MoE batch
        size that balanced routing does not split evenly, that batch size's own
        (dispatchprof.llm.odd_batch), made on first use."""
        if batch % self.batch_step == 0:
            return self.regime()
        odd = self.batch_fit(batch)
        return (odd.step, odd.prefill) if odd is not None else (GenericFit(None, "no fit"), GenericFit(None, "no fit"))

    def batch_fit(self, batch: int) -> BatchFit | None:
        """The fits of one MoE batch size outside the stream's (None where the stream has no fit)."""
        if self.regime()[0].profile is None or self.moe is None:
            return None
        if batch not in self.odd:
            count = self.count if self.full_depth_reason else self.repeat.count

            def flat(b: int, n: int) -> tuple[Profile, tuple[int, ...], Profile, tuple[int, ...], int]:
                prefill, step = count(b, n)
                return (step.profile, (step.step_start, *step.prefill_kv, *step.kv), prefill.profile,
                        prefill.prefill_kv, step.step_start)

            self.odd[batch] = fit_batch(flat, batch, *self.moe, self.high, tuple(n + self.offset for n in LENGTHS),
                                        HELD_LENGTH + self.offset)
        return self.odd[batch]

    def covers(self, batch: int, n: int) -> bool:
        """True when (batch, n) is answered from the fit, the whole prefill and decode step profile
        (False: counted directly)."""
        fit = self.fits_for(batch)[0].profile
        if fit is None or not fit.covers((batch, n)):
            return False
        return batch % self.batch_step == 0 or n % self.batch_fit(batch).modulus == 0

    def covers_step(self, batch: int, past: int) -> bool:
        """True when the decode step's own records at cache length ``past`` (from its step_start)
        are answered from the fit: where `covers`, and at a MoE batch size of its own at every
        length of its region once checked (dispatchprof.llm.odd_batch)."""
        if batch % self.batch_step == 0 or self.covers(batch, past):
            return self.covers(batch, past)
        odd = self.batch_fit(batch)
        return odd is not None and odd.steps_everywhere and odd.step.profile.covers((batch, past))

    def prefill(self, batch: int, n: int) -> DecoderStep:
        """The prefill of ``n`` tokens (step_start 0, kv = prefill_kv)."""
        if not self.covers(batch, n):
            return self.count(batch, n)[0]
        profile, kv = self.fits_for(batch)[1].profile.evaluate((batch, n))
        return DecoderStep(profile, 0, kv, kv)

    def step(self, batch: int, past: int) -> DecoderStep:
        """The decode step at cache length ``past`` (its setup prefill included)."""
        if not self.covers(batch, past):
            return self.count(batch, past)[1]
        profile, extra = self.fits_for(batch)[0].profile.evaluate((batch, past))
        layers = (len(extra) - 1) // 2
        return DecoderStep(profile, extra[0], extra[1:1 + layers], extra[1 + layers:])

    def count(self, batch: int, n: int) -> tuple[DecoderStep, DecoderStep]:
        """Direct count: the prefill of ``n`` tokens (a snapshot) and the step after it."""
        return count_decoder(self.model, batch, n, self.host_time)


def count_decoder(model: torch.nn.Module, batch: int, n: int, host_time: bool | str
                  ) -> tuple[DecoderStep, DecoderStep]:
    """Direct count of ``model``: the prefill of ``n`` tokens for ``batch`` sequences (a snapshot)
    and the one-token decode step after it."""
    from transformers import DynamicCache

    ids = [token_ids(model, batch, n), token_ids(model, batch, 1)]
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), OpCounter(host_time=host_time) as c:
        with c.phase("prefill"):
            model(ids[0], past_key_values=cache, use_cache=True)
        prefill, prefill_kv, start = c.profile, _cache_layer_bytes(cache), c.records_counted
        with c.phase("decode"):
            model(ids[1], past_key_values=cache, use_cache=True)
    return DecoderStep(prefill, 0, prefill_kv, prefill_kv), DecoderStep(c.profile, start, prefill_kv,
                                                                        _cache_layer_bytes(cache))


class ShallowCounts:
    """A decoder's direct count at full depth from counts of the same model built with fewer layers
    (dispatchprof.count.layer_repeat): its layers from the block `repeated_block` names on repeat,
    every layer (two and three layers counted), every p layers where their kinds alternate, or
    after a prefix of another kind (`counted_depths`); ``count(batch, n)`` as `count_decoder` gives
    it, or ``reason`` why the model's layers are not repeated ('' when they are)."""

    def __init__(self, model: torch.nn.Module, host_time: bool | str) -> None:
        self.model, self.host_time = model, host_time
        self.reason = shallow_reason(model)
        self.layers = None if self.reason else model.config.num_hidden_layers
        self.container = None if self.reason else layer_container(model)
        self.depths = () if self.reason else counted_depths(model.config)
        self._models: list[torch.nn.Module] | None = None

    def count(self, batch: int, n: int) -> tuple[DecoderStep, DecoderStep]:
        """(prefill, decode step) at full depth from the shallow counts (raises LayerRepeatError)."""
        if self._models is None:
            self._models = [shallow_model(self.model, k) for k in self.depths]
        (pre_s, step_s), (pre_l, step_l) = (count_decoder(m, batch, n, self.host_time) for m in self._models)
        block = repeated_block(self.model.config)
        prefill = repeat_layers_after(pre_s.profile, pre_l.profile, self.container, self.layers, *block)
        step = repeat_layers_after(step_s.profile, step_l.profile, self.container, self.layers, *block)
        prefill_kv = per_layer_after(step_l.prefill_kv, step_s.prefill_kv, self.layers, *block)
        kv = per_layer_after(step_l.kv, step_s.kv, self.layers, *block)
        return (DecoderStep(prefill, 0, prefill_kv, prefill_kv),
                DecoderStep(step, len(prefill.records), prefill_kv, kv))


class ForwardStream:
    """One forward of an encoder (batch, seq_len) or encoder-decoder (batch, seq_len, decoder_len)."""

    def __init__(self, model: torch.nn.Module, encoder_decoder: bool, host_time: bool | str = True) -> None:
        self.model, self.encoder_decoder, self.host_time = model, encoder_decoder, host_time
        self.fits: GenericFit | None = None

    def regime(self, batch: int = 1) -> GenericFit:
        """The fit, made on first use."""
        if self.fits is None:
            self.fits = fit_regime(lambda s: (self.count(*s), ()), 2 if self.encoder_decoder else 1)
        return self.fits

    @property
    def reason(self) -> str:
        """Why every shape is counted directly ('' when the fit answers its region)."""
        return self.regime().reason

    def profile(self, batch: int, seq_len: int, decoder_len: int = 1) -> Profile:
        """The forward's profile (from the fit where it covers the sizes, else counted)."""
        fit = self.regime(batch).profile
        sizes = (batch, seq_len, decoder_len) if self.encoder_decoder else (batch, seq_len)
        if fit is not None and fit.covers(sizes):
            return fit.evaluate(sizes)[0]
        return self.count(batch, seq_len, decoder_len)

    def count(self, batch: int, seq_len: int, decoder_len: int = 1) -> Profile:
        """Direct count of one forward."""
        kwargs = {"input_ids": token_ids(self.model, batch, seq_len)}
        if self.encoder_decoder:
            kwargs["decoder_input_ids"] = token_ids(self.model, batch, decoder_len)
        with torch.no_grad(), OpCounter(host_time=self.host_time) as c:
            with c.phase("forward"):
                self.model(**kwargs)
        return c.profile


__all__ = ["DecoderStep", "DecoderStream", "ForwardStream", "Memo", "ShallowCounts", "batch_step", "count_decoder",
           "experts_of", "fit_regime", "held_out", "length_region"]
