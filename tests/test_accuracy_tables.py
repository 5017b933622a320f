"""docs/accuracy.md's as-shipped table (the page's first table: one line per validation) and the
figures of its short sections agree with the data each validation wrote, recomputed here
independently of the scripts:

- serving: scripts/data/serving_predictions.csv, serving_moe_predictions.csv and
  serving_disagg_predictions.csv (``scripts/validate_serving.py --errors FILE``; 4 significant
  digits, so a median may differ from the doc's by rounding: 0.1 percentage point at most);
- published rows: published_predictions.csv; kernels: h100_lent_predictions.csv; training:
  training_predictions.csv and calculon_predictions.csv (a median rounds to the doc's decimal);
- host time: the runs kept in host_time_fit_2core_runs.txt (each run's printed medians);
- the two Qwen3-235B/DeepSeek-V3 lines with no per-row file, and PIM: the figures of the page that
  documents them (docs/deploy.md, docs/pim.md), themselves checked by their own tests where data exist.

A row's error is predicted / measured - 1 (the scripts' rule)."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.accuracy_docs import ROOT, doc_section, median_abs_error, pct, read_rows, signed_error, table_rows

DOC = "docs/accuracy.md"
METRICS = {"TTFT": "ttft_mean", "TPOT": "tpot_mean"}


def _table() -> dict[str, list[str]]:
    """The as-shipped table's lines by the name of their validation (the first cell's link text)."""
    out = {}
    for line in table_rows((ROOT / DOC).read_text()):
        m = re.fullmatch(r"\[(.+?)\]\(#[\w-]+\)", line[0])
        assert m, f"the first cell links to its section: {line[0]!r}"
        out[m.group(1)] = line
    return out


TABLE = _table()


def _line(name: str) -> tuple[str, str, str]:
    """(held-out rows, dispatchprof, the peer) cells of a validation's line."""
    _, _, held, ours, peer, _ = TABLE[name]
    return held, ours, peer


def _metrics(cell: str) -> dict[str, float]:
    """"TPOT 8.2%, TTFT 38.8%" (in a cell) -> {"TPOT": 8.2, "TTFT": 38.8}."""
    return {m: float(v) for m, v in re.findall(r"(TPOT|TTFT) ([\d.]+)%", cell)}


def _peer(cell: str) -> tuple[dict[str, float], tuple[float, float, int] | None]:
    """"AIConfigurator: TPOT a%, TTFT b% (dispatchprof c%, d% on these N)" -> ({TPOT: a, TTFT: b}, (c, d, N))."""
    theirs, _, ours = cell.partition(" (dispatchprof ")
    assert theirs.startswith("AIConfigurator: "), cell
    m = re.fullmatch(r"([\d.]+)%, ([\d.]+)% on these (\d+)\)", ours)
    return _metrics(theirs), (float(m.group(1)), float(m.group(2)), int(m.group(3))) if m else None


def _check_serving(name: str, rows: list[dict]) -> None:
    """A serving line against its held-out rows: the count, dispatchprof's medians over the rows it
    predicts, AIConfigurator's (and dispatchprof's, where quoted) over the rows both predict."""
    held, ours, peer = _line(name)
    held_rows = [r for r in rows if r["split"] == "held-out"]
    by_metric = {m: [r for r in held_rows if r["metric"] == c and r["dispatchprof"]] for m, c in METRICS.items()}
    assert int(held) == len(by_metric["TTFT"]) == len(by_metric["TPOT"]), name
    for metric, figure in _metrics(ours).items():
        assert figure == pytest.approx(median_abs_error(by_metric[metric]), abs=0.1), (name, metric)
    theirs, same = _peer(peer)
    both = {m: [r for r in part if r["aiconfigurator"]] for m, part in by_metric.items()}
    assert set(theirs) == set(_metrics(ours)) == set(METRICS)
    for metric, figure in theirs.items():
        assert figure == pytest.approx(median_abs_error(both[metric], "aiconfigurator"), abs=0.1), (name, metric)
    if same is None:            # no "on these N": AIConfigurator predicts every held-out row
        assert all(len(both[m]) == len(by_metric[m]) for m in METRICS), name
    else:
        tpot, ttft, n = same
        assert n == len(both["TPOT"]) == len(both["TTFT"]) < int(held), name
        assert tpot == pytest.approx(median_abs_error(both["TPOT"]), abs=0.1), name
        assert ttft == pytest.approx(median_abs_error(both["TTFT"]), abs=0.1), name


