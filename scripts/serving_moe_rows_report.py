"""The mixture-of-experts rows of AIConfigurator's silicon sample, as predicted: per-row figures
and the table of errors per model, from the ``--errors`` files of scripts/validate_serving.py.

    python scripts/validate_serving.py --setups DIR --cache FILE --match gpt_oss_120b --errors E1.csv
    python scripts/serving_moe_rows_report.py PATH/silicon_sample.csv E1.csv [E2.csv ...]

writes scripts/data/serving_moe_rows_predictions.csv (one line per expressed row of the models in
`MODELS`: its id, split, model, engine, device, tp, ep, clients, lengths, and measured, dispatchprof
and AIConfigurator mean TTFT and TPOT in ms; a prediction left empty was not made) and
scripts/data/serving_moe_rows_table.txt (per model: rows expressed and predicted, median |error|
of TTFT and TPOT held out and fit, dispatchprof beside AIConfigurator over the rows both predict,
per engine and per device where they have at least `MIN_ROWS` held-out rows, and signed medians).

    python scripts/serving_moe_rows_report.py --by-layout PATH/silicon_sample.csv E1.csv [E2.csv ...]

writes instead scripts/data/serving_layout_rows_predictions.csv (every expressed row with pipeline
stages or attention data parallelism, aggregated or on a side of a disaggregated row, and every
disaggregated row of a mixture-of-experts model: `LAYOUT_FIELDS`) and
scripts/data/serving_layout_rows_table.txt (per layout kind, `serving_rows.ServingRow.layout_kind`:
the sample's rows of that kind, those expressed and predicted, median |error| of TTFT and TPOT held
out and fit beside AIConfigurator's over the rows both predict; then the reasons the others of these
kinds are not expressed).
"""

from __future__ import annotations

import collections
import csv
import io
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_rows import MOE, aic_rows  # noqa: E402

from dispatchprof.results.files import write_atomic  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_CSV = os.path.join(ROOT, "scripts", "data", "serving_moe_rows_predictions.csv")
OUT_TABLE = os.path.join(ROOT, "scripts", "data", "serving_moe_rows_table.txt")
#: The newer mixture-of-experts models of the sample (docs/deploy.md, "every aggregated row"); Qwen3-235B has its own file.
MODELS = ("minimax-m2.5", "gpt-oss-120b", "deepseek-r1", "qwen3.5-397b-a17b", "deepseek-v3", "glm-5", "kimi-k2.5")
#: A breakdown (engine, device) is printed where it has at least this many rows.
MIN_ROWS = 10
FIELDS = ("id", "split", "model", "engine", "device", "tp", "ep", "clients", "isl", "osl", "measured_ttft_ms",
          "dispatchprof_ttft_ms", "aiconfigurator_ttft_ms", "measured_tpot_ms", "dispatchprof_tpot_ms",
          "aiconfigurator_tpot_ms")
OUT_LAYOUT_CSV = os.path.join(ROOT, "scripts", "data", "serving_layout_rows_predictions.csv")
OUT_LAYOUT_TABLE = os.path.join(ROOT, "scripts", "data", "serving_layout_rows_table.txt")
#: --by-layout: `FIELDS` and the layout (a disaggregated row's tp, ep, dp_attention and pp: prefill/decode)
LAYOUT_FIELDS = FIELDS[:7] + ("dp_attention", "pp", "layout_kind") + FIELDS[7:]


def read_errors(paths: list[str]) -> dict[str, dict[str, tuple[str, str, str]]]:
    """row id -> metric -> (measured, dispatchprof, AIConfigurator) in ms as written (empty: none)."""
    out: dict[str, dict] = collections.defaultdict(dict)
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                out[r["id"]][r["metric"]] = (r["measured"], r["dispatchprof"], r["aiconfigurator"])
    return out


def lines_of(rows, figures: dict) -> list[dict]:
    """One dict per row of `MODELS` (`FIELDS`)."""
    out = []
    for r in rows:
        if r.model not in MODELS:
            continue
        f = figures.get(r.id, {})
        ttft = f.get("ttft_mean", (f"{1e3 * r.measured['ttft_mean']:.4g}", "", ""))
        tpot = f.get("tpot_mean", (f"{1e3 * r.measured['tpot_mean']:.4g}", "", ""))
        out.append(dict(zip(FIELDS, (r.id, r.split, r.model, r.engine, r.device, r.tp, r.ep, r.concurrency,
                                     r.prompt_len, r.output_len, *ttft, *tpot))))
    return out


