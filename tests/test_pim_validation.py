"""scripts/validate_pim.py: its rows carry a source and a quote, and a row's prediction is the
shipped model's, checked by hand for vector add."""

import pytest
import validate_pim as vp


def rows():
    return vp.read_rows()


def test_every_row_names_its_source_and_quotes_its_figures():
    for row in rows():
        assert row["source"].startswith("github.com/") and row["quote"]
        for part in vp.PARTS:
            assert float(row[part]) == 0 or row[part] in row["quote"], (row["id"], part)


def test_vector_add_on_60_dpus_by_hand():
    va = next(r for r in rows() if r["workload"] == "VA")
    got = vp.predict(va)
    n = 104_857_600                                   # int32 elements, 60 DPUs, one rank, 16 tasklets
    assert got["cpu_dpu_ms"] == pytest.approx(8 * n / 2.14e9 * 1e3)           # a and b in: 392.0 ms
    per_dpu = n / 60
    # busy = max(compute 1,747,627 adds / 58.56 MOPS = 29.8 ms, bank 12 B each / 0.434 GB/s = 48.3 ms)
    assert got["dpu_ms"] == pytest.approx(max(per_dpu / 58.56e6, 12 * per_dpu / 0.434e9) * 1e3)
    assert got["inter_dpu_ms"] == 0
    assert got["dpu_cpu_ms"] == pytest.approx(4 * n / 1.75e9 * 1e3)           # c back: 239.7 ms


def test_vector_add_on_one_dpu_by_hand():
    va = next(r for r in rows() if r["id"] == "single-va-1")
    got = vp.predict(va)
    n = 2_621_440                                     # int32 elements, all on one DPU
    assert got["cpu_dpu_ms"] == pytest.approx(8 * n / 0.0831e9 * 1e3)         # one DPU's own rate: 252.4 ms
    assert got["dpu_cpu_ms"] == pytest.approx(4 * n / 0.149e9 * 1e3)          # c back at one DPU's 0.149 GB/s
    assert got["inter_dpu_ms"] == 0


def test_select_reads_its_kept_half_back_one_dpu_after_another():
    sel = next(r for r in rows() if r["workload"] == "SEL")
    # 503 MB at 0.149 GB/s = 3,377 ms, + 60 DPUs x 6.18 ms = 371 ms
    assert vp.predict(sel)["dpu_cpu_ms"] == pytest.approx((8 * 125_829_120 / 2 / 0.149e9 + 60 * 6180e-6) * 1e3)


def test_scan_ssa_writes_its_scan_and_reads_it_back():
    # two DPU kernels, each a pass of 8 B read + 8 B written per element: 4,194,304 int64 per DPU
    ssa = next(r for r in rows() if r["workload"] == "SCAN-SSA" and r["split"] == "held-out")
    per_dpu = 251_658_240 / 60
    assert vp.predict(ssa)["dpu_ms"] == pytest.approx(2 * 16 * per_dpu / 0.434e9 * 1e3, rel=1e-3)   # 309.3 ms


def test_rows_are_split_by_the_fixed_rule():
    # strong-scaling logs (full_results) and the one-DPU logs other than VA's are fit rows; the
    # default-size logs (results) and VA on one DPU are held out
    for row in rows():
        folder = row["source"].split()[1].split("/")[2]
        one_dpu_fit = folder == "single_results" and row["dpus"] == "1" and row["workload"] != "VA"
        assert row["split"] == ("fit" if folder == "full_results" or one_dpu_fit else "held-out"), row["id"]
    assert sum(r["split"] == "held-out" for r in rows()) == 9


def test_docs_pim_shows_the_table_as_shipped():
    compared = vp.compare(rows())
    doc = open(vp.os.path.join(vp.ROOT, "docs", "pim.md")).read()
    for split in vp.SPLITS:
        result = vp.summary(compared, split)
        count = sum(r["split"] == split for r in rows())
        line = f"| {split}: total, \\|error\\|, {count} rows | {result['all']:.1%} (worst {result['worst']:.1%}"
        assert line in doc, line
        families = sorted({r["family"] for r in rows() if r["split"] == split})
        cell = ", ".join(f"{family} {result[family]:.1%}" for family in families)
        assert f"| {split}: total by family | {cell} |" in doc, cell
        for part, label in (("dpu_ms", "DPU"), ("cpu_dpu_ms", "CPU-DPU"), ("dpu_cpu_ms", "DPU-CPU")):
            assert f"| {split}: {label} part (signed) | {result[part]:+.1%} |" in doc, (split, label)


def test_transpose_runs_in_rounds_of_the_dpus_it_has():
    import prim_workloads as pw
    trns = next(r for r in rows() if r["workload"] == "TRNS" and r["split"] == "held-out")
    assert pw.workload("TRNS", 60, vp.size_of(trns["size"])).rounds == (60, 4)            # N_ = 64 tiles
    assert pw.workload("TRNS", 480, {"M_": 12288, "m": 16, "N_": 2048, "n": 8}).rounds == (480,) * 4 + (128,)


