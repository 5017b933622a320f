"""Published measurements of Samsung's HBM-PIM (Aquabolt-XL) and SK hynix's GDDR6-AiM: the rows of
scripts/data/pim_vendor_rows.csv, read strictly, split, and summed up per device.

    python scripts/pim_vendor_rows.py [CSV]   # the rows, then per device what can be predicted

Each row is one figure a paper states as measured on the silicon (a speedup over a named baseline, an
energy-efficiency gain, or a throughput), with the sentence it stands on quoted word for word
(``quote``) and where the sentence is (``source``). ``measured_low`` .. ``measured_high`` is the
figure (equal unless the paper gives a range); ``metric`` is one of `METRICS`.

A row can be predicted only when its configuration is fully stated (``stated`` = yes): the workload's
shapes and data type, the baseline's device, and what runs on the PIM. ``missing`` says, for every
row with ``stated`` = no, what the quoted text leaves out. No row stated so far: `summary` then
gives no held-out error for the device, rather than one from guessed sizes.

The split is fixed by the row's id alone, before any prediction, by the serving rows' rule
(scripts/serving_rows.py `split_of`: the first byte of the id's SHA-256 divisible by 3 -> fit); the
CSV's ``split`` column must agree with it. Only fit rows may ever be fitted on.
"""

from __future__ import annotations

import csv
import os
import sys
from dataclasses import dataclass

from serving_rows import split_of

ROWS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pim_vendor_rows.csv")
DEVICES = ("HBM-PIM (Aquabolt-XL)", "GDDR6-AiM")
METRICS = ("speedup", "energy efficiency gain", "GFLOP/s")
COLUMNS = ("id", "device", "workload", "metric", "measured_low", "measured_high", "baseline", "split",
           "stated", "missing", "source", "quote")


class VendorRowError(ValueError):
    """A row of the CSV that breaks its rules; the message names the row, the column and what is allowed."""


@dataclass(frozen=True)
class VendorRow:
    """One published figure (see the module docstring for the columns)."""

    id: str
    device: str
    workload: str
    metric: str
    measured_low: float
    measured_high: float
    baseline: str
    split: str
    stated: bool
    missing: str
    source: str
    quote: str


def parse(raw: dict[str, str]) -> VendorRow:
    """One CSV row -> `VendorRow`, or `VendorRowError` naming what is wrong."""
    rid = raw.get("id") or "?"
    absent = [c for c in COLUMNS if not (raw.get(c) or "").strip() and c != "missing"]
    if absent:
        raise VendorRowError(f"row {rid}: empty or absent column(s) {', '.join(absent)}")
    if raw["device"] not in DEVICES:
        raise VendorRowError(f"row {rid}: device {raw['device']!r}; allowed: {', '.join(DEVICES)}")
    if raw["metric"] not in METRICS:
        raise VendorRowError(f"row {rid}: metric {raw['metric']!r}; allowed: {', '.join(METRICS)}")
    try:
        low, high = float(raw["measured_low"]), float(raw["measured_high"])
    except ValueError:
        raise VendorRowError(f"row {rid}: measured_low/measured_high must be numbers, got "
                             f"{raw['measured_low']!r}, {raw['measured_high']!r}") from None
    if not 0 < low <= high:
        raise VendorRowError(f"row {rid}: need 0 < measured_low <= measured_high, got {low}, {high}")
    if raw["split"] != split_of(rid):
        raise VendorRowError(f"row {rid}: split {raw['split']!r} but the fixed rule gives {split_of(rid)!r}")
    if raw["stated"] not in ("yes", "no"):
        raise VendorRowError(f"row {rid}: stated {raw['stated']!r}; allowed: yes, no")
    if raw["stated"] == "no" and not raw["missing"].strip():
        raise VendorRowError(f"row {rid}: stated is no, so 'missing' must say what the source leaves out")
    if raw["stated"] == "yes":
        raise VendorRowError(f"row {rid}: a stated configuration needs a bundled {raw['device']} profile "
                             f"to predict it on, and none is bundled yet")
    return VendorRow(rid, raw["device"], raw["workload"], raw["metric"], low, high, raw["baseline"],
                     raw["split"], raw["stated"] == "yes", raw["missing"], raw["source"], raw["quote"])


def read_rows(path: str = ROWS) -> list[VendorRow]:
    """Every row of ``path``, parsed (`parse`); ids must be unique."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise VendorRowError(f"{path}: columns {reader.fieldnames}; expected {', '.join(COLUMNS)}")
        rows = [parse(raw) for raw in reader]
    ids = [r.id for r in rows]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise VendorRowError(f"{path}: id(s) used twice: {', '.join(twice)}")
    return rows


def summary(rows: list[VendorRow]) -> dict[str, dict[str, object]]:
    """Per device: row counts (``rows``, ``fit``, ``held-out``, ``stated``) and ``held_out_median``,
    the median |error| over held-out stated rows (None when there is none to predict)."""
    out: dict[str, dict[str, object]] = {}
    for device in DEVICES:
        mine = [r for r in rows if r.device == device]
        out[device] = {"rows": len(mine), "fit": sum(r.split == "fit" for r in mine),
                       "held-out": sum(r.split == "held-out" for r in mine),
                       "stated": sum(r.stated for r in mine), "held_out_median": None}
    return out


def print_rows(rows: list[VendorRow]) -> None:
    """The rows, then the per-device summary, as `validate_pim.py` and this script print them."""
    print("HBM-PIM and GDDR6-AiM: published measurements (scripts/data/pim_vendor_rows.csv)")
    for r in rows:
        figure = f"{r.measured_low:g}" if r.measured_low == r.measured_high else f"{r.measured_low:g}-{r.measured_high:g}"
        print(f"  {r.split:8} {r.device:21} {r.workload}: {r.metric} {figure} (vs {r.baseline})")
        print(f"  {'':8} not predictable: the source does not state {r.missing}")
    for device, s in summary(rows).items():
        median = "none (no held-out row states its configuration)" if s["held_out_median"] is None \
            else f"{s['held_out_median']:.1%}"
        print(f"{device}: {s['rows']} rows ({s['fit']} fit, {s['held-out']} held-out), {s['stated']} "
              f"with a stated configuration; held-out median |error|: {median}")


def main(path: str = ROWS) -> int:
    """Print the rows of ``path`` (`print_rows`); 2 with one line on stderr when a row is bad."""
    try:
        rows = read_rows(path)
    except VendorRowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