def test_the_table_names_every_validation_once():
    assert list(TABLE) == [
        "Dense models served under load", "Qwen3-235B, expert-parallel, TensorRT-LLM on H100",
        "Qwen3-235B, vLLM and SGLang on H200", "DeepSeek-V3, TensorRT-LLM FP8 on 8 H200",
        "More MoE models, every aggregated row: gpt-oss-120b, MiniMax-M2.5, DeepSeek-R1/V3, Kimi-K2.5, Qwen3.5-397B",
        "Disaggregated prefill and decode", "Disaggregated mixture-of-experts: DeepSeek-R1/V3, Kimi-K2.5",
        "Published single-batch and engine figures",
        "Eager and compiled decode: the host's share", "Kernels on a lent H100",
        "Mixture-of-experts layers against measured kernels", "Attention against measured kernels",
        "Training",
        "PIM on UPMEM silicon"]
    headings = {l[3:] for l in (ROOT / DOC).read_text().splitlines() if l.startswith("## ")}
    anchors = {re.sub(r"[^\w -]", "", h.lower()).replace(" ", "-") for h in headings}
    for line in TABLE.values():
        assert re.search(r"\(#([\w-]+)\)", line[0]).group(1) in anchors, line[0]


def test_dense_serving():
    _check_serving("Dense models served under load", read_rows("serving_predictions.csv"))


def test_qwen3_235b_expert_parallel_on_h100():
    _check_serving("Qwen3-235B, expert-parallel, TensorRT-LLM on H100", read_rows("serving_moe_predictions.csv"))


def test_more_moe_models():
    """serving_moe_rows_predictions.csv holds one line per expressed row (both metrics, empty where
    not predicted): as the long per-metric rows the other serving files hold."""
    rows = [{"split": r["split"], "metric": METRICS[m], "measured": r[f"measured_{m.lower()}_ms"],
             "dispatchprof": r[f"dispatchprof_{m.lower()}_ms"], "aiconfigurator": r[f"aiconfigurator_{m.lower()}_ms"]}
            for r in read_rows("serving_moe_rows_predictions.csv") for m in METRICS]
    _check_serving("More MoE models, every aggregated row: gpt-oss-120b, MiniMax-M2.5, DeepSeek-R1/V3, Kimi-K2.5, Qwen3.5-397B",
                   rows)


def test_disaggregated():
    _check_serving("Disaggregated prefill and decode", read_rows("serving_disagg_predictions.csv"))


def test_disaggregated_moe():
    """serving_layout_rows_predictions.csv's disaggregated rows (one line per expressed row, both
    metrics, empty where not predicted)."""
    rows = [{"split": r["split"], "metric": METRICS[m], "measured": r[f"measured_{m.lower()}_ms"],
             "dispatchprof": r[f"dispatchprof_{m.lower()}_ms"], "aiconfigurator": r[f"aiconfigurator_{m.lower()}_ms"]}
            for r in read_rows("serving_layout_rows_predictions.csv") if r["layout_kind"].startswith("disagg")
            for m in METRICS]
    _check_serving("Disaggregated mixture-of-experts: DeepSeek-R1/V3, Kimi-K2.5", rows)


def test_the_lines_without_rows_quote_deploy_md():
    """No per-row file holds these predictions: the line quotes docs/deploy.md's figures."""
    deploy = " ".join(doc_section("docs/deploy.md", "Expert-parallel rows of AIConfigurator's silicon sample").split())
    held, ours, peer = _line("Qwen3-235B, vLLM and SGLang on H200")
    (o, t), (p, q) = (_metrics(ours)[m] for m in ("TPOT", "TTFT")), (_peer(peer)[0][m] for m in ("TPOT", "TTFT"))
    assert f"held-out ({held}) TPOT {o}% against AIConfigurator's {p}%" in deploy
    assert f"TTFT {t}% against {q}%" in deploy
    held, ours, peer = _line("DeepSeek-V3, TensorRT-LLM FP8 on 8 H200")
    (o, t), (p, q) = (_metrics(ours)[m] for m in ("TPOT", "TTFT")), (_peer(peer)[0][m] for m in ("TPOT", "TTFT"))
    assert f"({held} held-out rows" in deploy
    assert f"median |error| TTFT {t}% (AIConfigurator {q}%), TPOT {o}% ({p}%)" in deploy