def test_transpose_on_60_dpus_by_hand():
    trns = next(r for r in rows() if r["workload"] == "TRNS" and r["split"] == "held-out")
    got = vp.predict(trns)
    block = 12288 * 16 * 8                          # elements of one DPU's column tile, every round
    # step 2 per element: 2 int32 multiplies (25.8 MOPS), 1 division (11.27), 1 subtraction (58.56);
    # steps 2 and 3 each read and write every 8-byte element once at 0.434 GB/s; two rounds (60, 4 DPUs)
    per_round = block * (2 / 25.8e6 + 1 / 11.27e6 + 1 / 58.56e6) + 2 * 16 * block / 0.434e9     # 404.4 ms
    assert got["dpu_ms"] == pytest.approx(2 * per_round * 1e3, rel=1e-3)
    # in: 60 then 4 DPUs' blocks, each round on one rank (4 DPUs reach 4 x 0.0831 GB/s at most)
    assert got["cpu_dpu_ms"] == pytest.approx((60 * 8 * block / 2.14e9 + 4 * 8 * block / (4 * 0.0831e9)) * 1e3)
    assert got["dpu_cpu_ms"] == pytest.approx((60 * 8 * block / 1.75e9 + 4 * 8 * block / (4 * 0.149e9)) * 1e3)


def test_median_sensitivity_by_hand():
    # |errors| 1, 2, 3, 10, 20: median 3; leaving out 1 or 2 gives (3 + 10) / 2 = 6.5, leaving out
    # 3 gives (2 + 10) / 2 = 6, leaving out 10 or 20 gives (2 + 3) / 2 = 2.5
    assert vp.median_sensitivity([0.01, -0.02, 0.03, -0.10, 0.20]) == pytest.approx((0.03, 0.025, 0.065))


def test_per_workload_errors_and_repeats():
    a = {"workload": "VA", "split": "fit", "dpus": "60", "size": "n=8", "id": "a"}
    b = {**a, "dpus": "64", "id": "b"}
    c = {**a, "split": "held-out", "id": "c"}          # VA, n=8 on 60 DPUs again: a repeat of a
    compared = [(a, {}, 0.4), (b, {}, -0.1), (c, {}, 0.05)]
    assert vp.by_workload(compared, "fit") == {"VA": [("60", 0.4), ("64", -0.1)]}
    assert vp.by_workload(compared, "held-out") == {"VA": [("60", 0.05)]}
    assert vp.repeats(compared) == [("VA", a, c)]


def test_held_out_rows_as_shipped_no_workload_over_the_bar_and_docs_show_the_spread():
    compared = vp.compare(rows())
    doc = open(vp.os.path.join(vp.ROOT, "docs", "pim.md")).read()
    held = vp.by_workload(compared, "held-out")
    assert max(abs(e) for errs in held.values() for _, e in errs) <= vp.WORKLOAD_BAR
    for split in vp.SPLITS:
        med, low, high = vp.median_sensitivity([e for r, _, e in compared if r["split"] == split])
        line = f"| {split}: median with any one row left out | {low:.1%} .. {high:.1%} |"
        assert line in doc, line
        for workload, errs in vp.by_workload(compared, split).items():
            cell = f"| {split}: {workload} | " + ", ".join(f"{e:+.1%} ({d} DPUs)" for d, e in errs) + " |"
            assert cell in doc, cell


def test_measured_transfer_rates_by_hand():
    by_id = {r["id"]: r for r in rows()}
    # VA on 64 DPUs: a and b in (2 x 167,772,160 int32 = 1,342,177,280 B) in 1,089.146 ms; c out in 435.753 ms
    assert vp.measured_rates(by_id["full-va-64"]) == pytest.approx(
        (1_342_177_280 / 1.089146 / 1e9, 671_088_640 / 0.435753 / 1e9))
    # the same program and bytes on 60 DPUs: 445.942 ms in, 2.4x the rate
    assert vp.measured_rates(by_id["full-va-60"])[0] == pytest.approx(1_342_177_280 / 0.445942 / 1e9)
    # RED reads back 8 bytes per run, under 1 ms: no rate out
    assert vp.measured_rates(by_id["full-red-64"]) == pytest.approx((3_355_443_200 / 2.724774 / 1e9, 0.0))
    # TRNS on 480 DPUs runs 5 rounds (480 x 4, 128) over all 2,048 column tiles of 12,288 x 16 x 8 int64
    assert vp.measured_rates(by_id["full-trns-480"])[0] == pytest.approx(
        8 * 2048 * 12288 * 16 * 8 / 270.141513 / 1e9)