def _error(line: dict, who: str, metric: str) -> float | None:
    value = line[f"{who}_{metric}_ms"]
    return None if value == "" else float(value) / float(line[f"measured_{metric}_ms"]) - 1


def _median(values: list[float], signed: bool = False) -> str:
    if not values:
        return "-"
    return f"{100 * statistics.median(values):+.1f}%" if signed else f"{100 * statistics.median(map(abs, values)):.1f}%"


def error_cells(members: list[dict]) -> list[str]:
    """A table line's figures over ``members``: rows predicted, TTFT and TPOT median |error| and signed
    median, rows AIConfigurator predicts too, and both tools' TTFT and TPOT medians over those."""
    ours = [m for m in members if m["dispatchprof_tpot_ms"] != ""]
    both = [m for m in ours if m["aiconfigurator_tpot_ms"] != ""]
    cells = [str(len(ours))]
    for metric in ("ttft", "tpot"):
        e = [_error(m, "dispatchprof", metric) for m in ours]
        cells += [_median(e), _median(e, signed=True)]
    cells.append(str(len(both)))
    for metric in ("ttft", "tpot"):
        cells.append(f"{_median([_error(m, 'dispatchprof', metric) for m in both])} / "
                     f"{_median([_error(m, 'aiconfigurator', metric) for m in both])}")
    return cells


def table(lines: list[dict]) -> str:
    """Per model, then per engine and device of its held-out rows (`MIN_ROWS`): rows, and for TTFT
    and TPOT dispatchprof's median |error| and signed median, then both tools over the rows both predict."""
    head = ("model", "rows", "predicted", "TTFT", "TTFT signed", "TPOT", "TPOT signed", "both", "TTFT ours/AIC",
            "TPOT ours/AIC")
    out = [head]

    def row(label: str, members: list[dict], expressed: int) -> None:
        out.append((label, str(expressed), *error_cells(members)))

    for model in MODELS:
        members = [m for m in lines if m["model"] == model]
        if not members:
            continue
        for split in ("held-out", "fit"):
            part = [m for m in members if m["split"] == split]
            row(f"{model} {split}", part, len(part))
        held = [m for m in members if m["split"] == "held-out" and m["dispatchprof_tpot_ms"] != ""]
        for key in ("engine", "device"):
            for value, n in sorted(collections.Counter(m[key] for m in held).items()):
                if n >= MIN_ROWS and n < len(held):
                    part = [m for m in held if m[key] == value]
                    row(f"  held-out, {value}", part, len(part))
    for split in ("held-out", "fit"):
        part = [m for m in lines if m["split"] == split]
        row(f"all seven, {split}", part, len(part))
    widths = [max(len(c[i]) for c in out) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
                     for cells in out) + "\n"


def layout_lines(rows, figures: dict) -> list[dict]:
    """One dict per row with pipeline stages or attention data parallelism, or disaggregated with
    a mixture-of-experts model (`LAYOUT_FIELDS`)."""
    out = []
    for r in rows:
        if r.layout_kind == "tp/ep" or r.layout_kind == "disagg tp/ep" and r.raw["model_path"] not in MOE:
            continue
        f = figures.get(r.id, {})
        ttft = f.get("ttft_mean", (f"{1e3 * r.measured['ttft_mean']:.4g}", "", ""))
        tpot = f.get("tpot_mean", (f"{1e3 * r.measured['tpot_mean']:.4g}", "", ""))
        sides = r.side_rows() if r.disagg is not None else (r,)
        tp, ep, dp, pp = ("/".join(str(getattr(s, k)) for s in sides) for k in ("tp", "ep", "dp_attention", "pp"))
        out.append(dict(zip(LAYOUT_FIELDS, (r.id, r.split, r.model, r.engine, r.device, tp, ep, dp, pp, r.layout_kind,
                                            r.concurrency, r.prompt_len, r.output_len, *ttft, *tpot))))
    return out