def test_published():
    rows = read_rows("published_predictions.csv")
    held_rows = [r for r in rows if r["split"] == "held-out"]
    held, ours, peer = _line("Published single-batch and engine figures")
    families = ("TPOT", "TTFT", "energy", "throughput")
    by_family = ", ".join(f"{f} {pct(median_abs_error([r for r in held_rows if r['family'] == f]))}"
                          for f in families)
    assert (held, ours, peer) == (str(len(held_rows)), f"{pct(median_abs_error(held_rows))} ({by_family})", "-")


def _host_runs(runtime: str) -> list[float]:
    """Each kept run's printed held-out median (percent) of ``runtime``."""
    text = (ROOT / "scripts" / "data" / "host_time_fit_2core_runs.txt").read_text()
    return [float(f) for f in re.findall(rf"^  held-out runtime {runtime}\s+([\d.]+)%", text, re.M)]


def test_host_share():
    held, ours, peer = _line("Eager and compiled decode: the host's share")
    eager, compiled = _host_runs("eager"), _host_runs("compiled")
    assert len(eager) == len(compiled) == 3 and len(set(compiled)) == 1 and len(set(eager)) > 1
    assert ours == f"eager {min(eager)}-{max(eager)}%, compiled {compiled[0]}% (three runs)" and peer == "-"
    split = [r for r in read_rows("host_time_rows.csv") if r["split"] == "held-out"]
    assert held == str(len(split))


def _lent(phase: str, runtime: str) -> list[dict]:
    return [r for r in read_rows("h100_lent_predictions.csv") if (r["phase"], r["runtime"]) == (phase, runtime)]


def test_kernels_on_a_lent_h100():
    held, ours, peer = _line("Kernels on a lent H100")
    prefill, decode = _lent("prefill", "eager"), _lent("decode", "compiled")
    rows = read_rows("h100_lent_predictions.csv")
    assert held == f"{len({r['id'] for r in rows})} (no split)" and {r["split"] for r in rows} == {"all"}
    assert ours == (f"prefill {pct(median_abs_error(prefill))} (eager), decode kernels "
                    f"{pct(median_abs_error(decode))} (compiled)") and peer == "-"
    # the section: "every decode row and every compiled prefill is predicted short", "-44% at 64 x 2,048 for
    # Llama-3.1-8B"
    assert all(signed_error(r) < 0 for r in rows if r["phase"] == "decode" or r["runtime"] == "compiled")
    assert "every decode row and every compiled prefill is predicted short" in _section("Kernels on a lent H100")
    (worst,) = [r for r in decode if (r["model"], r["batch"], r["tokens"]) == ("llama-3.1-8b", "64", "2048")]
    assert f"({signed_error(worst):+.0f}% at 64 x 2,048 for Llama-3.1-8B)" in _section("Kernels on a lent H100")


def _moe_kernel_table() -> tuple[dict, dict]:
    """scripts/data/moe_efficiency_table.txt: (profile, dtype) -> (points, |error| %, signed %) of its
    check, and (profile, dtype) -> the pooled implied efficiency."""
    text = (ROOT / "scripts" / "data" / "moe_efficiency_table.txt").read_text()
    check = {(a, b): (int(n), float(e), float(sg)) for a, b, n, e, sg in
             re.findall(r"^(\S+) +(\S+) +(\d+) +[\d.]+% +[-+][\d.]+% +([\d.]+)% +([-+][\d.]+)%$", text, re.M)}
    implied = {(a, b): float(v) for a, b, v in re.findall(r"^\w+ +(\S+) +(bf16|fp8|fp4) +([\d.]+) +\d+$", text, re.M)}
    return check, implied


