"""A step's batch composition: the feature vector the step cost model is linear in.

A step runs sequences i with q_i new tokens each, attending to k_i keys (the tokens already in
its cache plus the new ones). Its **composition** is the feature vector (counts of tokens and
keys, no unit beyond that)

    x = (1, T = sum q_i, N = number of sequences, K = sum k_i, A = sum q_i * k_i,
         Ac = sum of q_i * k_i over sequences with q_i > 1, q = max q_i, k = max k_i, q * k)

Linear layers cost an affine function of T (weights read once), logits are computed for the
last token of each sequence (N rows, ``logits_to_keep=1``), attention and the KV-cache append of
K and A (Ac: the causal mask of sequences with more than one new token), and the last three
features carry what transformers computes once per padded batch (positions, rotary tables).

**Causal flash kernels.** Under the compiled and serving runtimes a causal attention op computes
only the score tiles its mask leaves (`dispatchprof.sim.runtime.skips_masked_tiles`), per
sequence: not linear in x, so a composition also carries its sequences' computed and counted
scores (`Composition.scores`; `Composition.flash_share` is their ratio, which the step cost model
applies to such an op's counted work, as direct simulation times a uniform batch).
`Composition.decoding` with more new tokens per sequence than a tile has rows takes every
sequence at the mean cache length.

A mixed step (prefill chunks and decodes) is the flattened batch of its sequences, as a varlen
serving kernel runs it: `Composition.of` its (q_i, k_i), or `Composition.merge` of its parts.

**Its one-token sequences apart.** A composition also carries the features of its sequences with
one new token (`Composition.single`: the same sums over those sequences, their maxima, 1 in the
first place where there are any) and gives those of the others (`Composition.multi`), for a model
that runs its decodes through other ops than its prefills (multi-head latent attention, absorbed
for decodes and expanded for prefills: `dispatchprof.serving.step_cost`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from dispatchprof.sim.attention import FLASH_TILE, flash_scores

FEATURES = ("1", "T", "N", "K", "A", "Ac", "q", "k", "qk")


@dataclass(frozen=True, slots=True)
class Composition:
    """The feature vector of a step (see the module docstring)."""

    x: tuple[float, ...]
    #: (scores a causal flash kernel computes, scores counted) summed over the sequences: per
    #: sequence (`dispatchprof.sim.attention.flash_scores`(q_i, k_i), q_i * k_i); (0, 0): all computed
    scores: tuple[float, float] = (0.0, 0.0)
    #: the features of the sequences with one new token (module docstring); None: as ``x`` where
    #: no sequence has more than one (q = max q_i <= 1), else no such sequence
    one_token: tuple[float, ...] | None = None

    @property
    def single(self) -> tuple[float, ...]:
        """The features of this step's sequences with one new token (module docstring); all 0
        where there are none."""
        if self.one_token is not None:
            return self.one_token
        return self.x if not self.multi_token else (0.0,) * len(self.x)

    @property
    def multi(self) -> tuple[float, ...]:
        """The features of this step's sequences with more than one new token: the sums less
        those of `single`, the step's maxima; all 0 where there are none."""
        if not self.multi_token:
            return (0.0,) * len(self.x)
        s = self.single
        return (1.0, *(a - b for a, b in zip(self.x[1:6], s[1:6])), *self.x[6:])

    @property
    def mixed(self) -> bool:
        """Whether the step has sequences of one new token beside sequences of more."""
        return self.multi_token and self.single[2] > 0

    @property
    def multi_flash_share(self) -> float:
        """`flash_share` of the sequences with more than one new token alone (a one-token
        sequence's scores are all computed: its A is taken off both sums)."""
        computed, counted = self.scores
        a = self.single[4]
        return (computed - a) / (counted - a) if counted > a else 1.0

    @property
    def flash_share(self) -> float:
        """The share of a causal attention op's counted work that a flash kernel computes in this
        step (the varlen kernel runs each sequence's own tiles)."""
        computed, counted = self.scores
        return computed / counted if counted else 1.0

    @staticmethod
    def of(pairs: Sequence[tuple[int, ...]]) -> Composition:
        """From (q_i, k_i) per scheduled sequence (further entries ignored)."""
        t = n = kk = a = ac = 0
        qm = km = computed = 0
        ones = ks = kms = 0                       # the one-token sequences: count, keys, longest
        for q, k, *_ in pairs:
            t += q
            n += 1
            kk += k
            a += q * k
            computed += flash_scores(q, k)
            if q > 1:
                ac += q * k
            else:
                ones, ks, kms = ones + 1, ks + k, max(kms, k)
            qm, km = max(qm, q), max(km, k)
        single = (1 if ones else 0, ones, ones, ks, ks, 0, 1 if ones else 0, kms, kms)
        return Composition((1, t, n, kk, a, ac, qm, km, qm * km), (computed, a), single if qm > 1 else None)

    @staticmethod
    def uniform(batch: int, q: int, past: int) -> Composition:
        """B sequences of q new tokens after ``past`` cached ones."""
        return Composition.of([(q, past + q)] * batch)

    @staticmethod
    def decoding(n: int, computed_sum: float, computed_max: float, q: int = 1) -> Composition:
        """``n`` decoding sequences of q tokens each, holding ``computed_sum`` tokens in all and
        ``computed_max`` at most: k_i = computed_i + q."""
        if n == 0:
            return Composition((1, 0, 0, 0, 0, 0, 0, 0, 0))
        keys = computed_sum + n * q
        # up to a tile's rows every key is computed (exact); more: every sequence at the mean length
        computed = q * keys if q <= FLASH_TILE[0] else n * flash_scores(q, round(keys / n))
        return Composition((1, n * q, n, keys, q * keys, q * keys if q > 1 else 0, q, computed_max + q,
                            q * (computed_max + q)), (computed, q * keys))

    @property
    def multi_token(self) -> bool:
        """Whether a sequence of the step has more than one new token (q = max q_i > 1)."""
        return self.x[6] > 1

    def split(self, groups: int) -> Composition:
        """The share of one of ``groups`` attention data-parallel groups when the step's sequences
        are spread evenly over them: the sums (T, N, K, A, Ac and the scores) divided by
        ``groups``, the maxima kept (`dispatchprof.serving.layout`); its one-token sequences' alike."""
        if groups == 1:
            return self
        x = self.x
        return Composition((x[0], *(v / groups for v in x[1:6]), *x[6:]),
                           (self.scores[0] / groups, self.scores[1] / groups),
                           _shared(self.one_token, groups))

    def padded(self, tokens: int) -> Composition:
        """The same step run with ``tokens`` tokens (a CUDA graph's padded batch: the extra
        tokens go through every token-wise op, and are no sequence and attend to nothing; they
        join a step's one-token sequences where it has no others, else its multi-token ones)."""
        return dataclasses.replace(self, x=(self.x[0], tokens, *self.x[2:]))

    def merge(self, o: Composition) -> Composition:
        """The step running the sequences of both (sums add, maxima take the larger)."""
        a, b = self.x, o.x
        qm, km = max(a[6], b[6]), max(a[7], b[7])
        scores = (self.scores[0] + o.scores[0], self.scores[1] + o.scores[1])
        single = None
        if qm > 1:
            s, t = self.single, o.single
            sums = [u + v for u, v in zip(s[1:6], t[1:6])]
            single = (1 if sums[1] else 0, *sums, max(s[6], t[6]), max(s[7], t[7]), max(s[8], t[8]))
        return Composition((1, *(u + v for u, v in zip(a[1:6], b[1:6])), qm, km, qm * km), scores, single)


def _shared(single: tuple[float, ...] | None, groups: int) -> tuple[float, ...] | None:
    """One-token features spread over ``groups`` (`Composition.split`): sums divided, maxima kept."""
    return None if single is None else (single[0], *(v / groups for v in single[1:6]), *single[6:])
