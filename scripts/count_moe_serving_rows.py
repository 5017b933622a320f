"""How many rows of AIConfigurator's silicon sample of DeepSeek-R1/V3 and gpt-oss-120b
`serving_rows.aic_rows` expresses, by model and by device, and how many of its disaggregated rows
there are, how many it expresses (dense models) by engine and device, and how many name no client
count (docs/deploy.md, "What is validated").

    python scripts/count_moe_serving_rows.py PATH/silicon_sample.csv
    # the file ships in aiconfigurator-core 0.12.0 (scripts/setup_validation.sh):
    # aiconfigurator_core/systems/silicon_sample.csv
"""

from __future__ import annotations

import collections
import csv
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_rows import aic_rows  # noqa: E402

MODELS = ("deepseek-r1", "deepseek-v3", "gpt-oss-120b")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: count_moe_serving_rows.py PATH/silicon_sample.csv", file=sys.stderr)
        return 2
    expressed = aic_rows(argv[0])[0]
    rows = [r for r in expressed if r.model in MODELS]
    print(f"rows {len(rows)}")
    for key in ("model", "device"):
        for value, n in sorted(collections.Counter(getattr(r, key) for r in rows).items()):
            print(f"{key} {value} {n}")
    with open(argv[0], encoding="utf-8", newline="") as f:
        disagg = [r for r in csv.DictReader(f) if r["mode"] == "disagg"]
    print(f"disaggregated rows {len(disagg)}")
    unnamed = [r for r in disagg if "silicon_concurrency=" not in r["silicon_data_source"]]
    print(f"disaggregated rows naming no client count {len(unnamed)}")
    for (model, n) in sorted(collections.Counter(r["model_path"] for r in unnamed).items()):
        print(f"  of {model} {n}")
    named = [r for r in disagg if r not in unnamed and r["decode_batch_size"]]
    follows = [r for r in named if int(re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]).group(1))
               == int(r["decode_num_workers"]) * int(r["decode_batch_size"]) * int(r["decode_attention_dp_size"] or 1)]
    print(f"disaggregated rows naming a client count and a decode batch {len(named)}, "
          f"clients = decode workers x decode batch x attention-DP {len(follows)}")
    dense = [r for r in expressed if r.disagg is not None]
    print(f"disaggregated rows expressed {len(dense)}")
    for key, n in sorted(collections.Counter((r.engine, r.raw["backend_version"], r.device, r.model, r.weight_dtype)
                                             for r in dense).items()):
        print(f"  {' '.join(map(str, key))} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