def test_moe_kernels_quote_their_table():
    from dispatchprof.sim.catalog import load_device
    check, implied = _moe_kernel_table()
    held, ours, peer = _line("Mixture-of-experts layers against measured kernels")
    n, err, signed = check["every", "bf16/fp8/fp4"]
    wn, werr, _ = check["every", "w4a16_mxfp4"]
    assert held == f"{n} (no split: nothing fitted)" and peer == "-"
    assert ours == f"routed experts' time {err:.1f}% (bf16, fp8, NVFP4); gpt-oss's MXFP4 {werr:.1f}%"
    text = _section("Mixture-of-experts layers against measured kernels")
    assert f"{err:.1f}% (signed {signed:+.1f}%) over {n:,} points" in text

    def span(values, fmt="{:.1f}"):
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}"
    figured = [e for (p, d), (_, e, _) in check.items() if p != "every" and d != "w4a16_mxfp4"]
    assert f"by system and dtype {span(figured)}%" in text
    newer = ("H100-SXM", "H200", "B200", "GB200", "B300", "GB300")
    blackwell = ("B200", "GB200", "B300", "GB300")
    assert f"fp8 is timed {span([-check[p, 'fp8'][2] for p in newer])}% fast on H100 to GB300" in text
    assert f"({span([implied[p, 'fp8'] for p in newer], '{:.2f}')} implied" in text
    assert f"the profiles' {span([load_device(p).matrix_efficiency['fp8'] for p in newer], '{:.2f}')})" in text
    assert f"NVFP4 is timed {span([check[p, 'fp4'][2] for p in blackwell])}% slow on Blackwell" in text
    hopper = span([-check[p, "w4a16_mxfp4"][2] for p in ("H100-SXM", "H200")])
    assert f"timed {hopper}% fast on H100 and H200 and {span([-check[p, 'w4a16_mxfp4'][2] for p in blackwell])}% " \
        f"fast on Blackwell ({wn} points with L40S's)" in text
    assert f"timed at most {-min(check[p, 'fp8'][2] for p in newer):.0f}% fast" in text


def test_training():
    rows = read_rows("training_predictions.csv")
    held_rows = [r for r in rows if r["split"] == "held-out"]
    calculon = read_rows("calculon_predictions.csv")
    held, ours, peer = _line("Training")
    assert held == str(len(held_rows)) and ours == f"{pct(median_abs_error(held_rows))} (tokens/s per GPU)"
    assert peer == (f"Calculon on its {len(calculon)} Megatron-LM rows: {pct(median_abs_error(calculon, 'calculon'))} "
                    f"(dispatchprof {pct(median_abs_error(calculon))})")
    text = _section("Training")
    split = {s: sum(r["split"] == s for r in rows) for s in ("fit", "held-out")}
    assert f"**Rows**: {len(rows)} published training configurations" in text
    assert f"({split['fit']} fit, {split['held-out']} held out)" in text
    signed = lambda part: f"{statistics.median(signed_error(r) for r in part):+.1f}%"  # noqa: E731
    assert f"torchtitan ({signed([r for r in held_rows if r['source'] == 'torchtitan'])} signed, held out)" in text
    assert f"FP8 rows ({signed([r for r in held_rows if r['precision'] == 'fp8'])})" in text


def test_pim_quotes_pim_md():
    """docs/pim.md's held-out line (checked against validate_pim.py by tests/test_pim_validation.py)."""
    pim = (ROOT / "docs" / "pim.md").read_text()
    held, ours, peer = _line("PIM on UPMEM silicon")
    figure = re.fullmatch(r"([\d.]+%) \(total time\)", ours).group(1)
    assert f"| held-out: total, \\|error\\|, {held} rows | {figure} (worst" in pim and peer == "-"
    spread = re.search(r"\| held-out: median with any one row left out \| ([\d.]+% \.\. [\d.]+%) \|", pim).group(1)
    assert f"(leaving one out gives {spread})" in _section("PIM on UPMEM silicon")


def _section(heading: str) -> str:
    return " ".join(doc_section(DOC, heading).split())


# --- the serving section's prose ---------------------------------------------------------------------
SERVING = "Dense models served under load"
SILICON_EXCLUDED = ("trtllm-bench-", "sim2real-")


