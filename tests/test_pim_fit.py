"""scripts/fit_pim.py: the UPMEM figures it fits are the ones devices/upmem.yaml ships, and only
fit rows move them."""

import fit_pim
import pytest
import validate_pim as vp

from dispatchprof.sim.catalog import load_device

SHIPPED = {"host_to_rank_gb_per_s": 2.14, "host_to_units_max_gb_per_s": 4.12, "rank_to_host_gb_per_s": 1.75,
           "units_to_host_max_gb_per_s": 2.99, "unit_to_host_gb_per_s": 0.149, "serial_transfer_us": 6180,
           "mram_gb_per_s": 0.434, "host_to_unit_gb_per_s": 0.0831}


@pytest.fixture(scope="module")
def fitted():
    return fit_pim.fitted()


def test_the_profile_ships_the_fitted_figures(fitted):
    spec = load_device("UPMEM-2556").pim
    for name, value in SHIPPED.items():
        assert getattr(spec, name) == value
        assert fitted[name] == pytest.approx(value, rel=5e-3), name          # shipped at 3 significant digits
    assert spec.unit_mops["mul"]["int32"] == 25.8
    assert fitted["unit_mops.mul.int32"] == pytest.approx(25.8, rel=5e-3)


def test_one_rank_rate_is_the_median_of_bytes_over_time():
    # VA on 60 DPUs: a and b, 2 x 4 B x 167,772,160 = 1.342 GB in 445.942 ms = 3.010 GB/s
    va = next(r for r in fit_pim.fit_rows() if r["id"] == "full-va-60")
    assert fit_pim._rate([va], "bytes_in", "cpu_dpu_ms") == pytest.approx(8 * 167_772_160 / 0.445942 / 1e9)


def test_one_dpu_rate_is_the_median_over_the_one_dpu_rows_only():
    single = [r for r in fit_pim.fit_rows() if r["dpus"] == "1"]
    assert sorted(r["workload"] for r in single) == ["RED", "SCAN-RSS", "SCAN-SSA", "SEL", "UNI"]
    # bytes in: RED 8 B x 6,553,600 in 615.817 ms; SCAN-SSA, SCAN-RSS, SEL, UNI 8 B x 3,932,160 in
    # 368.336, 378.630, 395.900, 385.228 ms: 0.0851, 0.0854, 0.0831, 0.0795, 0.0817 GB/s, median 0.0831
    rates = sorted([8 * 6_553_600 / 0.615817 / 1e9] + [8 * 3_932_160 / t / 1e9 for t in (0.368336, 0.378630, 0.395900, 0.385228)])
    assert fit_pim.fitted()["host_to_unit_gb_per_s"] == pytest.approx(rates[2])
    assert rates[2] == pytest.approx(0.0831, abs=5e-5)


def test_the_serial_fit_solves_two_rows_exactly():
    # t = b / B + u L through (1 GB, 10 DPUs, 2.1 s) and (1 GB, 110 DPUs, 3.1 s): L = 10 ms, B = 0.5 GB/s
    rows = [{"workload": "SEL", "dpus": "10", "size": "n=250000000", "dpu_cpu_ms": "2100"},
            {"workload": "SEL", "dpus": "110", "size": "n=250000000", "dpu_cpu_ms": "3100"}]
    b, lat = fit_pim._serial(rows)
    assert (b, lat) == (pytest.approx(0.5), pytest.approx(10_000))


def test_held_out_rows_never_reach_the_fit(monkeypatch, fitted):
    changed = [dict(r, cpu_dpu_ms="1.0", dpu_ms="1.0", dpu_cpu_ms="1.0") if r["split"] == "held-out" else r
               for r in vp.read_rows()]                          # every held-out time set to 1 ms
    monkeypatch.setattr(vp, "read_rows", lambda: changed)
    assert fit_pim.fitted() == fitted
