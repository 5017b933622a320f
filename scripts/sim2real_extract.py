"""Write scripts/data/sim2real.csv: the measured vLLM runs of inference-sim/sim-to-real-accuracy-validation
that dispatchprof expresses, one row per experiment, each with its source and the quoted source lines.

The repository's raw ground truth (per-request traces) is not public; its error_records.csv files carry
each run's measured summary (stage -1: ``actual`` of ttft/e2e mean, p90, p99 and ``itl_mean``, which is
the mean TPOT (E2E_mean - TTFT_mean)/(mean output - 1), experiment/ground_truth.py). The workloads are
inference-perf ``shared_prefix`` profiles: fixed lengths, a system prompt shared by the requests of each
of N prompts, stages of a constant request rate (shapes as inference-sim's
testdata/trained_physics_iter29.json gives them for the same four workload names). Every run: vLLM
0.15.1, max_num_seqs 128, chunked prefill and prefix caching on, block 16 (the design document).

Kept: dense models of the catalog, on a bundled device, without CPU KV offload (not simulated).

    python scripts/sim2real_extract.py MIRROR_GIT_DIR   (a fetch of github.com/inference-sim/sim-to-real-accuracy-validation)
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

SOURCE = ("results_iter36/error_records.csv", "7f3b2702")
METRICS = ("ttft_mean", "ttft_p90", "ttft_p99", "itl_mean", "e2e_mean", "e2e_p90", "e2e_p99")
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "Qwen/Qwen3-14B": "qwen3-14b",
          "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b", "meta-llama/Llama-2-70b-hf": "llama-2-70b"}
DEVICES = {"H100": "H100-SXM", "A100-80GB": "A100-80GB", "L40S": "L40S"}
#: workload -> system prompt tokens, question tokens, output tokens, system prompts, stages (req/s x s)
WORKLOADS = {
    "general": (100, 447, 248, 9, "8x600;20x600"),
    "general-lite": (100, 447, 248, 9, "2.5x600;6x600"),
    "codegen": (100, 466, 247, 11, "5x600;10x600"),
    "roleplay": (150, 600, 251, 10, "6x1200"),
    "reasoning": (100, 934, 1448, 23, "4x1200"),
}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sim2real.csv")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    path, commit = SOURCE
    text = subprocess.run(["git", f"--git-dir={sys.argv[1]}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    runs: dict[str, dict] = {}
    for n, r in enumerate(csv.DictReader(io.StringIO(text)), 2):
        if r["stage_index"] != "-1" or r["metric_name"] not in METRICS:
            continue
        run = runs.setdefault(os.path.basename(r["experiment_folder"]), {"meta": r, "actual": {}, "lines": {}})
        if r["metric_name"] not in run["actual"]:
            run["actual"][r["metric_name"]] = float(r["actual"])
            run["lines"][r["metric_name"]] = n
    rows = []
    for folder, run in sorted(runs.items(), key=lambda kv: int(kv[0].split("-")[0])):
        m = run["meta"]
        if (m["model"] not in MODELS or m["hardware"] not in DEVICES or m["cpu_offload"] != "False"
                or m["workload"] not in WORKLOADS or len(run["actual"]) != len(METRICS)):
            continue
        system, question, output, prompts, stages = WORKLOADS[m["workload"]]
        quote = "; ".join(f"line {run['lines'][k]}: {k} actual {run['actual'][k]:.3f}" for k in METRICS)
        rows.append({"id": folder, "model": MODELS[m["model"]], "hf_model": m["model"], "device": DEVICES[m["hardware"]],
                     "tp": m["tp"], "max_num_batched_tokens": m["max_num_batched_tokens"],
                     "gpu_memory_utilization": m["gpu_mem_util"], "workload": m["workload"],
                     "system_prompt_tokens": system, "question_tokens": question, "output_tokens": output,
                     "system_prompts": prompts, "stages": stages,
                     **{f"{k}_ms": f"{run['actual'][k]:.3f}" for k in METRICS},
                     "source": f"github.com/inference-sim/sim-to-real-accuracy-validation@{commit} {path}",
                     "quote": quote})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(buf.getvalue())
    print(f"{len(rows)} rows -> {OUT}")


if __name__ == "__main__":
    main()