def test_the_serving_sections_counts():
    rows = read_rows("serving_predictions.csv")
    silicon = {r["id"] for r in rows if not r["id"].startswith(SILICON_EXCLUDED)}
    split = {s: len({r["id"] for r in rows if r["split"] == s}) for s in ("fit", "held-out")}
    text = _section(SERVING)
    assert f"**{len(silicon):,}** closed-loop benchmarks" in text
    assert f"({split['fit']} fit, {split['held-out']} held out)" in text
    assert f"; {len(read_rows('sim2real.csv'))} vLLM runs under open-loop load" in text
    assert f"TensorRT-LLM's {len(read_rows('published_serving.csv'))} published offline throughputs" in text
    assert len({r["id"] for r in rows if r["id"].startswith("trtllm-bench-")}) == len(read_rows("published_serving.csv"))


def _held(**where) -> list[dict]:
    return [r for r in read_rows("serving_predictions.csv") if r["split"] == "held-out" and r["dispatchprof"]
            and all(r[k] == v for k, v in where.items())]


def test_the_serving_sections_misses():
    text = _section(SERVING)
    trt = _held(engine="trtllm", metric="ttft_mean")
    both = [r for r in trt if r["aiconfigurator"]]
    m = re.search(r"under TensorRT-LLM \(([\d.]+)%; ([\d.]+)% against ([\d.]+)%\)", text)
    assert m, "the TensorRT-LLM TTFT figures"
    for quoted, figure in zip(map(float, m.groups()), (median_abs_error(trt), median_abs_error(both),
                                                       median_abs_error(both, "aiconfigurator"))):
        assert quoted == pytest.approx(figure, abs=0.1)
    gb200 = _held(device="GB200", metric="tpot_mean")
    m = re.search(r"TPOT on GB200's (\d+) rows \(([\d.]+)%\)", text)
    assert m and int(m.group(1)) == len(gb200)
    assert float(m.group(2)) == pytest.approx(median_abs_error(gb200), abs=0.1)
    # "predicted short from 8 clients up (A% to B% signed) and C% at 4": the signed median of each
    # client count with at least 5 held-out rows
    counts = {c for c in {r["concurrency"] for r in trt} if sum(r["concurrency"] == c for r in trt) >= 5}
    assert counts == {"4", "8", "16", "32", "64", "128"}
    medians = {c: statistics.median(signed_error(r) for r in trt if r["concurrency"] == c) for c in counts}
    above = [medians[c] for c in counts - {"4"}]
    assert all(m < 0 for m in above), medians
    m = re.search(r"predicted short from 8 clients up \((-\d+)% to (-\d+)% signed\) and ([-+]\d+)% at 4", text)
    assert m and tuple(map(int, m.groups())) == (round(max(above)), round(min(above)), round(medians["4"]))
    vllm = _held(engine="vllm", metric="ttft_mean")
    m = re.search(r"under vLLM \(([\d.]+)%; ([\d.]+)% against AIConfigurator's ([\d.]+)% on the rows both predict\)",
                  text)
    vboth = [r for r in vllm if r["aiconfigurator"]]
    for quoted, figure in zip(map(float, m.groups()), (median_abs_error(vllm), median_abs_error(vboth),
                                                       median_abs_error(vboth, "aiconfigurator"))):
        assert quoted == pytest.approx(figure, abs=0.1)
    b200 = [r for r in _held(device="B200", engine="vllm", metric="ttft_mean") if r["model"] == "llama-3.1-70b"]
    assert "short for Llama-3.1-70B on B200" in text and statistics.median(map(signed_error, b200)) < 0


def test_the_published_sections_figures():
    rows = read_rows("published_predictions.csv")
    text = _section("Published single-batch and engine measurements")
    split = {s: sum(r["split"] == s for r in rows) for s in ("fit", "held-out")}
    assert f"the {len(rows)} rows of scripts/data/published_gpu.csv" in text
    assert f"({split['fit']} fit, {split['held-out']} held out)" in text
    group = lambda hw: pct(median_abs_error([r for r in rows if r["hardware"] == hw and r["runtime"] == "serving"]))  # noqa: E731
    assert f"(MI300X {group('MI300X')}, H200 {group('H200')}, B200 {group('B200')} over all rows)" in text


