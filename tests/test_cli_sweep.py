"""Sweeps (every combination, one count per model shape, rows kept when they do not fit, the
Pareto front, the plot; on a Dask cluster too) and the input checks of the loaders."""

from __future__ import annotations

import csv
import io
import json

import pytest
import yaml

from dispatchprof.cli import main
from dispatchprof.errors import DeviceProfileError, ModelSpecError
from dispatchprof.llm import sweep as sweep_module
from dispatchprof.llm.catalog import check_config_fields
from dispatchprof.llm.sweep import Shape, shapes, sweep
from dispatchprof.report.sweep import pareto_front
from dispatchprof.results.sweep import COLUMNS
from dispatchprof.sim.loader import parse_profile
from tests.test_cli_inputs import TINY, good_device


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    small = good_device()
    small["devices"]["tiny-gpu"]["memory_capacity_gb"] = 2e-4      # 200 kB: fits batch 1, not batch 8
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    return path


def test_pareto_front_by_hand():
    # (s/token, J/token), both lower-is-better: (2, 3) loses to (2, 2) on cost; (3, 3) loses to all three
    # of (1, 3), (2, 2), (3, 1), which trade latency against cost and all stay
    assert pareto_front([(1, 3), (2, 2), (3, 1), (2, 3), (3, 3)]) == [0, 1, 2]
    assert pareto_front([(1, 1), (2, 2), (0.5, 0.5)]) == [2]
    assert pareto_front([(1, 1), (1, 1)]) == [0, 1]                    # equal points do not dominate each other


def test_sweep_command_writes_a_row_per_combination_and_a_plot(tiny, tmp_path, capsys):
    out, png = tmp_path / "s.csv", tmp_path / "s.png"
    code = main(["sweep", str(tiny), "--device", "L4", "--device", str(tmp_path / "small.yaml"),
                 "--batch", "1,8", "--prompt-len", "8,32", "--new-tokens", "2", "-o", str(out), "--plot", str(png)])
    err = capsys.readouterr().err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert code == 0 and tuple(rows[0]) == COLUMNS
    # 1 model x 2 batches x 2 prompt lengths x 1 new-token count = 4 shapes, x 2 devices = 8 rows
    assert len(rows) == 8
    assert {(r["batch"], r["prompt_len"], r["device"]) for r in rows} == {
        (b, p, d) for b in ("1", "8") for p in ("8", "32") for d in ("L4", "tiny-gpu")}
    over = [r for r in rows if r["fits"] == "False"]
    assert over and all(r["device"] == "tiny-gpu" and r["pareto"] == "False" for r in over)   # marked, not dropped
    assert "do not fit in the device's memory (kept, marked fits=False)" in err
    on_l4 = [r for r in rows if r["device"] == "L4"]
    best = min(on_l4, key=lambda r: float(r["energy_per_token_j"]))
    assert best["pareto"] == "True"                                   # the cheapest row is always on the front
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_shape_is_counted_once_for_every_device(tiny, monkeypatch):
    counted = []
    real = sweep_module.profile_generation

    def spy(model, batch, prompt_len, new_tokens, **kw):
        counted.append((batch, prompt_len, new_tokens, tuple(kw["devices"])))
        return real(model, batch, prompt_len, new_tokens, **kw)

    monkeypatch.setattr(sweep_module, "profile_generation", spy)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:          # in this process, so the spy sees every count
        rows = sweep([str(tiny)], ["L4", "H100-SXM"], [1, 2], [8], [2], executor=pool)
    assert sorted(counted) == [(1, 8, 2, ("L4", "H100-SXM")), (2, 8, 2, ("L4", "H100-SXM"))]
    assert [(r.batch, r.device) for r in rows] == [(1, "L4"), (1, "H100-SXM"), (2, "L4"), (2, "H100-SXM")]


