"""Prompt and output lengths of public request datasets, as 101-quantile tables.

Each table in ``data/`` (beside this file) holds the 0th, 1st, ..., 100th percentiles of the
prompt and output token counts of one public per-request trace; its header names the trace, the
commit it was read at, its licence, its size and its mean and median lengths. A draw takes
u ~ U[0, 1) and interpolates the table linearly at u (inverse-CDF sampling of the trace's
distribution), rounded to a whole number >= 1. Prompt and output lengths are drawn
independently: the trace's correlation between them (in the header) is not kept.

ShareGPT (``vllm bench serve``'s default dataset) and MLPerf's OpenOrca set publish no
per-request lengths that could be read here; give their requests as a trace file instead.
"""

from __future__ import annotations

import csv
import os
import random
from dataclasses import dataclass
from functools import lru_cache

from dispatchprof.results.files import read_text

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
#: name -> (table file, what it is)
DATASETS = {
    "azure-conv": ("azure-conv-2023.csv", "Azure LLM inference trace 2023, conversation (Splitwise, ISCA'24)"),
    "azure-code": ("azure-code-2023.csv", "Azure LLM inference trace 2023, coding (Splitwise, ISCA'24)"),
    "arxiv-summarization": ("arxiv-summarization.csv", "arXiv summarization, Llama-2 tokens, <= 4K (Vidur)"),
}


@dataclass(frozen=True)
class QuantileLength:
    """A length distribution given by its 101 percentiles (module docstring)."""

    name: str
    quantiles: tuple[float, ...]

    def draw(self, rng: random.Random) -> int:
        pos = rng.random() * (len(self.quantiles) - 1)
        i = int(pos)
        low, high = self.quantiles[i], self.quantiles[min(i + 1, len(self.quantiles) - 1)]
        return max(1, round(low + (high - low) * (pos - i)))


@lru_cache(maxsize=None)
def dataset_lengths(name: str) -> tuple[QuantileLength, QuantileLength]:
    """(prompt, output) length distributions of dataset ``name``."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    path = os.path.join(DATA, DATASETS[name][0])
    text = read_text(path, "length table")
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    if len(rows) != 101 or [round(float(r["quantile"]) * 100) for r in rows] != list(range(101)):
        raise ValueError(f"{path}: expected the quantiles 0.00, 0.01, ..., 1.00")
    prompt = tuple(float(r["prompt_tokens"]) for r in rows)
    output = tuple(float(r["output_tokens"]) for r in rows)
    return QuantileLength(f"{name} prompt", prompt), QuantileLength(f"{name} output", output)


__all__ = ["DATASETS", "QuantileLength", "dataset_lengths"]
