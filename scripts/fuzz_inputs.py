"""A fuzz campaign over every input surface: saved results (through ``dispatchprof report``),
model configs, device profiles, files read and output paths.

    python scripts/fuzz_inputs.py [--inputs 5000] [--seed 0]

Each input is generated from a valid one by a seeded mutation (a hostile value at a random field,
a deleted field, a cycle, truncated or non-UTF-8 bytes, a special file). It passes when it is
accepted or refused the way the CLI promises: exit status 0 or 2, at most one line on stderr,
never an internal error; within 30 s; with no temporary file left and the input file unchanged.
Prints one summary line (and each failure); exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import signal
import stat
import sys
import tempfile
import time
from typing import Any, Callable

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dispatchprof.cli import main  # noqa: E402
from dispatchprof.cli.failures import BUG, exit_status  # noqa: E402
from dispatchprof.results.files import check_output_paths, read_json, write_atomic  # noqa: E402

HANG_S = 30
TINY = {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512}
HOSTILE = [float("nan"), float("inf"), -1, -1e308, 10 ** 30, 2 ** 63, 0, True, None, "", "x\x1b[2J", "\ud800x",
           [], {}, [[[[]]]], {"a": [1, {"b": None}]}, 1.5, "12", "1e400", "../../etc/passwd"]


class Hung(Exception):
    """An input that took longer than HANG_S (also recorded in HUNG: a command turns it into a line)."""


HUNG: list[int] = []


def _alarm(signum: int, frame: Any) -> None:
    HUNG.append(signum)
    raise Hung


def mutate(value: Any, rng: random.Random) -> Any:
    """``value`` (JSON-like) with one random change at a random depth."""
    if isinstance(value, (dict, list)) and value and rng.random() < 0.8:
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        key = rng.choice(keys)
        if rng.random() < 0.1:
            del value[key]
        else:
            value[key] = mutate(value[key], rng)
        return value
    return rng.choice(HOSTILE)


def damage(text: str, rng: random.Random) -> bytes:
    """The bytes of ``text``, sometimes truncated, given a BOM or a byte that is not UTF-8."""
    data = text.encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.1:
        return data[:rng.randrange(len(data) + 1)]
    if r < 0.15:
        return b"\xef\xbb\xbf" + data
    if r < 0.2:
        i = rng.randrange(len(data) + 1)
        return data[:i] + b"\xff" + data[i:]
    return data


def cli_ok(argv: list[str]) -> str | None:
    """Run the command in-process; a broken promise as text, or None."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = err.getvalue()
    if code not in (0, 2) or text.count("\n") > 1 or "Traceback" in text or "internal error" in text:
        return f"exit {code}: {text.strip()[:200]}"
    if "\x1b" in out.getvalue():
        return "a raw escape character reached stdout"
    return None


def library_ok(call: Callable[[], Any], subject: str) -> str | None:
    """Call a library reader; an exception the CLI would call a bug, as text, or None."""
    try:
        call()
    except Hung:
        raise
    except Exception as e:  # noqa: BLE001  (classified exactly as the CLI does, not swallowed)
        status, line = exit_status(e, subject)
        if status == BUG:
            return line
    return None


