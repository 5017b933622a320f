"""The fit of scripts/validate_published.py: the grids its parameters are chosen from, the
`Fitted` parameters, and the stages that choose them on the fit rows' predictions (per device
mme and unoverlapped_fraction, per runtime host figures, per device and weight dtype the
weight-only efficiency, per device static power and dynamic energy scale, per serving engine
what its per-sequence time draws). Predictions come in as row id -> variant name
(`variant_key`) -> (figure, dynamic J, s, tokens); nothing here simulates."""

from __future__ import annotations

import dataclasses
import itertools
import statistics

MME = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)                           # per device: matrix_memory_efficiency
#: Per runtime: the host figures tried, each a tuple of (profile field, value). A serving engine is
#: fitted as its own runtime (`runtime_of`): a C++ executor and a Python scheduler differ in what
#: they pay per step and per sequence.
HOST = {"eager": [(("host_overhead_us", v),) for v in (4.0, 7.0, 10.0, 15.0, 20.0, 30.0)],
        "compiled": [(("graph_launch_us", v),) for v in (20.0, 100.0, 300.0)],
        "serving": [(("graph_launch_us", g), ("sequence_host_us", s)) for g in (20.0, 100.0, 300.0)
                    for s in (0.0, 5.0, 10.0, 20.0, 40.0, 80.0)]}
WEIGHT_ONLY = ("int8", "int4")                                 # weight-only quantized rows
WOE = (1.0, 0.85, 0.7, 0.55, 0.4)                              # per device and dtype: weight_only_efficiency
#: Per device, second stage: unoverlapped_fraction (the share of an op's shorter side, compute or
#: memory, that its kernel does not hide under the longer).
UNOVERLAPPED = (0.0, 0.25, 0.5, 1.0)
DYNAMIC = (1.0, 1.5, 2.0, 2.5, 3.0)      # per device with two energy fit rows or more: dynamic energy scale
READINGS = {False: "static power only", True: "the kernels' power"}  # a serving engine's per-sequence time


def runtime_of(row: dict) -> str:
    """What a row's host figures are fitted per: its runtime, and for serving its engine."""
    return f"serving/{row['engine']}" if row["runtime"] == "serving" else row["runtime"]


def host_label(host: tuple) -> str:
    """The host figures' part of a variant's name: their values, comma-separated."""
    return ",".join(str(float(v)) for _, v in host)


def variant_key(mme: float, host: tuple, unoverlapped: float = 0.0, woe: float | None = None) -> str:
    """A variant's name: "mme|host", then "|u<fraction>" when unoverlapped_fraction is not 0, then
    "|woe" for a weight-only int row."""
    return (f"{mme}|{host_label(host)}" + (f"|u{unoverlapped}" if unoverlapped else "")
            + (f"|{woe}" if woe is not None else ""))


def sequence_seconds(row: dict, host: tuple) -> tuple[float, float]:
    """(host seconds before the kernels, of them per-sequence seconds) of ``row``'s prediction
    under a serving engine's ``host`` figures: each step's graph launch costs
    `dispatchprof.sim.timing.graph_host_us` for the row's batch, the device idle meanwhile; a
    continuous row's prediction is one mean step, a static row's has output_len steps (the
    prefill and the decode steps). (0, 0) for a runtime without a per-sequence cost."""
    from dispatchprof.sim.catalog import load_device
    from dispatchprof.sim.timing import graph_host_us

    figures = dict(host)
    if not figures.get("sequence_host_us"):
        return 0.0, 0.0
    d = dataclasses.replace(load_device(row["hardware"]), **figures)
    batch = int(row["batch"])
    steps = 1 if row["scheduling"] == "continuous" else int(row["output_len"])
    launch = graph_host_us(d, batch)
    return steps * launch * 1e-6, steps * (launch - graph_host_us(d, 0)) * 1e-6


