"""AIConfigurator's estimate of serving rows, for scripts/validate_serving.py (run in .venv-validation).

Reads JSON lines on stdin, one AIConfigurator silicon-sample row each (its own column names), and
writes one JSON line per row: {"id", "ttft_ms", "tpot_ms"} or {"id", "error"}. One process serves
every row: the performance database of each (system, backend) is loaded once, at its newest shipped
version (the measured engine versions have no database of their own: AIConfigurator refuses them).
Model names whose config the wheel does not ship are mapped to a shipped one of the same architecture.

    .venv-validation/bin/python scripts/aic_estimate.py < rows.jsonl
"""

from __future__ import annotations

import io
import json
import logging
import sys
from contextlib import redirect_stdout

#: Row model -> a model config AIConfigurator ships with the same architecture.
SHIPPED_CONFIG = {"meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
                  "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-8B",
                  "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
                  "nvidia/Qwen3-32B-NVFP4": "Qwen/Qwen3-32B"}
LAYOUT = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
#: A disaggregated row's layout: each side's workers, batch and parallel sizes (empty in an aggregated row).
LAYOUT += tuple(f"{side}_{f}" for side in ("prefill", "decode") for f in ("num_workers",) + LAYOUT)


def main() -> None:
    logging.disable(logging.WARNING)
    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    versions: dict[tuple[str, str], str] = {}
    for line in sys.stdin:
        row = json.loads(line)
        key = (row["system"], row["backend"])
        try:
            if key not in versions:
                versions[key] = get_latest_database_version(system=key[0], backend=key[1])
            layout = {f: int(float(row[f])) for f in LAYOUT if row.get(f) not in (None, "", "0")}
            with redirect_stdout(io.StringIO()):
                r = cli_estimate(SHIPPED_CONFIG.get(row["model_path"], row["model_path"]), row["system"],
                                 mode=row["mode"], backend_name=row["backend"], backend_version=versions[key],
                                 isl=int(row["isl"]), osl=int(row["osl"]),
                                 gemm_quant_mode=row["gemm_quant_mode"] or None,
                                 moe_quant_mode=row["moe_quant_mode"] or None, **layout)
            out = {"id": row["id"], "ttft_ms": float(r.ttft), "tpot_ms": float(r.tpot)}
        except Exception as e:                   # a row AIConfigurator cannot predict: its reason is the result
            out = {"id": row["id"], "error": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
