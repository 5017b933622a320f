"""The dispatchprof command: the main job, subcommands, files, and one-line errors (exit 2)."""

import json
import subprocess
import sys

import pytest

from conftest import run_cli as run

SMALL = ["llama-3.2-1b", "--batch", "2", "--prompt-len", "16", "--new-tokens", "4"]


def test_main_job_prints_summary_and_module_tree(capsys):
    code, out, err = run(capsys, *SMALL, "--device", "PIM-AI-1chip", "--device", "H100-SXM")
    assert code == 0 and err == ""                            # no progress bar: stderr is not a terminal
    assert "batch 2, prompt 16 tokens, 4 new tokens (prefill + 3 decode steps" in out
    assert "TTFT" in out and "PIM-AI-1chip" in out and "H100-SXM" in out
    assert "layers.0-15 (16x)" in out and "Prefill by operator" in out
    assert "weights 2.47 GB" in out                            # tied embeddings counted once (bf16)


def test_json_output_and_report_round_trip(capsys, tmp_path):
    path = tmp_path / "run.json"
    code, out, _ = run(capsys, *SMALL, "--device", "PIM-AI-4chip", "--format", "json", "-o", str(path))
    assert code == 0 and out == ""
    data = json.loads(path.read_text())
    assert data["schema"] == "dispatchprof.generation" and data["new_tokens"] == 4
    ttft = data["devices"]["PIM-AI-4chip"]["ttft_s"]
    code, out, _ = run(capsys, "report", str(path))
    assert code == 0 and "TTFT" in out and "layers.0-15 (16x)" in out
    code, again, _ = run(capsys, *SMALL, "--device", "PIM-AI-4chip")
    summary = again.split("Prefill by module")[0]
    assert summary in out                                     # the saved file renders the same summary
    assert ttft > 0


def test_report_of_a_saved_profile_simulates_on_request(capsys, tmp_path):
    import torch

    from dispatchprof import OpCounter
    with OpCounter() as c:
        torch.nn.Linear(8, 8)(torch.randn(2, 8))
    path = c.profile.save(tmp_path / "p.json")
    code, out, _ = run(capsys, "report", str(path), "--device", "L4", "--format", "markdown")
    assert code == 0 and "| L4 " in out and "| (root)" in out


def test_place_trace_roofline_csv(capsys, tmp_path):
    trace, png = tmp_path / "t.json", tmp_path / "r.png"
    code, out, _ = run(capsys, *SMALL, "--place", "*.self_attn*=PIM-AI-1chip", "--place", "*=PIM-AI-4chip",
                       "--trace", str(trace), "--roofline", str(png), "--format", "csv")
    assert code == 0
    assert out.splitlines()[0].startswith("device,batch,prompt_len") and out.splitlines()[1].startswith("placement,2,16,4")
    assert json.loads(trace.read_text())["traceEvents"] and png.read_bytes()[:4] == b"\x89PNG"


def test_devices_subcommand(capsys):
    code, out, _ = run(capsys, "devices")
    assert code == 0 and len([line for line in out.splitlines() if line.startswith(("PIM", "H1", "A1", "SAM", "CXL"))]) >= 18
    assert "PIM-AI-1chip" in out and "102.4 GB/s" in out and "MI300X" in out


def test_calibrate_subcommand(capsys, tmp_path):
    path = tmp_path / "cpu.yaml"
    code, out, _ = run(capsys, "calibrate", "-o", str(path))
    assert code == 0 and f"wrote {path}" in out
    code, out, _ = run(capsys, "llama-3.2-1b", "--prompt-len", "4", "--new-tokens", "1", "--device", str(path), "--top", "0")
    assert code == 0 and "host-cpu" in out


@pytest.mark.parametrize("argv, message", [
    (["llama-9"], "unknown model 'llama-9'; bundled models: llama-3.2-1b"),
    (["llama-3.2-1b", "--device", "H100"], "unknown device 'H100'; known devices: PIM-AI-1chip"),
    (["llama-3.2-1b", "--batch", "-2"], "argument --batch: expected a number >= 1, got -2"),
    (["llama-3.2-1b", "--new-tokens", "0"], "argument --new-tokens: expected a number >= 1, got 0"),
    (["llama-3.2-1b", "--prompt-len", "many"], "argument --prompt-len: expected a whole number, got 'many'"),
    (["llama-3.2-1b", "--place", "attn"], "--place takes GLOB=DEVICE"),
    (["llama-3.2-1b", "--place", "*.mlp*=L4"], "no catch-all rule"),
    (["llama-3.2-1b", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["llama-3.2-1b", "--trace", "t.json"], "--trace and --roofline need a --device"),
    (["report", "/no/such/file.json"], "/no/such/file.json: cannot read the file (No such file or directory)"),
    (["missing/config.json"], "missing/config.json: no such config file"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("dispatchprof: error: ") and message in err
    assert "Traceback" not in err


def test_report_of_a_truncated_file(capsys, tmp_path):
    bad = tmp_path / "cut.json"
    bad.write_text('{"schema": "dispatchprof.profile", "vers')
    code, _, err = run(capsys, "report", str(bad))
    assert code == 2 and "not a complete JSON file" in err


def test_python_dash_m_and_the_console_script_exist():
    out = subprocess.run([sys.executable, "-m", "dispatchprof", "devices", "--format", "markdown"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "| PIM-AI-1chip" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "dispatchprof", "no-such-model"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("dispatchprof: error: unknown model")
