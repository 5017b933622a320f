"""scripts/check_prim_rows.py: a row's quote must stand on the lines its source names, in the file
at the commit it names; checked on a two-file git repository made here."""

import subprocess

import check_prim_rows as cpr

LOG = "Allocated 60 DPU(s)\nnr_elements\t100\tNR_TASKLETS\t16\n\tCPU-DPU: 1.500000\t\n\tDPU: 2.000000\t\n"


def repo(tmp_path) -> str:
    path = tmp_path / "vpim"
    (path / "apps").mkdir(parents=True)
    (path / "apps" / "VA").write_text(LOG)
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "log"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True)
    return str(path)


def row(lines="1,2,3,4", quote="Allocated 60 DPU(s) / nr_elements 100 NR_TASKLETS 16 / CPU-DPU: 1.500000 / DPU: 2.000000",
        commit="HEAD", **parts):
    values = {"cpu_dpu_ms": "1.500000", "dpu_ms": "2.000000", "inter_dpu_ms": "0", "dpu_cpu_ms": "0", **parts}
    return {"source": f"github.com/brisco007/vPIM@{commit} apps/VA lines {lines}", "quote": quote, **values}


def test_a_row_that_quotes_its_lines_is_ok(tmp_path):
    path = repo(tmp_path)
    head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert cpr.problems(row(commit=head[:8]), path) == []


def test_a_quote_on_another_line_or_a_figure_not_quoted_is_named(tmp_path):
    path = repo(tmp_path)
    head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()[:8]
    assert cpr.problems(row(commit=head, lines="1,2,3"), path) == ["quote 'DPU: 2.000000' is on none of lines 1,2,3"]
    assert cpr.problems(row(commit=head, dpu_cpu_ms="3.0"), path) == [
        "dpu_cpu_ms = 3.0 is not quoted as 'DPU-CPU: 3.0'"]
    assert cpr.problems({**row(), "source": "somewhere else"}, path)[0].startswith("source 'somewhere else' is not")


def test_bad_arguments_exit_2(capsys):
    assert cpr.main([]) == 2
    assert "usage: check_prim_rows.py PATH_TO_A_vPIM_GIT_CHECKOUT" in capsys.readouterr().err
