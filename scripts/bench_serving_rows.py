"""Benchmark of what validating on measured serving rows costs, in CPU seconds (time.process_time).

Prints (a) two mixture-of-experts setups (Qwen3-30B-A3B on H100-SXM, DeepSeek-V3 on B200, whose
decode and multi-token op streams differ and are merged: `dispatchprof.serving.op_streams`): their
chains counted, then the exact fit of the step cost model alone (`dispatchprof.serving.fit.fit`
on the counted steps); (b) the simulation of fixed rows of AIConfigurator's silicon sample as
scripts/validate_serving.py runs them (`predict_row`: the row's engine preset, its closed-loop
clients): a dense Qwen3-32B row, gpt-oss-120b rows (MoE, timed by
`dispatchprof.serving.layout.LayoutCost`) and two long dense rows with more clients than the KV
cache holds (a queue waits behind decode runs), with the predicted mean TTFT and TPOT to full
precision so that two runs can be compared (``--compare``).

A row's setup (counted model) is kept in ``--setups`` (`kept_setup`), so a second run times the
simulation of the same counted model without counting again.

    .venv/bin/python scripts/bench_serving_rows.py [--setups DIR] [--json FILE] [--compare FILE] [--csv silicon_sample.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_rows import aic_rows  # noqa: E402
from validate_serving import counted_setup, predict_row, silicon_sample, AIC_PYTHON  # noqa: E402

from dispatchprof.llm.models import build_model  # noqa: E402
from dispatchprof.llm.shape_generic import batch_step  # noqa: E402
from dispatchprof.serving.cost import DESIGN  # noqa: E402
from dispatchprof.serving.counting import count_steps  # noqa: E402
from dispatchprof.serving.fit import fit  # noqa: E402
from dispatchprof.serving.repeat import CountMemo  # noqa: E402
from dispatchprof.sim.placement import scenarios_of  # noqa: E402

#: The rows simulated (ids of the silicon sample): a dense row, then mixture-of-experts rows of
#: gpt-oss-120b (36 layers of 128 experts, 4 per token) at 8 and 64 clients, long prompts and long
#: outputs, and one with its experts over 8 GPUs (EP); then the dense rows that cost a validation
#: most: Llama-3.1-70B on one H200, 1024 + 8192 tokens, 128 TensorRT-LLM and 64 vLLM clients (more
#: than the KV cache holds: a queue waits at most steps).
MOE_ROWS = ("2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x1024_c8_tp2_ep1_407",
            "2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x1024_c64_tp2_ep1_357",
            "2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_8192x1024_c64_tp2_ep1_403",
            "2026_04_06_gpt_oss_120b_h200_sxm_vllm_fp4_agg_1024x8192_c64_tp2_ep1_182",
            "2026_03_25_gpt_oss_120b_h200_sxm_trtllm_fp4_agg_1024x8192_c8_tp8_0_ep8_0_1239")
LONG_ROWS = ("2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x8192_c128_tp1_ep1_417",
             "2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_1024x8192_c64_tp1_ep1_467")
ROWS = ("qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x512_c8_tp2_epnone_16", *MOE_ROWS, *LONG_ROWS)
#: The mixture-of-experts models whose fit is timed, and their devices.
FIT_MODELS = (("qwen3-30b-a3b", "H100-SXM"), ("deepseek-v3", "B200"))


def fit_figures(model_name: str, device: str) -> tuple[float, float, int]:
    """(CPU s counting the design's chains, CPU s of the fit alone, ops per step) of one setup."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = time.process_time()
        model = build_model(model_name, generator=True)
        memo = CountMemo(model)
        scenarios = scenarios_of(device)
        step = batch_step(model)
        design = DESIGN if step == 1 else tuple((b * step, tokens) for b, tokens in DESIGN)
        steps = [s for b, tokens in design for s in count_steps(model, b, tokens, scenarios, memo=memo)]
        counting = time.process_time() - cpu
        cpu = time.process_time()
        models = fit(steps)
        fitting = time.process_time() - cpu
    return counting, fitting, next(iter(models.values())).ops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setups", default=None, help="folder keeping the rows' counted setups (pickles)")
    p.add_argument("--json", default=None, help="write the figures and predictions here")
    p.add_argument("--skip-fit", action="store_true", help="time the rows only")
    p.add_argument("--compare", default=None, help="a --json file of another run: the predictions' largest "
                                                 "relative difference and the CPU time ratios")
    p.add_argument("--csv", default=None, help="silicon_sample.csv (default: the validation environment's)")
    args = p.parse_args()
    out: dict = {"rows": {}}
    print(f"{'what':<58} {'CPU s':>8}  result")
    for model, device in () if args.skip_fit else FIT_MODELS:
        counting, fitting, ops = fit_figures(model, device)
        out.setdefault("fits", {})[model] = {"counting_s": counting, "fit_s": fitting, "ops": ops}
        print(f"{model + ' on ' + device + ': counting the chains':<58} {counting:>8.1f}")
        print(f"{model + ': the exact fit alone':<58} {fitting:>8.1f}  {ops} ops per step")
    rows = {r.id: r for r in aic_rows(args.csv or silicon_sample(AIC_PYTHON))[0] if r.id in ROWS}
    memos: dict = {}
    for rid in ROWS:
        r = rows[rid]
        cpu = time.process_time()
        setup = kept_setup(r, args.setups, memos)
        counting = time.process_time() - cpu
        cpu = time.process_time()
        pred = predict_row(r, setup)
        sim = time.process_time() - cpu
        out["rows"][rid] = {"setup_s": counting, "simulation_s": sim, "prediction": pred}
        label = f"{r.model} {r.device} tp{r.tp} ep{r.ep} {r.engine} {r.prompt_len}x{r.output_len} c{r.concurrency}"
        print(f"{label + ': setup':<58} {counting:>8.1f}")
        print(f"{label + ': simulation':<58} {sim:>8.2f}  TTFT {pred.get('ttft_mean', 0)!r} s, "
              f"TPOT {pred.get('tpot_mean', 0)!r} s {pred.get('error', '')}")
    moe = sum(v["simulation_s"] for k, v in out["rows"].items() if k in MOE_ROWS)
    dense = sum(v["simulation_s"] for k, v in out["rows"].items() if k in LONG_ROWS)
    print(f"{'the mixture-of-experts rows: simulation':<58} {moe:>8.2f}")
    print(f"{'the two long dense rows behind a queue: simulation':<58} {dense:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.compare:
        with open(args.compare) as f:
            print(comparison(json.load(f), out))


def comparison(before: dict, after: dict) -> str:
    """Per row in both runs: the simulation's CPU seconds before and after, and the largest
    relative difference of the predicted figures."""
    lines = [f"{'row':<74} {'before s':>9} {'after s':>8} {'x':>6} {'max rel diff':>13}"]
    for rid, b in before["rows"].items():
        a = after["rows"].get(rid)
        if a is None:
            continue
        diff = max((abs(a["prediction"][k] - v) / abs(v) if v else abs(a["prediction"][k])
                    for k, v in b["prediction"].items() if k != "error"), default=0.0)
        ratio = b["simulation_s"] / a["simulation_s"] if a["simulation_s"] else float("inf")
        lines.append(f"{rid:<74} {b['simulation_s']:>9.2f} {a['simulation_s']:>8.2f} {ratio:>6.1f} {diff:>13.1e}")
    for model, a in after.get("fits", {}).items():
        if model in before.get("fits", {}):
            b = before["fits"][model]
            lines.append(f"{'fit of ' + model:<74} {b['fit_s']:>9.2f} {a['fit_s']:>8.2f} {b['fit_s'] / a['fit_s']:>6.1f}")
    return "\n".join(lines)


def kept_setup(r, folder: str | None, memos: dict):
    """The row's counted setup (validate_serving's `counted_setup`, one `CountMemo` per model),
    kept in ``folder`` under its `ServingRow.setup_key` whatever code counted it: a second run
    times the simulation of the same counted model (empty the folder to count again)."""
    path = os.path.join(folder, "-".join(str(v) for v in r.setup_key) + ".pickle") if folder else None
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    if r.model not in memos:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            memos[r.model] = CountMemo(build_model(r.model, generator=True))
    setup = counted_setup(r, None, memos[r.model])
    if path:
        os.makedirs(folder, exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump(setup, f)
    return setup


if __name__ == "__main__":
    main()
