"""How many rows of AIConfigurator's silicon sample of DeepSeek-R1/V3 and gpt-oss-120b
`serving_rows.aic_rows` expresses, by model and by device (docs/deploy.md, "What is validated").

    python scripts/count_moe_serving_rows.py PATH/silicon_sample.csv
    # the file ships in aiconfigurator-core 0.12.0 (scripts/setup_validation.sh):
    # aiconfigurator_core/systems/silicon_sample.csv
"""

from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_rows import aic_rows  # noqa: E402

MODELS = ("deepseek-r1", "deepseek-v3", "gpt-oss-120b")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: count_moe_serving_rows.py PATH/silicon_sample.csv", file=sys.stderr)
        return 2
    rows = [r for r in aic_rows(argv[0])[0] if r.model in MODELS]
    print(f"rows {len(rows)}")
    for key in ("model", "device"):
        for value, n in sorted(collections.Counter(getattr(r, key) for r in rows).items()):
            print(f"{key} {value} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
