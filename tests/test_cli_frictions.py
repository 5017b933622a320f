"""Small frictions a new user meets: 'did you mean', the context-window warning, the output
format from the file's ending, and defaults in every --help."""

import json

import pytest

from conftest import run_cli as run
from dispatchprof.cli import COMMANDS
from dispatchprof.results.suggest import closest, did_you_mean

NAMES = ["H100-SXM", "H100-PCIe", "H200", "V100", "PIM-AI-1chip", "PIM-AI-4chip", "MI300X"]


@pytest.mark.parametrize("typed, expected", [
    ("H100-SMX", ["H100-SXM"]),                        # two letters swapped: ratio 0.875
    ("h100", ["H100-SXM", "H100-PCIe", "V100"]),       # the two names it starts, then difflib's closest (0.75)
    ("mi300", ["MI300X"]),                             # case ignored; prefix
    ("xyz", []),                                       # nothing close: no hint
])
def test_closest_names(typed, expected):
    assert closest(typed, NAMES) == expected


def test_hint_wording():
    assert did_you_mean("H100-SMX", NAMES) == "; did you mean 'H100-SXM'?"
    assert did_you_mean("h100", NAMES) == "; did you mean 'H100-SXM', 'H100-PCIe' or 'V100'?"
    assert did_you_mean("xyz", NAMES) == ""


def test_device_and_model_typos_suggest_names(capsys):
    code, _, err = run(capsys, "llama-3.2-1b", "--device", "H100-SMX")
    assert code == 2 and err.rstrip().endswith("did you mean 'H100-SXM'?") and len(err.splitlines()) == 1
    code, _, err = run(capsys, "lama-3.2-1b")
    assert code == 2 and "unknown model 'lama-3.2-1b'" in err and err.rstrip().endswith("did you mean 'llama-3.2-1b', 'llama-3.2-3b' or 'llama-3.1-8b'?")


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"serve"}))
def test_every_help_shows_defaults(capsys, command):
    with pytest.raises(SystemExit) as done:
        run(capsys, command, "--help")
    out = capsys.readouterr().out
    assert done.value.code == 0
    if command in ("profile", "sweep"):
        assert "default: bf16" in " ".join(out.split())
    if command in ("profile", "sweep", "devices", "report", "merge", "calibrate"):
        assert "default: table" in out


def test_profile_help_names_size_defaults(capsys):
    with pytest.raises(SystemExit):
        run(capsys, "profile", "--help")
    out = capsys.readouterr().out
    text = " ".join(out.split())
    for option, default in [("--batch BATCH", "1"), ("--new-tokens NEW_TOKENS", "32"), ("--runtime", "eager"),
                            ("--depth DEPTH", "3"), ("--top TOP", "10")]:
        after = text.split(option, 2)[-1]
        assert f"default: {default})" in after.split(" --")[0] or f"default: {default}" in after.split(" --")[0]


SMALL = ["gpt2", "--batch", "1", "--prompt-len", "8", "--new-tokens", "2", "--depth", "0", "--top", "0"]


@pytest.mark.parametrize("name, check", [
    ("run.json", lambda text: json.loads(text)["schema"] == "dispatchprof.generation"),
    ("run.csv", lambda text: text.startswith("device,batch,prompt_len")),
    ("run.md", lambda text: "| phase " in text),
    ("run.txt", lambda text: text.startswith("gpt2: batch 1") and "|" not in text.splitlines()[2]),
])
def test_profile_output_format_follows_the_file_name(capsys, tmp_path, name, check):
    path = tmp_path / name
    code, out, _ = run(capsys, *SMALL, "-o", str(path))
    assert code == 0 and out == "" and check(path.read_text())


def test_explicit_format_wins_over_the_file_name(capsys, tmp_path):
    path = tmp_path / "run.json"
    code, _, _ = run(capsys, *SMALL, "--format", "csv", "-o", str(path))
    assert code == 0 and path.read_text().startswith("device,batch,prompt_len")


@pytest.mark.parametrize("prompt, new, warned", [
    (1019, 6, False),     # 1019 + 6 - 1 = 1,024 positions: gpt2's whole window (n_positions 1024)
    (1020, 6, True),      # 1,025 positions: one past it
])
def test_context_window_warning(capsys, prompt, new, warned):
    code, _, err = run(capsys, "gpt2", "--prompt-len", str(prompt), "--new-tokens", str(new), "--depth", "0",
                       "--top", "0")
    assert code == 0
    assert ("exceed the model's context window of 1,024" in err) is warned
    if warned:
        assert "prompt + new tokens - 1 = 1,025 positions" in err