class Campaign:
    """The surfaces, each a method taking (folder, rng) and returning a failure or None."""

    def __init__(self, folder: str) -> None:
        from torch import nn
        import torch
        from dispatchprof import OpCounter

        with OpCounter() as c:
            nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))(torch.ones(2, 4))
        self.profile = c.profile.to_dict()
        with open(os.path.join(ROOT, "devices", "amd.yaml"), encoding="utf-8") as f:
            data = yaml.safe_load(f)
        spec = {**data.get("defaults", {}), **next(iter(data["devices"].values()))}
        self.device = {"family": "fuzz", "source": "fuzz", "devices": {"fuzz-gpu": spec}}
        self.folder = folder
        self.inputs: list[tuple[str, bytes]] = []      # (path, bytes) of this input's input files

    def saved_result(self, rng: random.Random) -> str | None:
        data = json.loads(json.dumps(self.profile))
        if rng.random() < 0.1:                          # a cycle in the scope parents
            data["scopes"][1][2], data["scopes"][2][2] = data["scopes"][2][0], data["scopes"][1][0]
        if rng.random() < 0.9:
            data = mutate(data, rng)
        path = self._put("saved.json", damage(json.dumps(data), rng))
        return cli_ok(["report", path, *rng.choice([[], ["--json"], ["--depth", "-1"]])])

    def config(self, rng: random.Random) -> str | None:
        from dispatchprof.llm.catalog import load_config

        data = mutate(dict(TINY), rng)
        if rng.random() < 0.05 and isinstance(data, dict):
            data["auto_map"] = {"AutoModel": "evil.Model"}
        path = self._put("config.json", damage(json.dumps(data), rng))
        return library_ok(lambda: load_config(path), path)

    def device_profile(self, rng: random.Random) -> str | None:
        from dispatchprof.sim.catalog import load_device

        text = yaml.safe_dump(mutate(json.loads(json.dumps(self.device)), rng), allow_unicode=True)
        if rng.random() < 0.05:
            text = "a: &a [1, 2]\nb: [*a, *a]\n" + text
        path = self._put("device.yaml", damage(text, rng))
        return library_ok(lambda: load_device(path), path)

    def special_read(self, rng: random.Random) -> str | None:
        kind = rng.choice(["fifo", "/dev/zero", "/dev/null", "folder", "missing"])
        path = {"/dev/zero": "/dev/zero", "/dev/null": "/dev/null", "folder": self.folder,
                "missing": os.path.join(self.folder, "missing.json")}.get(kind)
        if kind == "fifo":
            path = os.path.join(self.folder, "pipe")
            if not os.path.exists(path):
                os.mkfifo(path)
        return library_ok(lambda: read_json(path, rng.choice(["profile", "config", "trace"])), path)

    def output_path(self, rng: random.Random) -> str | None:
        src = self._put("input.json", b"{}")
        target = os.path.join(self.folder, "out.txt")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target) if not os.path.isdir(target) or os.path.islink(target) else os.rmdir(target)
        kind = rng.choice(["new", "existing", "devnull", "fifo", "folder", "link-own", "link-dangling",
                           "link-folder", "same-as-input", "missing-folder"])
        if kind == "existing":
            self._put("out.txt", b"old", is_input=False)
            os.chmod(target, 0o600)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "folder":
            os.mkdir(target)
        elif kind.startswith("link"):
            dest = {"link-own": src, "link-dangling": os.path.join(self.folder, "nowhere"),
                    "link-folder": self.folder}[kind]
            os.symlink(dest, target)
        path = {"devnull": "/dev/null", "same-as-input": src,
                "missing-folder": os.path.join(self.folder, "no", "x")}.get(kind, target)
        before = os.lstat(path) if os.path.lexists(path) else None
        try:
            check_output_paths([path], inputs=[] if kind == "link-own" else [src])
            write_atomic(path, "new")
        except (ValueError, OSError):
            after = os.lstat(path) if os.path.lexists(path) else None
            if before is not None and (after is None or stat.S_IFMT(after.st_mode) != stat.S_IFMT(before.st_mode)):
                return f"{kind}: a refused destination was changed"
        if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            return "/dev/null is no longer a character device"
        if kind == "link-own":
            self.inputs.clear()                         # the user asked to write through the link
        return None

    def _put(self, name: str, data: bytes, is_input: bool = True) -> str:
        path = os.path.join(self.folder, name)
        if is_input:
            self.inputs.append((path, data))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        with open(path, "wb") as f:
            f.write(data)
        return path


def run(inputs: int, seed: int) -> tuple[dict[str, int], list[str], dict[str, int]]:
    """(inputs per surface, failures, counts of tracebacks, hangs, files left, inputs changed)."""
    rng = random.Random(seed)
    failures: list[str] = []
    tally = {"tracebacks": 0, "hangs": 0, "files left behind": 0, "inputs changed": 0}
    per: dict[str, int] = {}
    previous = signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as folder:
        campaign = Campaign(folder)
        surfaces = [campaign.saved_result, campaign.config, campaign.device_profile, campaign.special_read,
                    campaign.output_path]
        try:
            for i in range(inputs):
                surface = surfaces[i % len(surfaces)]
                per[surface.__name__] = per.get(surface.__name__, 0) + 1
                campaign.inputs, HUNG[:] = [], []
                signal.alarm(HANG_S)
                try:
                    problem = surface(rng)
                except Hung:
                    problem = None
                finally:
                    signal.alarm(0)
                if HUNG:
                    tally["hangs"] += 1
                    failures.append(f"{surface.__name__} #{i}: over {HANG_S} s")
                elif problem:
                    tally["tracebacks"] += 1
                    failures.append(f"{surface.__name__} #{i}: {problem}")
                changed = [p for p, data in campaign.inputs if open(p, "rb").read() != data]
                if changed:
                    tally["inputs changed"] += 1
                    failures.append(f"{surface.__name__} #{i}: changed {changed}")
                left = [n for n in os.listdir(folder) if n.startswith(".dispatchprof-")]
                if left:
                    tally["files left behind"] += len(left)
                    failures.append(f"{surface.__name__} #{i}: left {left}")
                    for n in left:
                        os.unlink(os.path.join(folder, n))
        finally:
            signal.signal(signal.SIGALRM, previous)
    return per, failures, tally


def main_(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    start = time.time()
    per, failures, tally = run(args.inputs, args.seed)
    for f in failures:
        print(f"FAIL {f}")
    print(summary(per, tally, time.time() - start))
    return 1 if failures or any(tally.values()) else 0


def summary(per: dict[str, int], tally: dict[str, int], seconds: float) -> str:
    """The campaign's one line."""
    surfaces = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in per.items())
    return (f"{sum(per.values()):,} generated inputs ({surfaces}) in {seconds:.0f} s: "
            + ", ".join(f"{n} {what}" for what, n in tally.items()))


if __name__ == "__main__":
    sys.exit(main_())
