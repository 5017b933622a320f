"""The prose under docs/deploy.md's "Expert-parallel rows of AIConfigurator's silicon sample" table agrees with
scripts/data/serving_moe_predictions.csv (the 124 Qwen3-235B TensorRT-LLM rows on H100s, the experts
spread over all tp GPUs: EP = tp): signed medians of TPOT by layout and client count, the median
predicted and measured TPOT between 4 and 64 clients, and the 128-client rows' TPOT from 128- to
1,024-token prompts. Errors in percent, predicted / measured - 1; TPOT in ms (4 significant digits)."""

from __future__ import annotations

import statistics

from tests.accuracy_docs import doc_section, read_rows, signed_error

SECTION = "Expert-parallel rows of AIConfigurator's silicon sample"


def _tpot(**where) -> list[dict]:
    return [r for r in read_rows("serving_moe_predictions.csv") if r["metric"] == "tpot_mean"
            and all(v(r[k]) if callable(v) else r[k] == v for k, v in where.items())]


def _text() -> str:
    return " ".join(doc_section("docs/deploy.md", SECTION).split())


def _signed(rows: list[dict]) -> int:
    return round(statistics.median(signed_error(r) for r in rows))


def test_the_row_count():
    assert f"EP 8; {len(_tpot())} rows, concurrency" in _text()


def test_ep4_long_from_16_to_64_clients():
    held = _signed(_tpot(tp="4", split="held-out"))
    by_clients = [_signed(_tpot(tp="4", concurrency=str(c))) for c in (16, 32, 64)]
    assert f"signed median {held:+d}% held out, {min(by_clients):+d}% to {max(by_clients):+d}% there over all" in _text()


def test_ep4_predicted_tpot_from_4_to_64_clients():
    ms = [round(statistics.median(float(r["dispatchprof"]) for r in _tpot(tp="4", concurrency=c))) for c in ("4", "64")]
    assert f"the prediction rises from {ms[0]} to {ms[1]} ms between 4 and 64 clients" in _text()


def test_ep8_short():
    held = _signed(_tpot(tp="8", split="held-out"))
    at4 = _signed(_tpot(tp="8", concurrency="4"))
    assert f"EP 8 short ({held:+d}%: by {-at4}% at 4 clients" in _text()


def test_ep8_at_128_clients_from_128_to_1024_token_prompts():
    rows = {r["isl"]: r for r in _tpot(tp="8", concurrency="128", osl="128")}
    small, large = rows["128"], rows["1024"]
    assert (f"{float(small['measured']):.1f} to {float(large['measured']):,.1f} ms, and the prediction "
            f"{float(small['dispatchprof']):.1f} to {float(large['dispatchprof']):.1f} ms") in _text()