def dynamic_energy(row: dict, pred: tuple, f: Fitted) -> float:
    """One device's dynamic joules of ``pred``: the simulated kernels', plus, where ``f`` reads the
    engine's per-sequence time as busy (``f.busy``), that time at the kernels' mean dynamic power."""
    _, dynamic, time, _ = pred
    if not f.busy.get(runtime_of(row)):
        return dynamic
    host, per_sequence = sequence_seconds(row, f.host[runtime_of(row)])
    return dynamic * (1.0 + per_sequence / (time - host))


def energy(row: dict, pred: tuple, f: Fitted, static_w: float, scale: float = 1.0) -> float:
    """Joules per token of ``row``'s whole group: tp x (scale x dynamic + static power x time) / tokens."""
    _, _, time, tokens = pred
    return int(row["tp"]) * (scale * dynamic_energy(row, pred, f) + static_w * time) / tokens


def error(measured: float, predicted: float) -> float:
    return (predicted - measured) / measured


def weight_only(row: dict) -> str | None:
    return row["weight_dtype"] if row["weight_dtype"] in WEIGHT_ONLY else None


@dataclasses.dataclass
class Fitted:
    """The fitted parameters: mme and unoverlapped_fraction per device, host figures per runtime
    (`runtime_of`), weight_only_efficiency per (device, weight dtype), static power and a dynamic
    energy scale per device."""

    mme: dict
    host: dict
    woe: dict = dataclasses.field(default_factory=dict)
    unoverlapped: dict = dataclasses.field(default_factory=dict)
    static: dict = dataclasses.field(default_factory=dict)
    dynamic: dict = dataclasses.field(default_factory=dict)
    busy: dict = dataclasses.field(default_factory=dict)

    def key(self, row: dict) -> str:
        """The variant of ``row``'s predictions these parameters select."""
        dev, wd = row["hardware"], weight_only(row)
        return variant_key(self.mme[dev], self.host[runtime_of(row)], self.unoverlapped.get(dev, 0.0),
                           self.woe.get((dev, wd), 1.0) if wd else None)


def _time_error(rs: list[dict], preds: dict, f: Fitted) -> float:
    """Sum over the rows ``rs`` of |error| of their time figures (each capped at 1) under ``f``."""
    return sum(min(1.0, abs(error(float(r["value"]), preds[r["id"]][f.key(r)][0]))) for r in rs)


