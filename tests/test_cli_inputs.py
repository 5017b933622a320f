"""Bad input through the installed ``dispatchprof`` command: each case must end with exit 2 and
one line on stderr that names the input and what is allowed, no traceback, no file left behind,
and it must fail before counting; each has a valid twin that succeeds.

The cases run as subprocesses of the console script next to this interpreter, several at once
(a module fixture), so the file stays quick. More one-line errors are checked in-process in test_cli_commands.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

DISPATCHPROF = shutil.which("dispatchprof", path=os.path.dirname(sys.executable)) or "dispatchprof"
DEVICES = os.path.join(os.path.dirname(__file__), "..", "devices")

# A 2-layer llama small enough to count in a second.
TINY = {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512}
# A counting job that takes minutes: a check that fails within the subprocess timeout ran before it.
HUGE = ["llama-3.1-405b", "--prompt-len", "8192", "--batch", "64", "--new-tokens", "4096"]


def good_device() -> dict:
    """A one-device profile with the AMD MI300X's figures under the name 'tiny-gpu'."""
    with open(os.path.join(DEVICES, "amd.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    spec = {**data.get("defaults", {}), **next(iter(data["devices"].values()))}
    return {"family": "test", "source": data["source"], "devices": {"tiny-gpu": spec}}


def write_inputs(folder) -> None:
    """Every input file of the cases, in ``folder``."""
    def put(name, data):
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(os.path.join(folder, name), mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as f:
            f.write(data)
    put("tiny.json", json.dumps(TINY))
    put("badtype.json", json.dumps({**TINY, "hidden_size": "abc"}))
    put("badtype2.json", json.dumps({**TINY, "model_type": "lama"}))
    put("zero.json", json.dumps({**TINY, "num_hidden_layers": 0}))
    good = good_device()
    put("good.yaml", yaml.safe_dump(good))
    put("unhashable.yaml", "family: x\nsource: y\ndevices:\n  ? [a, b]\n  : {}\n")
    put("list.yaml", "- a\n- b\n")
    put("deep.yaml", "devices: " + "[" * 3000 + "]" * 3000 + "\n")
    put("unclosed.yaml", "family: x\nsource: y\ndevices: {tiny-gpu: {memory_bandwidth_gb_per_s: 1\n")
    put("latin1.yaml", "family: caf\xe9\n".encode("latin-1"))
    put("intkey.yaml", "family: x\nsource: y\n7: 1\ndevices: {a: {}}\n")
    put("huge.yaml", "family: x\nsource: y\ndevices:\n" + "".join(f"  d{i}: {{kind: gpu}}\n" for i in range(20000)))
    absurd = json.loads(json.dumps(good))
    absurd["devices"]["tiny-gpu"]["memory_bandwidth_gb_per_s"] = 1e-300
    put("absurd.yaml", yaml.safe_dump(absurd))
    small = json.loads(json.dumps(good))
    small["devices"]["tiny-gpu"]["memory_capacity_gb"] = 1e-5       # 10 kB: the tiny model does not fit
    put("small.yaml", yaml.safe_dump(small))


# (case id, argv, [fragments the one error line must hold])
BAD = [
    ("config field of the wrong type", ["badtype.json"], ["badtype.json", "'hidden_size' must be a number", "'abc'"]),
    ("unknown model_type", ["badtype2.json"], ["badtype2.json", "'lama'", "closest known: llama"]),
    ("YAML unhashable key", ["tiny.json", "--device", "unhashable.yaml"],
     ["unhashable.yaml", "key at line 4 is of type list", "every key of a device profile is a string"]),
    ("YAML not a mapping", ["tiny.json", "--device", "list.yaml"],
     ["list.yaml", "a device profile is a mapping with keys family, source, defaults, devices"]),
    ("YAML too deep", ["tiny.json", "--device", "deep.yaml"], ["deep.yaml", "nested deeper than 8 levels"]),
    ("YAML unclosed", ["tiny.json", "--device", "unclosed.yaml"],
     ["unclosed.yaml", "not valid YAML", "expected ',' or '}'", "(line 4 column 1)"]),
    ("YAML not UTF-8", ["tiny.json", "--device", "latin1.yaml"],
     ["latin1.yaml", "is UTF-8 text; byte 0xe9 at offset 11"]),
    ("YAML non-string key", ["tiny.json", "--device", "intkey.yaml"], ["intkey.yaml", "key at line 3 is of type int"]),
    ("YAML huge", ["tiny.json", "--device", "huge.yaml"], ["huge.yaml", "at most 256 KiB"]),
    ("device figure 1e-300", ["tiny.json", "--device", "absurd.yaml"],
     ["absurd.yaml", "'memory_bandwidth_gb_per_s' = 1e-300", "physical range 1e-06 .. 1e+06"]),
    ("absurd batch", ["tiny.json", "--batch", "1000000000000"], ["--batch", "at most 1,048,576"]),
    ("hub id, no network", ["someorg/some-model"], ["someorg/some-model", "cannot be reached"]),
    ("-o into a missing folder", [*HUGE, "--device", "H100-SXM", "-o", "nofolder/out.txt"],
     ["-o nofolder/out.txt", "the folder nofolder does not exist"]),
    ("--roofline into a missing folder", [*HUGE, "--device", "H100-SXM", "--roofline", "nofolder/r.png"],
     ["--roofline nofolder/r.png", "does not exist"]),
    ("--trace into a missing folder", [*HUGE, "--device", "H100-SXM", "--trace", "nofolder/t.json"],
     ["--trace nofolder/t.json", "does not exist"]),
    ("--trace without a device", [*HUGE, "--trace", "t.json"], ["--trace and --roofline need a --device"]),
    ("sweep plot into a missing folder", ["sweep", "tiny.json", "--device", "H100-SXM", "--plot", "no/s.png"],
     ["--plot no/s.png", "does not exist"]),
]

GOOD = {
    "config twin": ["tiny.json", "--prompt-len", "8", "--new-tokens", "2", "--top", "0", "--json"],
    "device, outputs and dtype twin": ["tiny.json", "--prompt-len", "8", "--new-tokens", "2", "--device", "good.yaml",
                                       "--dtype", "bfloat16", "--batch", "4", "--trace", "t.json",
                                       "--roofline", "r.png", "-o", "out.txt"],
    "capacity warning": ["tiny.json", "--prompt-len", "8", "--new-tokens", "2", "--device", "small.yaml", "--top", "0"],
}


def run_cli(argv, cwd, env=None, timeout=120):
    start = time.monotonic()
    out = subprocess.run([DISPATCHPROF, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    return out, time.monotonic() - start


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every case run in its own copy of the input folder, four at a time."""
    base = tmp_path_factory.mktemp("inputs")
    write_inputs(base)
    jobs = {}
    with cf.ThreadPoolExecutor(4) as pool:
        for name, argv in [(c[0], c[1]) for c in BAD] + list(GOOD.items()):
            folder = tmp_path_factory.mktemp("case")
            for f in os.listdir(base):
                shutil.copy(base / f, folder / f)
            jobs[name] = (folder, pool.submit(run_cli, argv, folder))
        return {name: (folder, fut.result()) for name, (folder, fut) in jobs.items()}


@pytest.mark.parametrize("name, argv, fragments", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(outcomes, tmp_path_factory, name, argv, fragments):
    folder, (out, seconds) = outcomes[name]
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("dispatchprof: error: "), out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr) < 400
    for fragment in fragments:
        assert fragment in out.stderr
    inputs = set(os.listdir(tmp_path_factory.getbasetemp() / "inputs0"))
    assert set(os.listdir(folder)) == inputs                  # no output, partial or temporary file
    assert seconds < 110                                      # the HUGE job would count for many minutes


def test_valid_twins_succeed(outcomes):
    folder, (out, _) = outcomes["config twin"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["dtype"] == "bf16" and data["batch"] == 1 and data["new_tokens"] == 2
    folder, (out, _) = outcomes["device, outputs and dtype twin"]
    assert out.returncode == 0 and out.stdout == "", out.stderr
    assert "tiny-gpu" in (folder / "out.txt").read_text()
    assert json.loads((folder / "t.json").read_text())["traceEvents"]
    assert (folder / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_a_capacity_that_cannot_fit_is_a_warning(outcomes):
    _, (out, _) = outcomes["capacity warning"]
    assert out.returncode == 0
    assert out.stderr.startswith("dispatchprof: warning: tiny-gpu: needs") and "Traceback" not in out.stderr
    assert "OVER capacity" in out.stdout
