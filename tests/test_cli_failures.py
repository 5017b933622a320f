"""How a command ends (dispatchprof.cli.failures): an error a dependency raised on the input is one
line naming the input, exit 2; a bug is one line asking for a report, exit 1, with the traceback
only under --debug; Ctrl-C exits 130 and SIGTERM 143 at any point, leaving no file behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import dispatchprof.cli.devices_command as devices_command
from dispatchprof.cli import main, subject
from tests.test_cli_inputs import HUGE, TINY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("edit, message", [
    ({"num_key_value_heads": 3}, r"RuntimeError: The size of tensor a \(4\) must match the size of tensor b \(3\)"),
    ({"hidden_act": "nope"}, r"KeyError: 'nope'"),
])
def test_an_error_raised_inside_transformers_or_torch_is_one_line_naming_the_input(capsys, tmp_path, edit, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**TINY, **edit}))
    code = main([str(path), "--prompt-len", "4", "--new-tokens", "2", "--top", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"dispatchprof: error: {path}: transformers failed on this input: ")
    assert re.search(message, err)


@pytest.mark.parametrize("debug", [False, True])
def test_a_bug_is_one_line_asking_for_a_report_and_the_traceback_needs_debug(capsys, monkeypatch, debug):
    monkeypatch.setattr(devices_command, "catalog", lambda: {"x": None})
    code = main(["devices", *(["--debug"] if debug else [])])
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert code == 1 and re.fullmatch(
        r"dispatchprof: internal error: AttributeError: 'NoneType' object has no attribute '\w+'\. This is "
        r"a bug in dispatchprof: please report it with the command line and the traceback that --debug prints", last)
    assert ("Traceback (most recent call last)" in err) is debug and (err.count("\n") == 1) is not debug


@pytest.mark.parametrize("fault, code, line", [
    (KeyboardInterrupt, 130, "dispatchprof: interrupted"),
    (MemoryError, 2, "dispatchprof: error: dispatchprof devices: out of memory"),
])
def test_an_interrupt_or_exhausted_memory_inside_a_command_is_one_line(capsys, monkeypatch, fault, code, line):
    def fail():
        raise fault
    monkeypatch.setattr(devices_command, "catalog", fail)
    assert main(["devices"]) == code
    assert capsys.readouterr().err.startswith(line)


def test_the_subject_is_the_first_argument_that_is_not_an_option():
    assert subject(["report", "f.json", "--json"]) == "f.json"
    assert subject(["m.json", "--batch", "2"]) == "m.json"
    assert subject(["calibrate", "--gpu"]) == "dispatchprof calibrate"


def _interruptible() -> None:
    """In the child before it runs: Ctrl-C's default action, as in a terminal. A test run started
    in the background by a shell without job control inherits SIGINT ignored, and Python keeps an
    ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "dispatchprof: interrupted"),
                                             (signal.SIGTERM, 143, "dispatchprof: terminated")])
def test_ctrl_c_and_sigterm_during_a_count_exit_130_and_143_leaving_nothing(tmp_path, sig, code, line):
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "dispatchprof", *HUGE, "--json", "-o", str(out)], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": ROOT}, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible)
    time.sleep(15)                            # past start-up: counting a 405B model takes minutes
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code and err.strip().splitlines()[-1] == line and "Traceback" not in err, err[-2000:]
    assert os.listdir(tmp_path) == []


