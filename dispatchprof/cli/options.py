"""Options and checks every subcommand shares, run before any work starts.

Sizes have limits far above any real run but low enough to refuse a typo such as
``--batch 1000000000000`` at once (`SIZE_LIMITS`). Output paths are checked before counting
(`check_outputs`): a regular file or a new one in a writable folder, never one of the inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Iterable, Mapping, Sequence

from dispatchprof.cli.parser import Parser, UsageError
from dispatchprof.llm.models import MODEL_DTYPES
from dispatchprof.errors import UnsafeFileError
from dispatchprof.results.files import check_output_paths, write_atomic
from dispatchprof.sim.quantization import Quantized
from dispatchprof.sim.device import WEIGHT_BITS

#: The largest value each size option takes (a whole number >= 1 up to this).
SIZE_LIMITS = {"batch": 1 << 20, "prompt_len": 1 << 24, "new_tokens": 1 << 20, "num_requests": 1 << 20,
               "replicas": 1 << 10}
#: Why a limit is where it is, where the message should say so.
SIZE_REASONS = {"num_requests": "time: 10,000 requests take about 20 s to simulate",
                "replicas": "time: each replica runs its own steps"}
DTYPES = MODEL_DTYPES            # the dtypes a model's tensors can take (dispatchprof.llm.models)
#: Other spellings (torch's and transformers' names) -> the canonical short name.
DTYPE_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                 "float8": "fp8", "float8_e4m3fn": "fp8"}


def canonical_dtype(text: str, allowed: Sequence[str]) -> str:
    """A dtype's canonical short name ('bfloat16', 'torch.bfloat16' and 'bf16' give 'bf16')."""
    key = text.strip().lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in allowed:
        names = ", ".join(f"{k} ({n})" if (n := next((a for a, c in DTYPE_ALIASES.items() if c == k), None))
                          else k for k in allowed)
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; allowed: {names}")
    return key


def model_dtype(text: str) -> str:
    """argparse type of --dtype: a canonical key of `DTYPES`."""
    return canonical_dtype(text, tuple(DTYPES))


def weight_dtype(text: str) -> str:
    """argparse type of --weight-dtype: a canonical key of WEIGHT_BITS."""
    return canonical_dtype(text, tuple(WEIGHT_BITS))


def add_weight_dtype(p: Any, help: str | None = None) -> None:
    """--weight-dtype and --keep-dtype on parser (or group) ``p``; `resolve_weight_dtype` combines them."""
    p.add_argument("--weight-dtype", type=weight_dtype, help=help)
    p.add_argument("--keep-dtype", type=module_patterns, metavar="MODULE,...",
                   help="modules whose weights --weight-dtype leaves in --dtype, as a quantized checkpoint's "
                        "ignore list names them: comma-separated module path patterns, such as self_attn,lm_head")


def module_patterns(text: str) -> tuple[str, ...]:
    """argparse type of --keep-dtype: comma-separated module path patterns (none empty)."""
    patterns = tuple(t.strip() for t in text.split(","))
    if not all(patterns):
        raise argparse.ArgumentTypeError(f"expected comma-separated module path patterns such as "
                                         f"self_attn,lm_head, got {text!r}")
    return patterns


def resolve_weight_dtype(args: argparse.Namespace) -> None:
    """``args.weight_dtype`` as simulations take it: with --keep-dtype, a `Quantized` that leaves
    those modules' weights in the model's dtype (`dispatchprof.sim.quantization`)."""
    if args.keep_dtype:
        if args.weight_dtype is None:
            raise UsageError("--keep-dtype needs --weight-dtype (the dtype the other modules' weights are stored in)")
        args.weight_dtype = Quantized(args.weight_dtype, args.keep_dtype)


def size(name: str | None = None):
    """argparse type: a whole number from 1 up to ``SIZE_LIMITS[name]`` (no upper limit without a name)."""
    limit = SIZE_LIMITS[name] if name is not None else None

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
        if limit is not None and value > limit:
            reason = f" ({SIZE_REASONS[name]})" if name in SIZE_REASONS else ""
            raise argparse.ArgumentTypeError(f"expected at most {limit:,}{reason}, got {value:,}")
        return value
    return parse