def fit_time_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(fit rows with a time metric, those of them without weight-only int weights)."""
    fit_rows = [r for r in rows if r["split"] == "fit" and r["measure"] != "energy_per_token"]
    return fit_rows, [r for r in fit_rows if not weight_only(r)]


def profile_mme(device: str) -> float:
    """The MME value nearest ``device``'s own profile figure (matrix_memory_efficiency, else
    memory_efficiency): what a device without time fit rows keeps."""
    from dispatchprof.sim.catalog import load_device

    d = load_device(device)
    return min(MME, key=lambda m: abs(m - (d.matrix_memory_efficiency or d.memory_efficiency)))


def fit_hosts(rows: list[dict], preds: dict) -> Fitted:
    """First stage, with unoverlapped_fraction 0: per device mme and per runtime host value (least
    capped |error| of the fit rows' times, weight-only int rows aside; a device without such rows
    keeps `profile_mme`), then per device and weight dtype the weight_only_efficiency (the same on
    those rows)."""
    fit_rows, plain = fit_time_rows(rows)
    devices = sorted({r["hardware"] for r in rows})
    grids = {runtime_of(r): HOST[r["runtime"]] for r in rows}         # what each runtime's figures may be
    runtimes = sorted(grids)
    # a row depends on its device's mme and its runtime's host figures only: for each choice of
    # host figures, each device's best mme is chosen on that device's rows alone
    by_device = {dev: [r for r in plain if r["hardware"] == dev] for dev in devices}
    best, best_err = None, float("inf")
    for hosts in itertools.product(*(grids[rt] for rt in runtimes)):
        host = dict(zip(runtimes, hosts))
        mme, total = {}, 0.0
        for dev in devices:
            if not by_device[dev]:
                mme[dev] = profile_mme(dev)
                continue
            errs = {m: _time_error(by_device[dev], preds, Fitted({dev: m}, host)) for m in MME}
            mme[dev] = min(MME, key=errs.__getitem__)
            total += errs[mme[dev]]
        if total < best_err - 1e-12:
            best, best_err = Fitted(mme, host), total
    for dev, wd in sorted({(r["hardware"], weight_only(r)) for r in fit_rows if weight_only(r)}):
        group = [r for r in fit_rows if r["hardware"] == dev and weight_only(r) == wd]
        best.woe[(dev, wd)] = min(WOE, key=lambda w: _time_error(group, preds, dataclasses.replace(
            best, woe={**best.woe, (dev, wd): w})))
    return best


def fit_unoverlapped(rows: list[dict], preds: dict, first: Fitted) -> Fitted:
    """Second stage, at the first stage's host figures and weight-only efficiencies: per device the
    (unoverlapped_fraction, mme) pair with the least capped |error| of its fit rows' times
    (weight-only int rows aside); on a tie, the smaller fraction. A device without such rows keeps
    its mme and a fraction of 0 (the profiles' own)."""
    _, plain = fit_time_rows(rows)
    out = dataclasses.replace(first, mme=dict(first.mme), unoverlapped={})
    for dev in sorted(first.mme):
        group = [r for r in plain if r["hardware"] == dev]
        if not group:
            out.unoverlapped[dev] = 0.0
            continue
        u, m = min(itertools.product(UNOVERLAPPED, MME), key=lambda um: _time_error(
            group, preds, dataclasses.replace(out, mme={**out.mme, dev: um[1]}, unoverlapped={dev: um[0]})))
        out.mme[dev], out.unoverlapped[dev] = m, u
    return out


def fit_energy(rows: list[dict], preds: dict, f: Fitted) -> Fitted:
    """Energy under the time parameters ``f``. Per device: static power (the median of its energy
    fit rows' solutions) and, on a device with two energy fit rows or more, a scale of the
    profile's dynamic energy (pJ per FLOP and per bit) from DYNAMIC (least mean relative error).
    Per serving engine with a per-sequence cost and energy fit rows, what that time draws
    (`dynamic_energy`): static power only (the device idle, as the simulator's timeline has it)
    or also the step kernels' mean dynamic power (the device busy: an engine whose host work
    overlaps the device's); the reading with the least summed |error| of every energy fit row,
    the idle one on a tie."""
    energy_rows = [r for r in rows if r["split"] == "fit" and r["measure"] == "energy_per_token"]
    engines = sorted({runtime_of(r) for r in energy_rows if sequence_seconds(r, f.host[runtime_of(r)])[1]})
    best, best_err = None, float("inf")
    for busy in itertools.product((False, True), repeat=len(engines)):
        out = dataclasses.replace(f, static={}, dynamic={}, busy=dict(zip(engines, busy)))
        total = 0.0
        for dev in sorted({r["hardware"] for r in energy_rows}):
            group = [r for r in energy_rows if r["hardware"] == dev]
            parts = [(float(r["value"]) * pred[3] / int(r["tp"]), dynamic_energy(r, pred, out), pred[2])
                     for r in group for pred in [preds[r["id"]][f.key(r)]]]

            def static_for(scale: float) -> float:
                return statistics.median(max(0.0, (m - scale * dyn) / t) for m, dyn, t in parts)

            def energy_error(scale: float) -> float:
                w = static_for(scale)
                return statistics.fmean(abs(scale * dyn + w * t - m) / m for m, dyn, t in parts)

            scale = min(DYNAMIC if len(group) > 1 else (1.0,), key=energy_error)
            out.dynamic[dev], out.static[dev] = scale, static_for(scale)
            total += energy_error(scale) * len(group)
        if total < best_err - 1e-12:
            best, best_err = out, total
    return best
