"""Requests to serve: read from a trace file or drawn by a generator.

A request is its arrival time (seconds from the start of the trace), its prompt length and the
number of tokens it generates (``output_tokens >= 1``; the prefill gives the first one).

Trace files: JSON Lines, one object per line such as
``{"arrival_s": 0.0, "prompt_tokens": 128, "output_tokens": 32}`` (an optional ``"images"``: the
number of images in the prompt), or CSV with those column names. A bad row raises ValueError
naming the file and its line number. Requests keep the order of the file (the "trace order"
of results); arrivals need not be sorted.

Generator: ``rate`` requests/s with Poisson (exponential gaps, seeded) or fixed (1/rate apart)
arrivals starting at 0 (a closed loop ignores them: `dispatchprof.serving.engine`). Lengths are
a whole number, ``uniform:LOW:HIGH`` (both ends included, seeded), ``random:N`` with a range
ratio r (`random_length`: ``vllm bench serve --dataset-name random``'s draw), or a dataset's
distribution (`datasets.py`: ``--dataset NAME`` draws both lengths from it).
"""

from __future__ import annotations

import csv
import json
import math
import random
from dataclasses import dataclass
from typing import Literal, Protocol, Sequence

from dispatchprof.results.files import read_text

Arrivals = Literal["poisson", "fixed"]
ARRIVALS: tuple[Arrivals, ...] = ("poisson", "fixed")
FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
#: The most tokens a request's prompt or output may have (time: a million-token output is a
#: million engine steps, minutes of simulation for that request alone).
MAX_REQUEST_TOKENS = 1 << 20


@dataclass(frozen=True, slots=True)
class Request:
    """One request: arrival time (s), prompt tokens (>= 1), output tokens (>= 1), images (>= 0)."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    images: int = 0


@dataclass(frozen=True, slots=True)
class Length:
    """A length: ``low`` when ``low == high``, else uniform over low..high (both included)."""

    low: int
    high: int

    def draw(self, rng: random.Random) -> int:
        return self.low if self.low == self.high else rng.randint(self.low, self.high)


class LengthDraw(Protocol):
    """A length distribution: a whole number >= 1 per draw."""

    def draw(self, rng: random.Random) -> int: ...


def random_length(n: int, range_ratio: float) -> Length:
    """``vllm bench serve --dataset-name random``'s length: uniform over the whole numbers
    floor(n * (1 - r)) .. ceil(n * (1 + r)), at least 1 (vllm/benchmarks/datasets.py
    RandomDataset, 0.10-0.11; the tokenizer's special tokens are not subtracted here)."""
    if not 0 <= range_ratio < 1:
        raise ValueError(f"the random range ratio must be in [0, 1), got {range_ratio!r}")
    return Length(max(1, math.floor(n * (1 - range_ratio))), max(1, math.ceil(n * (1 + range_ratio))))


def parse_length(text: str | int, what: str = "length", range_ratio: float = 0.0) -> Length:
    """``"128"`` or ``128`` -> Length(128, 128); ``"uniform:64:512"`` -> Length(64, 512);
    ``"random:1024"`` -> `random_length`(1024, range_ratio)."""
    if isinstance(text, int) and not isinstance(text, bool):
        parts = [str(text)]
    else:
        parts = str(text).split(":")
    try:
        if len(parts) == 1:
            low = high = int(parts[0])
        elif len(parts) == 3 and parts[0] == "uniform":
            low, high = int(parts[1]), int(parts[2])
        elif len(parts) == 2 and parts[0] == "random":
            n = int(parts[1])
            if n < 1:
                raise ValueError
            return random_length(n, range_ratio)
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"{what} must be a whole number >= 1, uniform:LOW:HIGH (such as uniform:64:512) or "
                         f"random:N (such as random:1024), got {text!r}") from None
    if low < 1 or high < low:
        raise ValueError(f"{what} must be >= 1 (and LOW <= HIGH), got {text!r}")
    if high > MAX_REQUEST_TOKENS:
        raise ValueError(f"{what} must be at most {MAX_REQUEST_TOKENS:,} tokens (time: each output token is an "
                         f"engine step), got {text!r}")
    return Length(low, high)


