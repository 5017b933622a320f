"""Calculon's and dispatchprof's step breakdowns side by side on the rows both predict.

For each megatron-lm row (scripts/calculon_side_by_side.py), the seconds of each part of the
step as each tool splits it, and our part minus Calculon's:

    compute      Calculon fw_time + bw_time                 ours "compute"
    recompute    recompute_time                             "recompute"
    tp comm      tp_comm_exposed_time + recomm_exposed_time "tp comm"
    pp p2p       pp_comm_exposed_time                       "pp p2p"
    bubble       bubble_time                                "bubble"
    dp comm      dp_comm_exposed_time                       "dp comm exposed"
    optimizer    optim_step_time                            "optimizer"
    other        total_time less the above                  "cp comm" + "host"

Calculon's parts are its `Llm.get_stats_json` for the Table 5 configurations on its A100 80GB
system (what its llm-validation runs), stored in scripts/data/calculon/tab5_breakdown_caa4b11.json;
``--calculon DIR`` recomputes them from a checkout (and ``--write`` stores them).

Usage: PYTHONPATH=.:scripts python scripts/calculon_breakdown.py [--cache FILE] [--calculon DIR [--write]]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import warnings
from pathlib import Path

from calculon_side_by_side import CALCULON_MODE, CALCULON_MODEL, STORED as OUTPUT, end_to_end
from dispatchprof.train import profile_training
from dispatchprof.train.factors import FACTORS
from validate_training import DATA, Steps, layout_of, scale_out_of

STORED = Path(__file__).parent / "data" / "calculon" / "tab5_breakdown_caa4b11.json"
#: part -> (Calculon's stats fields, our breakdown keys)
PARTS = {"compute": (("fw_time", "bw_time"), ("compute",)),
         "recompute": (("recompute_time",), ("recompute",)),
         "tp comm": (("tp_comm_exposed_time", "recomm_exposed_time"), ("tp comm",)),
         "pp p2p": (("pp_comm_exposed_time",), ("pp p2p",)),
         "bubble": (("bubble_time",), ("bubble",)),
         "dp comm": (("dp_comm_exposed_time",), ("dp comm exposed",)),
         "optimizer": (("optim_step_time",), ("optimizer",)),
         "other": ((), ("cp comm", "host"))}
FIELDS = sorted({f for calc, _ in PARTS.values() for f in calc} | {"total_time"})


def calculon_stats(checkout: str) -> dict[str, dict[str, float]]:
    """'model/mode' -> Calculon's stats fields (`FIELDS`) for Table 5's configurations, run as its
    llm-validation runs them (systems/a100_80g.json, validation/seqsel/tab5/MODEL_MODE.json)."""
    import logging
    sys.path.insert(0, checkout)
    import calculon
    from calculon.llm import Llm
    from calculon.system import System
    base = Path(checkout)
    syst = System(calculon.io.read_json_file(str(base / "systems" / "a100_80g.json")))
    out = {}
    for model in CALCULON_MODEL.values():
        for mode in CALCULON_MODE.values():
            app = Llm.Application(calculon.read_json_file(str(base / "models" / f"{model}.json")))
            exe = Llm.Execution.from_json(calculon.read_json_file(str(base / "validation" / "seqsel" / "tab5" /
                                                                   f"{model}_{mode}.json")))
            llm = Llm(app, logging.getLogger("calculon"))
            llm.compile(syst, exe)
            llm.run(syst)
            stats = llm.get_stats_json(False)
            out[f"{model}/{mode}"] = {f: float(stats[f]) for f in FIELDS}
    return out


def calculon_parts(stats: dict[str, float]) -> dict[str, float]:
    """Calculon's stats as the parts of `PARTS` (seconds); 'other' is what the total has beyond them."""
    parts = {p: sum(stats[f] for f in calc) for p, (calc, _) in PARTS.items() if calc}
    parts["other"] = stats["total_time"] - sum(parts.values())
    return parts


def our_parts(breakdown: dict[str, float]) -> dict[str, float]:
    """Our breakdown as the parts of `PARTS` (seconds)."""
    return {p: sum(breakdown.get(k, 0.0) for k in ours) for p, (_, ours) in PARTS.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", metavar="FILE", help="validate_training.py's cache of counted steps")
    ap.add_argument("--calculon", metavar="DIR", help="recompute Calculon's breakdowns from this checkout")
    ap.add_argument("--write", action="store_true", help="with --calculon: store them in " + STORED.name)
    args = ap.parse_args()
    if args.calculon:
        stats = calculon_stats(args.calculon)
        if args.write:
            STORED.write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")
    else:
        stats = json.loads(STORED.read_text())
    table5 = end_to_end(OUTPUT.read_text())          # (model, mode) -> (published s, Calculon s, error)
    steps = Steps(args.cache)
    for r in (r for r in csv.DictReader(DATA.open()) if r["source"] == "megatron-lm"):
        key = f"{CALCULON_MODEL[r['id'].split('-')[3]]}/{CALCULON_MODE[r['recompute']]}"
        theirs = calculon_parts(stats[key])
        res = profile_training(r["model"], r["device"], layout_of(r), counted=steps.step(r, FACTORS),
                               scale_out_gb_per_s=scale_out_of(r))
        ours = our_parts(res.breakdown)
        published = table5[tuple(key.split("/"))][0]
        print(f"{r['id']} ({r['split']}): published {published:.2f} s, Calculon {stats[key]['total_time']:.2f} s, "
              f"dispatchprof {res.step_s:.2f} s")
        print(f"  {'part':<10} {'Calculon s':>10} {'ours s':>8} {'ours - Calculon':>15}")
        for p in PARTS:
            print(f"  {p:<10} {theirs[p]:>10.3f} {ours[p]:>8.3f} {ours[p] - theirs[p]:>+15.3f}")
    steps.save()
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