def _attention_kernel_table() -> tuple[dict, dict, dict, list, dict]:
    """scripts/data/attention_kernels_table.txt: (system, engine) -> its implied figure; system -> the
    pooled implied figure; (system, engine) -> per check column (gqa, expanded, absorbed: points,
    |error| %, signed %) or None; the decode check's every line (gqa, mla); the fp8 part: its
    prefill and decode every lines (as the decode's) and engine -> the measured fp8 / bf16 ratio of
    grouped-query decode."""
    text = (ROOT / "scripts" / "data" / "attention_kernels_table.txt").read_text()
    implied_part, pooled_part, _curve, check_part, decode_part, fp8_part, _ = text.split("\n\n")
    implied = {(a, b): float(v) for a, b, v in re.findall(r"^(\w+) +(\w+ [\w.]+) +([\d.]+) +\d+$", implied_part, re.M)}
    pooled = {a: float(v) for a, v in re.findall(r"^(\w+) +\S+ +([\d.]+)$", pooled_part, re.M)}
    cell = r"(?:(\d+) +([\d.]+)% / +([-+][\d.]+)%|-)"
    check = {}
    for m in re.finditer(rf"^(\w+) +((?:\w+ [\w.]+)?) +{cell} +{cell} +{cell}$", check_part, re.M):
        groups = m.groups()[2:]
        check[m.group(1), m.group(2)] = [None if g[0] is None else (int(g[0]), float(g[1]), float(g[2]))
                                         for g in (groups[k:k + 3] for k in range(0, 9, 3))]
    decode = re.search(rf"^every +{cell} +{cell}$", decode_part, re.M).groups()
    decode = [(int(decode[k]), float(decode[k + 1]), float(decode[k + 2])) for k in (0, 3)]
    prefill8, decode8 = (m.groups() for m in re.finditer(r"^every +(.*)$", fp8_part, re.M))
    prefill8, decode8 = ([(int(g[k]), float(g[k + 1]), float(g[k + 2])) for k in range(0, len(g), 3)]
                         for g in (re.match(rf"{cell} +{cell} +{cell} +{cell}$", prefill8[0]).groups(),
                                   re.match(rf"{cell} +{cell}$", decode8[0]).groups()))
    ratios = {e: float(v) for e, v in re.findall(r"^(\w+) +([\d.]+) +\d+ ", fp8_part.split("over bf16")[1], re.M)}
    return implied, pooled, check, decode, {"prefill": prefill8, "decode": decode8, "ratio": ratios}


def _attention_shares() -> dict[str, list[float]]:
    """The kernel table's last block: system -> implied efficiency at (1024 x 64, 1024 x 8, 4096 x
    64, 4096 x 8, 8192 x 64, 8192 x 8) prompt tokens x query heads per GPU."""
    text = (ROOT / "scripts" / "data" / "attention_kernels_table.txt").read_text().split("\n\n")[-1]
    return {m.group(1): [float(v) for v in m.group(2).split()]
            for m in re.finditer(r"^(\w+) +((?:[\d.]+ *){6})$", text, re.M)}


def test_the_nvidia_profiles_take_the_pooled_implied_attention_figure():
    """Each system's pooled implied figure, rounded to two places, is its bundled profile's
    attention_efficiency for bf16 and fp16."""
    import attention_kernels
    from dispatchprof.sim.catalog import load_device
    _, pooled, _, _, _ = _attention_kernel_table()
    assert len(pooled) == 8
    for system, value in pooled.items():
        device = load_device(attention_kernels.SYSTEMS[system])
        assert device.attention_efficiency == {"bf16": round(value, 2), "fp16": round(value, 2)}, system
        assert device.attention_work_curve == {}, system