def test_sweep_simulates_the_runtime_asked_for(tiny):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        eager = sweep([str(tiny)], ["H100-SXM"], [1], [8], [4], executor=pool)
        compiled = sweep([str(tiny)], ["H100-SXM"], [1], [8], [4], executor=pool, runtime="compiled")
    assert [r.runtime for r in eager + compiled] == ["eager", "compiled"]
    # a tiny model is host-bound in eager (a launch per op); one graph per step is faster
    assert compiled[0].time_s < eager[0].time_s
    with pytest.raises(ValueError, match=r"runtime must be one of \('eager', 'compiled', 'serving'\), got 'jit'"):
        sweep([str(tiny)], ["H100-SXM"], runtime="jit")


def test_sweep_on_a_dask_cluster_gives_the_same_rows(tiny):
    import distributed          # the test extra installs dask[distributed]
    args = ([str(tiny)], ["L4"], [1, 4], [8], [3])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        rows = sweep(*args, executor=client.get_executor())
    local = [sweep_module.run_shape(s, ["L4"])[0] for s in shapes(*[a for k, a in enumerate(args) if k != 1])]
    assert len(rows) == 2
    for r, ref in zip(rows, local):
        assert (r.batch, r.tokens_per_s, r.energy_per_token_j) == (ref.batch, ref.tokens_per_s, ref.energy_per_token_j)


def test_shapes_are_every_combination():
    assert shapes(["a"], [1, 8], [16], [2, 4]) == [Shape("a", 1, 16, 2), Shape("a", 1, 16, 4), Shape("a", 8, 16, 2),
                                                   Shape("a", 8, 16, 4)]


@pytest.mark.parametrize("field, value, message", [
    ("hidden_size", "abc", r"x.json: field 'hidden_size' must be a number \(as in llama configs\), got str 'abc'"),
    ("tie_word_embeddings", "yes", r"field 'tie_word_embeddings' must be true or false \(as in llama configs\), got str 'yes'"),
    ("num_hidden_layers", 0, r"field 'num_hidden_layers' must be a whole number from 1 to 16,777,216, got 0"),
    ("vocab_size", 2.5, r"field 'vocab_size' must be a whole number from 1 to 16,777,216, got 2.5"),
])
def test_config_fields_are_checked(field, value, message):
    with pytest.raises(ModelSpecError, match=message):
        check_config_fields("x.json", "llama", {**TINY, field: value})
    check_config_fields("x.json", "llama", dict(TINY))                 # the valid twin


def test_unknown_model_type_names_the_closest():
    with pytest.raises(ModelSpecError, match=r"'lama' is not a model type transformers knows; closest known: llama"):
        check_config_fields("x.json", "lama", {})


@pytest.mark.parametrize("field, value, message", [
    ("memory_bandwidth_gb_per_s", 1e-300, r"'memory_bandwidth_gb_per_s' = 1e-300 is outside the physical range "
                                          r"1e-06 \.\. 1e\+06"),
    ("memory_pj_per_bit", 5e4, r"'memory_pj_per_bit' = 50000.0 is outside the physical range 0.0001 \.\. 10000"),
    ("matrix_tflops", {"bf16": 1e-300}, r"'matrix_tflops.bf16' = 1e-300 is outside the physical range 1e-09"),
    ("launch_overhead_us", 1e-300, r"'launch_overhead_us' = 1e-300 is outside the physical range 1e-06"),
])
def test_device_figures_outside_physical_sense(field, value, message):
    data = good_device()
    parse_profile(yaml.safe_dump(data), "d.yaml")                      # the valid twin
    data["devices"]["tiny-gpu"][field] = value
    with pytest.raises(DeviceProfileError, match=message):
        parse_profile(yaml.safe_dump(data), "d.yaml")
    data["devices"]["tiny-gpu"]["static_power_w"] = 0                  # zero stays allowed where >= 0 is
    data["devices"]["tiny-gpu"][field] = good_device()["devices"]["tiny-gpu"][field]
    parse_profile(yaml.safe_dump(data), "d.yaml")