def size_list(name: str):
    """argparse type: comma-separated sizes ('1,8,64'), each checked like `size`."""
    one = size(name)

    def parse(text: str) -> list[int]:
        items = [t for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers such as 1,8,64, got {text!r}")
        return [one(t.strip()) for t in items]
    return parse


#: The --format an output file's name picks when --format (or --json) is not given.
FORMAT_BY_SUFFIX = {".json": "json", ".csv": "csv", ".md": "markdown", ".parquet": "parquet"}


class _GivenFormat(argparse.Action):
    """Stores a --format (or --json's const) and notes that the user chose it."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        namespace.format_given = True


def add_format(p: Parser, formats: Sequence[str] = ("table", "markdown", "json"), from_output: bool = False) -> None:
    """--format (table, markdown, json, ...) and --json, the short form of --format json;
    ``from_output``: the command resolves the format with `format_from_output` (its help says so)."""
    endings = ", ".join(e for e, f in FORMAT_BY_SUFFIX.items() if f in formats)
    p.add_argument("--format", choices=tuple(formats), default=formats[0], action=_GivenFormat,
                   help=f"output format; without it, -o FILE picks it from FILE's ending ({endings})"
                   if from_output else "output format")
    p.add_argument("--json", action=_GivenFormat, nargs=0, dest="format", const="json",
                   help="JSON on stdout (schema: docs/cli.md); the same as --format json")


def format_from_output(args: argparse.Namespace, formats: Sequence[str], fallback: str | None = None) -> str:
    """The format to write: --format or --json when given; else the one ``args.output``'s ending
    names (`FORMAT_BY_SUFFIX`) when the command has it; else ``fallback`` when writing a file
    (default: the --format default); else the --format default."""
    if getattr(args, "format_given", False) or not getattr(args, "output", None):
        return args.format
    suffix = os.path.splitext(args.output)[1].lower()
    named = FORMAT_BY_SUFFIX.get(suffix)
    if named in formats:
        return named
    return fallback or args.format


def table_fmt(fmt: str) -> str:
    """tabulate's style for a --format choice."""
    return "github" if fmt == "markdown" else "simple"


def check_outputs(outputs: Mapping[str, str | None], inputs: Iterable[str | None] = ()) -> None:
    """Refuse, before any work, an output (flag -> path; None is no output) that cannot be written
    safely, whose folder is missing or not writable, or that is the same file as one of ``inputs``
    or as another output (dispatchprof.results.files.check_output_paths); the message starts with
    the flag."""
    inputs = [i for i in inputs if i]
    for flag, path in outputs.items():
        try:
            check_output_paths([path], inputs)
        except UnsafeFileError as e:
            raise UsageError(f"{flag} {e}") from None
    check_output_paths(outputs.values())


def check_table_options(depth: int, top: int) -> None:
    """Refuse a --depth below -1 (-1: all) or a --top below 0 (0: no operator table)."""
    if depth < -1:
        raise UsageError(f"--depth must be -1 (all) or >= 0, got {depth}")
    if top < 0:
        raise UsageError(f"--top must be >= 0, got {top}")


def input_files(model: str) -> list[str]:
    """The files a model argument may name: the path itself and, for a folder, its config.json."""
    return [model, os.path.join(model, "config.json")]


def need_matplotlib(flag: str) -> None:
    """Refuse a plot option, before any work, where matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"{flag} needs matplotlib: pip install 'dispatchprof[plot]'") from None


def emit(text: str, output: str | None = None) -> None:
    """Write the report to ``output`` (atomically) or to stdout."""
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)


def as_json(data: Any) -> str:
    """The JSON text every --json output uses."""
    return json.dumps(data, indent=1) + "\n"


def warn(message: str) -> None:
    """One warning line on stderr (the run goes on)."""
    print(f"dispatchprof: warning: {' '.join(message.split())}", file=sys.stderr)