def generate_requests(rate: float, num_requests: int, prompt_len: str | int | LengthDraw = 128,
                      output_len: str | int | LengthDraw = 32, *, arrivals: Arrivals = "poisson",
                      seed: int = 0, images: int = 0) -> list[Request]:
    """``num_requests`` requests at ``rate`` requests/s (see the module docstring), each with
    ``images`` images in its prompt; lengths drawn prompt first, then output, per request."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a number of requests per second > 0, got {rate!r}")
    if isinstance(num_requests, bool) or not isinstance(num_requests, int) or num_requests < 1:
        raise ValueError(f"num_requests must be a whole number >= 1, got {num_requests!r}")
    if isinstance(images, bool) or not isinstance(images, int) or images < 0:
        raise ValueError(f"images must be a whole number >= 0, got {images!r}")
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {ARRIVALS}, got {arrivals!r}")
    prompt = parse_length(prompt_len, "prompt length") if isinstance(prompt_len, (str, int)) else prompt_len
    output = parse_length(output_len, "output length") if isinstance(output_len, (str, int)) else output_len
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(num_requests):
        if i:
            t += rng.expovariate(rate) if arrivals == "poisson" else 1.0 / rate
        out.append(Request(t, prompt.draw(rng), output.draw(rng), images))
    return out


def read_trace(path: str) -> list[Request]:
    """Requests of a JSONL or CSV trace file (by content: a first line starting with '{' is JSONL)."""
    text = read_text(path, "trace")
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    rows = _jsonl_rows(path, lines) if first.lstrip().startswith("{") else _csv_rows(path, text)
    out = [request_of(row, f"{path}: line {line}") for line, row in rows]
    if not out:
        raise ValueError(f"{path}: no requests in the trace")
    return out


def _jsonl_rows(path: str, lines: Sequence[str]) -> list[tuple[int, dict]]:
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {n}: not a JSON object ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}: line {n}: expected a JSON object with {', '.join(FIELDS)}")
        rows.append((n, row))
    return rows


def _csv_rows(path: str, text: str) -> list[tuple[int, dict]]:
    reader = csv.DictReader(text.splitlines())
    missing = [f for f in FIELDS if f not in (reader.fieldnames or ())]
    if missing:
        raise ValueError(f"{path}: line 1: the CSV header needs the columns {', '.join(FIELDS)}; "
                         f"missing {', '.join(missing)}")
    return [(reader.line_num, row) for row in reader]


def request_of(row: dict, where: str) -> Request:
    """A Request from one trace row (numbers or numeric strings); errors name ``where``."""
    values = {}
    for name in FIELDS + ("images",):
        raw = row.get(name, 0 if name == "images" else None)
        if raw is None or raw == "":
            raise ValueError(f"{where}: missing {name!r}")
        try:
            value = float(raw) if name == "arrival_s" else _whole(raw)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{where}: {name} must be a number, got {raw!r}") from None
        values[name] = value
    if not math.isfinite(values["arrival_s"]) or values["arrival_s"] < 0:
        raise ValueError(f"{where}: arrival_s must be >= 0 seconds, got {row['arrival_s']!r}")
    for name in ("prompt_tokens", "output_tokens"):
        if values[name] < 1:
            raise ValueError(f"{where}: {name} must be >= 1, got {row[name]!r}")
        if values[name] > MAX_REQUEST_TOKENS:
            raise ValueError(f"{where}: {name} must be at most {MAX_REQUEST_TOKENS:,} (time: each output token is an "
                             f"engine step), got {row[name]!r}")
    if values["images"] < 0:
        raise ValueError(f"{where}: images must be >= 0, got {row['images']!r}")
    return Request(values["arrival_s"], values["prompt_tokens"], values["output_tokens"], values["images"])


def _whole(raw: object) -> int:
    value = float(raw) if isinstance(raw, str) else raw
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError
    return int(value)
