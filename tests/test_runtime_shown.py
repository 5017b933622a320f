"""The runtime a result was simulated under is printed beside it (profile, sweep, report, JSON), and
--help says what the default means per device kind."""

import json

import pytest
import torch

from conftest import run_cli as run
from dispatchprof import OpCounter, report
from dispatchprof.report.runtimes import runtime_line
from dispatchprof.sim.placement import scenarios_of
from dispatchprof.sim.simulate import simulate
from tests.test_cli_inputs import TINY


def test_runtime_line_groups_scenarios_by_runtime_in_order():
    assert runtime_line([("H100-SXM", "eager"), ("L4", "serving"), ("B200", "eager"), ("H100-SXM", "eager")]) == \
        "Simulated under runtime eager (H100-SXM, B200); serving (L4)"
    assert runtime_line([]) == ""


def test_summary_says_each_simulations_runtime():
    model, x = torch.nn.Linear(8, 4), torch.randn(2, 8)
    with OpCounter(model) as c:
        model(x)
    sims = [simulate(c.profile, scenarios_of("L4")["L4"], runtime=r, name=f"L4 {r}") for r in ("eager", "serving")]
    assert report.summary(c.profile, sims).splitlines()[-1] == \
        "Simulated under runtime eager (L4 eager); serving (L4 serving)"


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def test_sweep_table_and_rows_carry_the_runtime(tiny, capsys):
    code, out, _ = run(capsys, "sweep", tiny, "--device", "L4", "--prompt-len", "8", "--new-tokens", "2",
                       "--runtime", "serving", "--format", "table")
    assert code == 0 and out.rstrip().splitlines()[-1] == "Simulated under runtime serving (L4)"
    code, out, _ = run(capsys, "sweep", tiny, "--device", "L4", "--prompt-len", "8", "--new-tokens", "2", "--json")
    assert code == 0 and {r["runtime"] for r in json.loads(out)["rows"]} == {"eager"}


@pytest.mark.parametrize("command", ["profile", "sweep"])
def test_help_says_the_default_runtime_per_device_kind(capsys, command):
    with pytest.raises(SystemExit):
        run(capsys, command, "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "eager (the default, for every device kind)" in text and "(default: eager)" in text
    assert "on a GPU each op pays its launch and host cost" in text
    assert "the phone SoC profiles set no launch or host cost, and the PIM profiles publish none" in text


def test_the_guides_runtime_table_states_the_profiles_host_costs():
    from pathlib import Path

    from dispatchprof.sim.catalog import list_devices, load_device
    costs: dict[str, set] = {}
    for name in list_devices():
        d = load_device(name)
        costs.setdefault(d.kind, set()).add((d.launch_overhead_us, d.host_overhead_us))
    guide = " ".join((Path(__file__).parent.parent / "docs" / "guide.md").read_text().split())
    assert costs["gpu"] == {(2, 7)} and "(2 us and 7 us on every bundled GPU)" in guide
    assert costs["soc"] == costs["pim"] == {(0, 0)}
    assert "the bundled profiles set no launch or host cost (0)" in guide
    assert "no launch or host cost is published (simulated as 0, reported UNKNOWN)" in guide