def raw_kind(r: dict) -> str:
    """The layout kind of a silicon-sample row as written (`serving_rows.ServingRow.layout_kind`)."""
    def kind(prefix: str) -> str:
        on = [k for k, col in (("pp", "pp_size"), ("attention-DP", "attention_dp_size"))
              if int(r[prefix + col] or 0) > 1]
        return " + ".join(on) or "tp/ep"
    if r["mode"] != "disagg":
        return kind("")
    prefill, decode = kind("prefill_"), kind("decode_")
    return "disagg " + (prefill if prefill == decode else f"{prefill} / {decode}")


def layout_table(lines: list[dict], sample: str, rows, skipped) -> str:
    """Per layout kind: the sample's rows of that kind as written (aggregated with pp or attention DP;
    every disaggregated mixture-of-experts row), expressed, predicted, and for held-out and fit rows
    dispatchprof's median |error| (and signed) of TTFT and TPOT, then both tools over the rows both
    predict; then why the rest are not among them: the reason ``aic_rows`` skipped them (``skipped``),
    or the other layout they are expressed as (``rows``: InferenceMAX's rows, whose columns store its
    config's TP x EP, scripts/inferencemax_servers.py)."""
    with open(sample, encoding="utf-8", newline="") as f:
        raw = [r for r in csv.DictReader(f) if r["mode"] in ("agg", "disagg")]
    raw = [r for r in raw if raw_kind(r) != "tp/ep" and (r["mode"] == "agg" or r["model_path"] in MOE
                                                         or raw_kind(r) != "disagg tp/ep")]
    in_sample = collections.Counter(raw_kind(r) for r in raw)
    head = ("layout kind", "split", "in sample", "expressed", "predicted", "TTFT", "TTFT signed", "TPOT",
            "TPOT signed", "both", "TTFT ours/AIC", "TPOT ours/AIC")
    out = [head]
    for kind in sorted(set(in_sample) | {"pp", "pp + attention-DP"}):
        members = [m for m in lines if m["layout_kind"] == kind]
        for split in ("held-out", "fit"):
            part = [m for m in members if m["split"] == split]
            out.append((kind, split, str(in_sample[kind]) if split == "held-out" else "", str(len(part)),
                        *error_cells(part)))
    widths = [max(len(c[i]) for c in out) for i in range(len(head))]
    text = "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
                     for cells in out) + "\n"
    expressed = {m["id"] for m in lines}
    why = {s.id: s.reason for s in skipped} | {r.id: f"expressed as {r.layout_kind}" for r in rows}
    reasons = collections.Counter((raw_kind(r), why[r["id"]]) for r in raw if r["id"] not in expressed)
    text += "\nnot expressed (layout kind: reason):\n"
    text += "".join(f"  {n:5d}  {kind}: {reason}\n" for (kind, reason), n in reasons.most_common())
    return text


def main(argv: list[str]) -> int:
    by_layout = argv[:1] == ["--by-layout"]
    paths = argv[1:] if by_layout else argv
    if len(paths) < 2:
        print(f"usage: serving_moe_rows_report.py {'--by-layout ' if by_layout else ''}PATH/silicon_sample.csv "
              f"ERRORS.csv [ERRORS.csv ...]", file=sys.stderr)
        return 2
    for path in paths:
        if not os.path.exists(path):
            print(f"serving_moe_rows_report.py: no file {path}", file=sys.stderr)
            return 2
    (rows, skipped), errors = aic_rows(paths[0]), read_errors(paths[1:])
    if by_layout:
        lines, fields = layout_lines(rows, errors), LAYOUT_FIELDS
        text, out_csv, out_table = layout_table(lines, paths[0], rows, skipped), OUT_LAYOUT_CSV, OUT_LAYOUT_TABLE
    else:
        lines, fields = lines_of(rows, errors), FIELDS
        text, out_csv, out_table = table(lines), OUT_CSV, OUT_TABLE
    buf = io.StringIO()
    w = csv.DictWriter(buf, fields, lineterminator="\n")
    w.writeheader()
    w.writerows(lines)
    write_atomic(out_csv, buf.getvalue())
    write_atomic(out_table, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
