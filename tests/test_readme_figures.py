"""The README's figures outside its checked examples and tables (tests/test_docs_examples.py runs
those) agree with the data they quote: the serving rows both tools predict and the sources they come
from (scripts/data/serving_predictions.csv), the bare HF decode steps measured on the lent H100
(scripts/data/host_time_rows.csv, from scripts/data/h100_lent/), how much faster the sweep table's
eager TPOT is, and the H100's static share of its energy per token in the CLI example."""

from __future__ import annotations

import re

import pytest

from dispatchprof.sim.catalog import load_device
from tests.accuracy_docs import ROOT, read_rows

README = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
RAW = (ROOT / "README.md").read_text(encoding="utf-8")
#: The silicon sample's engines and devices as the README names them.
ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
DEVICES = {"H100-SXM": "H100", "H200": "H200", "B200": "B200", "GB200": "GB200"}


def _silicon_held_out() -> list[dict]:
    return [r for r in read_rows("serving_predictions.csv") if r["split"] == "held-out"
            and not r["id"].startswith(("sim2real-", "trtllm-bench-"))]


def test_the_rows_both_tools_predict():
    both = {r["id"] for r in _silicon_held_out() if r["metric"] == "tpot_mean" and r["aiconfigurator"]}
    assert f"the {len(both)} both tools predict in the first figures" in README, len(both)


def test_the_silicon_samples_engines_and_devices():
    rows = _silicon_held_out()
    engines = ", ".join(ENGINES[e] for e in ENGINES if any(r["engine"] == e for r in rows))
    devices = ", ".join(DEVICES[d] for d in DEVICES if any(r["device"] == d for r in rows))
    assert {r["engine"] for r in rows} <= set(ENGINES) and {r["device"] for r in rows} <= set(DEVICES)
    assert f"AIConfigurator's own silicon sample ({engines} on {devices};" in README


def _bare_steps_ms() -> dict[str, float]:
    return {m: 1e3 * float(r["value"]) for r in read_rows("host_time_rows.csv")
            for m in ("llama-3.2-1b", "llama-3.1-8b") if r["id"] == f"own-h100-{m}-hf-eager"}


def test_the_bare_decode_steps_on_the_lent_h100():
    steps = _bare_steps_ms()
    assert (f"measured {steps['llama-3.2-1b']:.1f} ms (Llama-3.2-1B) and {steps['llama-3.1-8b']:.1f} ms "
            f"(Llama-3.1-8B) (scripts/data/h100_lent/)") in README


def test_the_sweep_tables_eager_tpot_is_two_to_two_and_a_half_times_too_fast():
    """The bare steps against the sweep table's H100 batch-1 TPOT of the same models."""
    steps = _bare_steps_ms()
    tpot = {m: float(c[6]) for line in RAW.splitlines() if line.startswith("| llama-")
            for c in [[x.strip() for x in line.strip("|").split("|")]] for m in [c[0]]
            if c[1] == "H100-SXM" and c[2] == "1"}
    ratios = [steps[m] / tpot[m] for m in steps]
    assert "an eager TPOT here is 2-2.5x too fast for that stack" in README
    assert all(2 <= r <= 2.5 for r in ratios), ratios


def test_the_h100s_static_share_of_its_energy_per_token():
    """From the CLI example's H100 line: static / energy per token, the profile's static power
    times TPOT, and that power as half the TDP."""
    tpot = float(re.search(r"^H100-SXM\s+[\d.]+ ms\s+([\d.]+) ms", RAW, re.M).group(1))
    energy, static = map(float, re.search(r"^H100-SXM\s+([\d.]+) mJ\s+([\d.]+) mJ", RAW, re.M).groups())
    h100 = load_device("H100-SXM")
    assert (f"The H100's energy per token is {100 * static / energy:.0f}% static ({static:.2f} of {energy:.2f} mJ: "
            f"{h100.static_power_w:g} W for {tpot:.2f} ms a token; the profile takes half the "
            f"{h100.tdp_w:g} W TDP") in README
    assert h100.static_power_w == h100.tdp_w / 2
    assert h100.static_power_w * tpot == pytest.approx(static, rel=0.005)