#: A child that runs the command as the console script or ``python -m dispatchprof`` does, with an
#: import hook that says "importing MODULE" on stdout and then waits: the signal lands inside that
#: import (torch: at start-up), every time (no timing guess).
STARTUP = """
import os, runpy, sys, time

ENTRY, DEPENDENCY, MODULE, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]


class HoldTorch:
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            print("importing", name, flush=True)
            try:
                time.sleep(60)
            except BaseException:
                if DEPENDENCY == "swallow":         # as a dependency that catches the interrupt and goes on
                    time.sleep(60)
                elif DEPENDENCY == "convert":       # as transformers' lazy import: another error instead
                    raise RuntimeError("Could not import module 'torch'") from None
                raise
        return None

sys.meta_path.insert(0, HoldTorch())
sys.argv = ["dispatchprof", *COMMAND]
if ENTRY == "console":
    from dispatchprof.cli import main     # what the installed `dispatchprof` script runs
    sys.exit(main())
runpy.run_module("dispatchprof", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("entry", ["console", "python -m"])
@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "dispatchprof: interrupted"),
                                             (signal.SIGTERM, 143, "dispatchprof: terminated")])
def test_a_signal_during_start_up_while_torch_is_imported_is_one_line_and_130_or_143(tmp_path, entry, sig, code,
                                                                                     line):
    assert _start_up(tmp_path, sig, entry, "hold", "torch", "devices") == (code, line + "\n")


@pytest.mark.parametrize("dependency", ["swallow", "convert"])
@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "dispatchprof: interrupted"),
                                             (signal.SIGTERM, 143, "dispatchprof: terminated")])
def test_a_signal_a_dependency_swallows_or_turns_into_another_error_still_ends_the_command(tmp_path, dependency, sig,
                                                                                           code, line):
    """Seen with transformers (imported when the model is built, after start-up): Ctrl-C during its
    lazy import became a RecursionError (exit 2, "transformers failed") or was lost (the count went
    on). Swallowed, it is raised again AGAIN_S later."""
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    start = time.monotonic()
    argv = ["profile", "tiny.json", "--prompt-len", "4", "--new-tokens", "2"]
    assert _start_up(tmp_path, sig, "console", dependency, "transformers", *argv) == (code, line + "\n")
    assert time.monotonic() - start < 30                           # not the hook's 60 s sleep


def _start_up(tmp_path, sig, entry, dependency, module, *command):
    """(exit status, stderr) of the STARTUP child signalled while it imports ``module``."""
    proc = subprocess.Popen([sys.executable, "-c", STARTUP, entry, dependency, module, *command], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT}, preexec_fn=_interruptible)
    assert proc.stdout.readline() == f"importing {module}\n"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=40)
    return proc.returncode, err


def test_importing_the_cli_imports_neither_torch_nor_the_subcommands():
    """What runs before `main` installs its handlers: the standard library and two small modules."""
    probe = ("import sys, dispatchprof.cli, dispatchprof; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'yaml', "
             "'tabulate') or m.startswith('dispatchprof.') and m not in ('dispatchprof.cli', "
             "'dispatchprof.cli.failures', 'dispatchprof.cli.parser', 'dispatchprof.errors')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": ROOT}).stdout
    assert out == "[]\n"


def test_a_signal_inside_a_gc_callback_is_sent_again_not_raised_there(monkeypatch):
    """Python prints and drops an exception raised in a gc callback (the counter's host clock is
    one): a signal arriving there is sent again a moment later instead of raised."""
    import gc
    import sys as _sys
    import time as _time

    from dispatchprof.cli import failures

    frames = []

    def callback(phase, info):
        frames.append(_sys._getframe())

    sent = []
    monkeypatch.setattr(failures.os, "kill", lambda pid, sig: sent.append(sig))
    signals = failures.Signals()
    try:
        callback("start", {})
        gc.callbacks.append(callback)
        try:
            signals._raise(signal.SIGINT, frames[0])           # inside the callback: no raise
        finally:
            gc.callbacks.remove(callback)
        _time.sleep(20 * failures.RETRY_S)
        assert sent == [signal.SIGINT] and signals.received == []
        with pytest.raises(KeyboardInterrupt):                  # anywhere else: raised where it arrives
            signals._raise(signal.SIGINT, _sys._getframe())
        assert signals.received == [signal.SIGINT]
    finally:
        signals.disarm()
        signals.restore()