def test_attention_kernels_quote_their_table():
    implied, pooled, check, (gqa_decode, mla_decode), fp8 = _attention_kernel_table()
    gqa, expanded, absorbed = check["every", ""]
    (gqa8, fmha8, expanded8, _), (gqa_decode8, mla_decode8) = fp8["prefill"], fp8["decode"]
    held, ours, peer = _line("Attention against measured kernels")
    fp8_points = gqa8[0] + fmha8[0] + expanded8[0] + gqa_decode8[0] + mla_decode8[0]
    assert held == f"{expanded[0] + gqa_decode[0] + mla_decode[0] + fp8_points} ({gqa[0]} grouped-query prefill points fit)"
    assert peer == "-"
    assert ours == (f"prefill: MLA expanded {expanded[1]:.1f}%, absorbed {absorbed[1]:.1f}%, grouped-query {gqa[1]:.1f}% "
                    f"(fit); decode: grouped-query {gqa_decode[1]:.1f}%, MLA {mla_decode[1]:.1f}%; KV cache in fp8: "
                    f"prefill {gqa8[1]:.1f}%, decode {gqa_decode8[1]:.1f}% (MLA {mla_decode8[1]:.1f}%)")
    text = _section("Attention against measured kernels")
    for name, (points, off, signed) in (("grouped-query attention", gqa8), ("FP8 attention kernels", fmha8),
                                        ("MLA's expanded prefill", expanded8), ("Decode is timed fast: grouped-query",
                                                                                gqa_decode8), ("MLA", mla_decode8)):
        assert re.search(rf"{re.escape(name)}\s+{off:.1f}% (off )?\(signed {re.escape(f'{signed:+.1f}')}%, {points}\b", text), name
    ratio = fp8["ratio"]
    shares = _attention_shares()
    blackwell = [v for s, v in shares.items() if s[:3] in ("b20", "b30", "gb2", "gb3")]
    assert (f"from {min(v[1] for v in blackwell):.2f}-{max(v[1] for v in blackwell):.2f} at 1,024 tokens and 8 "
            f"query heads per GPU to {min(v[4] for v in blackwell):.2f}-{max(v[4] for v in blackwell):.2f} at 8,192 "
            f"and 64 on Blackwell") in text
    quoted = (f"take {ratio['trtllm']:.2f} (TensorRT-LLM), {ratio['vllm']:.2f} (vLLM) and {ratio['sglang']:.2f} "
              f"(SGLang) of their bf16 time")
    assert quoted in text
    assert quoted in " ".join((ROOT / "docs" / "serving.md").read_text().split())

    def span(values, fmt="{:.1f}"):
        return f"{fmt.format(min(values))}-{fmt.format(max(values))}"
    cells = [c for key, c in check.items() if key[0] != "every"]
    assert f"{gqa[0]} causal grouped-query attentions" in text and f"{expanded[0]} DeepSeek-V3 context MLA" in text
    assert f"({span(implied.values(), '{:.2f}')} by engine, {span(pooled.values(), '{:.2f}')} pooled per" in text
    assert f"MLA's expanded prefill is timed {expanded[1]:.1f}% off (signed {expanded[2]:+.1f}%) over {expanded[0]}" in text
    assert f"absorbed form {absorbed[1]:.1f}% (signed {absorbed[2]:+.1f}%" in text
    assert f"grouped-query prefill, are {gqa[1]:.1f}% off (signed {gqa[2]:+.1f}%), " \
           f"{span([c[0][1] for c in cells if c[0]])}% by system and engine" in text
    hopper_sglang = {s: check[s, e] for s, e in check if e.startswith("sglang") and s in ("h100_sxm", "h200_sxm")}
    assert f"({span([c[2][2] for c in hopper_sglang.values()])}% slow in it)" in text
    assert f"the expanded form is {span([-c[1][2] for c in hopper_sglang.values()])}% fast" in text
    l40s = [c for (s, e), c in check.items() if s == "l40s" and e.startswith("sglang")][0]
    assert f"(expanded {-l40s[1][2]:.1f}% fast)" in text
    blackwell = [check[s, e][1][2] for s, e in check if s[:3] in ("b20", "b30", "gb2", "gb3") and check[s, e][1]]
    assert f"({span(blackwell)}% slow)" in text
    assert (f"({gqa_decode[0]} grouped-query and {mla_decode[0]} MLA decode kernels, the same heads): grouped-query "
            f"decode attention is timed {gqa_decode[1]:.1f}% off (signed {gqa_decode[2]:+.1f}%), MLA's absorbed decode "
            f"{mla_decode[1]:.1f}% fast (signed {mla_decode[2]:+.1f}%)") in text
    deploy = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    assert (f"expanded form is timed {expanded[2]:+.1f}% and the absorbed form {absorbed[2]:+.1f}%, as grouped-query "
            f"prefill attention (the points that chose the profiles' `attention_efficiency`) is timed {gqa[2]:+.1f}%") in deploy
