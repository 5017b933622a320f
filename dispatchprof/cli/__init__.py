"""The ``dispatchprof`` command. ``COMMANDS`` is the one table of subcommands: each has one thin
module ``dispatchprof.cli.<name>_command`` with ``run(argv) -> int`` and a one-line help shown
by ``dispatchprof --help``. ``dispatchprof MODEL ...`` is the short form of
``dispatchprof profile MODEL ...``.

Bad arguments, an unknown model or device, an unreadable file, or an error a dependency raised on
the input end with exit code 2 and one line on stderr, never a traceback; a bug in dispatchprof
ends with one line asking for a report, exit code 1; ``--debug`` (anywhere on the command line)
prints the traceback too. Every input is checked before any counting starts. Ctrl-C exits 130
and SIGTERM 143 at any point, after the temporary file of a write in progress is removed
(dispatchprof.cli.failures.Signals): this module imports only the standard library and the light
`dispatchprof.cli.failures`, and `main` installs the SIGINT and SIGTERM handlers and its ``try``
before it imports a subcommand (torch: seconds; a signal then ends the command as soon as that
import has finished), so a signal during start-up ends in one line too. The one window left is
the interpreter's own start-up and the import of this module (stdlib only: 26 to 50 ms measured
on a busy 2-core machine), before `main`'s first line runs.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from typing import Sequence

from dispatchprof.cli.failures import Signals, exit_status

#: name -> one-line help. To add a subcommand: a row here and a module <name>_command.py.
COMMANDS: dict[str, str] = {
    "profile": "count and simulate a model's generation (prefill + decode) or forward pass (default)",
    "sweep": "every combination of models, devices, batch sizes and prompt lengths; CSV/JSON and a Pareto plot",
    "devices": "list the bundled device profiles and their key figures",
    "report": "re-render a profile saved as JSON (optionally simulated on other devices)",
    "calibrate": "measure this machine's CPU (--gpu: its CUDA GPU) and write its device profile (YAML)",
    "merge": "one report from the per-process files of a multi-process run",
    "train": "one training step on N GPUs (FSDP/ZeRO, TP, PP, CP): step time, tokens/s/GPU, MFU, memory per GPU",
    "serve": "replay request traffic through continuous batching: latency percentiles, throughput, goodput, cost",
    "plan": "search TP / EP / disaggregated layouts under traffic and SLOs: the Pareto front, the fewest GPUs, flags",
}
DEFAULT = "profile"


def version() -> str:
    """The installed distribution's version (setup.cfg reads it from dispatchprof.__version__)."""
    import importlib.metadata
    return importlib.metadata.version("dispatchprof")


def usage() -> str:
    """The text of ``dispatchprof --help``."""
    width = max(map(len, COMMANDS))
    lines = [f"dispatchprof {version()}: exact operation counts and simulated time, energy and power of "
             "PyTorch models, without the hardware or the weights.", "",
             "usage: dispatchprof [--version] [--help] COMMAND [options]",
             "       dispatchprof MODEL [options]        (short for: dispatchprof profile MODEL [options])", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    lines += ["", "Every command takes --json (JSON on stdout; schemas in docs/cli.md).",
              "dispatchprof COMMAND --help shows a command's options; --debug prints the traceback of an error."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    signals = Signals(owns_process=argv is None)
    try:
        return _dispatch(args, signals)
    except BaseException as e:          # every ending becomes one line and an exit status (cli.failures)
        signals.disarm()
        if isinstance(e, SystemExit):
            raise
        if debug:
            traceback.print_exc()
        status, line = exit_status(e, subject(args), signals.received)
        print(line, file=sys.stderr)
        return status
    finally:
        signals.restore()


def subject(args: Sequence[str]) -> str:
    """What a command line works on, for an error raised inside a dependency: the first argument
    that is not an option (a model or a file), else the command's name."""
    rest = args[1:] if args and args[0] in COMMANDS else args
    return next((a for a in rest if not a.startswith("-")), f"dispatchprof {args[0] if args else DEFAULT}")


def _dispatch(args: list[str], signals: Signals) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0
    if args[0] in ("-V", "--version"):
        sys.stdout.write(f"dispatchprof {version()}\n")
        return 0
    name, rest = (args[0], args[1:]) if args[0] in COMMANDS else (DEFAULT, args)
    with signals.held():                # torch's import: a signal is raised after it, not inside
        module = importlib.import_module(f"dispatchprof.cli.{name}_command")
    return module.run(rest)

