"""Regenerate docs/reliability.md: what was tried against dispatchprof, and the results.

    python scripts/reliability.py [--examples 50] [--inputs 5000]

Runs the formula property harness with many examples, the fuzz campaign over every input
surface (scripts/fuzz_inputs.py), the tests that hold each guarantee about files, errors and
signals (`GUARANTEES`), then the attribution-stress and hostile-input tests (through pytest), and
writes the figures and a row per guarantee and per scenario.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SUITES = {
    "Attribution under stress": ["tests/test_stress.py", "tests/test_attribution.py"],
    "Hostile inputs": ["tests/test_hostile.py", "tests/test_devices.py::test_strict_loading_names_file_device_and_field",
                       "tests/test_catalog.py::test_bad_config_files", "tests/test_exports.py::test_future_truncated_and_foreign_json_raise",
                       "tests/test_cli.py::test_bad_input_is_one_line_and_exit_2",
                       "tests/test_generation.py::test_bad_generation_arguments"],
    "Exceptions and interrupts": ["tests/test_counter.py::test_exception_inside_forward_leaves_nothing_and_keeps_results",
                                  "tests/test_exports.py::test_atomic_write_keeps_the_old_file_on_failure"],
}


#: What dispatchprof guarantees about files, errors, signals and sizes -> the test that holds it.
WRITE, READ, CLI = "tests/test_files_write.py::", "tests/test_files_read.py::", "tests/test_cli_failures.py::"
GUARANTEES = {
    "Writing": [
        ("A device (/dev/null), a FIFO or a folder as an output is refused naming the path and what is allowed, "
         "and left as it was", WRITE + "test_devices_fifos_and_folders_are_refused_and_left_alone"),
        ("A symlink to a regular file the user owns: the target is written atomically, the link kept",
         WRITE + "test_a_symlink_to_an_own_regular_file_writes_the_target_and_keeps_the_link"),
        ("A dangling symlink or one to a device or a folder is refused",
         WRITE + "test_symlinks_to_anything_but_a_regular_file_are_refused"),
        ("A symlink to another user's file is refused", WRITE + "test_a_symlink_to_another_users_file_is_refused"),
        ("Replacing a file keeps its permission bits", WRITE + "test_replacing_a_file_keeps_its_permissions"),
        ("Ctrl-C, an OSError or MemoryError mid-write: the old file stays, the temporary is removed",
         WRITE + "test_a_fault_mid_write_keeps_the_old_file_and_removes_the_temporary"),
        ("SIGTERM mid-write: the temporary is removed; the library dies by the signal, the CLI exits 143",
         WRITE + "test_sigterm_mid_write_removes_the_temporary_and_keeps_the_old_file"),
        ("check_output_paths refuses an output that is an input (also through a symlink) or another output",
         WRITE + "test_check_output_paths_refuses_an_input_and_a_repeated_output"),
        ("profile, report, sweep and calibrate check every output before any work; `report F --format csv -o F` "
         "is refused", WRITE + "test_commands_refuse_bad_outputs_before_any_work"),
    ],
    "Reading": [
        ("A FIFO or /dev/zero is refused before a byte is read (no hang)",
         READ + "test_a_fifo_and_dev_zero_are_refused_before_any_byte_is_read"),
        ("Each kind of file has a size limit, named in the message",
         READ + "test_a_file_over_its_kinds_limit_is_refused_naming_the_limit"),
        ("UTF-8 with a BOM is read; other encodings are refused naming the file and the offset",
         READ + "test_utf8_with_a_bom_is_read_and_other_encodings_are_refused"),
        ("Saved profiles: wrong types, NaN, Infinity, negative counts and scope cycles are one line naming the "
         "field", READ + "test_saved_profiles_are_validated_strictly"),
        ("report and merge refuse a cyclic or NaN saved result in one line, exit 2",
         READ + "test_report_and_merge_refuse_a_bad_saved_result_in_one_line"),
        ("report refuses a device or a FIFO at once", READ + "test_report_refuses_a_device_or_a_fifo_at_once"),
        ("A saved generation with NaN is refused naming the field",
         READ + "test_a_saved_generation_with_nan_is_refused"),
    ],
    "Errors and signals": [
        ("An exception raised inside transformers or torch on the input: one line naming the input, exit 2",
         CLI + "test_an_error_raised_inside_transformers_or_torch_is_one_line_naming_the_input"),
        ("A bug: one line asking for a report, exit 1; the traceback only with --debug",
         CLI + "test_a_bug_is_one_line_asking_for_a_report_and_the_traceback_needs_debug"),
        ("Ctrl-C inside a command exits 130; MemoryError is one line, exit 2",
         CLI + "test_an_interrupt_or_exhausted_memory_inside_a_command_is_one_line"),
        ("SIGINT and SIGTERM during a count exit 130 and 143 with no file left",
         CLI + "test_ctrl_c_and_sigterm_during_a_count_exit_130_and_143_leaving_nothing"),
        ("An interrupt at any step of OpCounter.__enter__ leaves no hook, mode or limit installed",
         "tests/test_counter_interrupts.py::test_an_interrupt_at_any_step_of_enter_leaves_nothing_installed"),
        ("An interrupt at any step of OpCounter.__exit__ still removes everything",
         "tests/test_counter_interrupts.py::test_an_interrupt_at_any_step_of_exit_still_removes_everything"),
        ("SIGINT while hooks are installed or removed arrives after the step",
         "tests/test_counter_interrupts.py::test_sigint_inside_a_deferred_block_arrives_after_it"),
    ],
    "Sizes and text": [
        ("Layers and experts of any config are bounded, with the reason (time, memory) in the message",
         "tests/test_bounds.py::test_layer_and_expert_counts_are_bounded_with_the_reason"),
        ("A config from anywhere (the hub too) asking for remote code is refused",
         "tests/test_bounds.py::test_a_config_from_anywhere_asking_for_remote_code_is_refused"),
        ("A huge layer count fails in one line before counting",
         "tests/test_bounds.py::test_a_huge_layer_count_fails_in_one_line_before_counting"),
        ("A sweep checks its size before building anything",
         "tests/test_bounds.py::test_a_sweep_checks_its_size_before_building_anything"),
        ("Names from a saved result are printed with control characters escaped",
         "tests/test_printable.py::test_report_of_a_saved_result_shows_hostile_names_escaped"),
    ],
}


def guarantee_lines() -> tuple[list[str], int, int]:
    """The guarantee tables (each test run through pytest, parametrized cases counted), passed, total."""
    tests = [t for rows in GUARANTEES.values() for _, t in rows]
    outcomes: dict[str, list[str]] = {}
    for node, outcome, _ in run_suite(tests):
        outcomes.setdefault(node.split("[")[0], []).append(outcome)
    lines, passed = ["## Guarantees: files, errors, signals, sizes", ""], 0
    for title, rows in GUARANTEES.items():
        lines += [f"### {title}", "", "| guarantee | held by | result |", "|---|---|---|"]
        for text, test in rows:
            got = outcomes.get(test, [])
            ok = bool(got) and all(o == "passed" for o in got)
            passed += ok
            cases = f"{len(got)} case" + "s" * (len(got) != 1)
            result = f"passed ({cases})" if ok else "FAILED" if got else "not run"
            lines.append(f"| {text} | `{test.split('::')[-1]}` | {result} |")
        lines.append("")
    return lines, passed, len(tests)


class Collector:
    """A pytest plugin that keeps each test's outcome and docstring."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001  (pytest hook)
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.rows.append((report.nodeid, report.outcome, ""))

    def pytest_collection_modifyitems(self, items) -> None:  # noqa: ANN001
        self.docs = {i.nodeid: (i.function.__doc__ or "").strip().splitlines()[0] if i.function.__doc__ else ""
                     for i in items}


def run_suite(paths: list[str]) -> list[tuple[str, str, str]]:
    import pytest

    plugin = Collector()
    pytest.main(["-q", "-p", "no:cacheprovider", "-W", "ignore::UserWarning", *[os.path.join(ROOT, p) for p in paths]],
                plugins=[plugin])
    return [(node, outcome, plugin.docs.get(node, "")) for node, outcome, _ in plugin.rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=50)
    p.add_argument("--inputs", type=int, default=5000, help="generated inputs of the fuzz campaign")
    args = p.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    import formula_harness as harness
    from fuzz_formulas import run
    import fuzz_inputs

    from dispatchprof.results.files import write_atomic

    start = time.time()
    ran, failures = run(args.examples)
    covered, listed = harness.coverage()
    lines = ["# Reliability: what was tried, and the results", "",
             f"Regenerated by `python scripts/reliability.py --examples {args.examples}` "
             f"({time.strftime('%Y-%m-%d')}, torch {__import__('torch').__version__}).", "",
             "## Formulas: property-based checks (hypothesis)", "",
             "Each case draws shapes, broadcasting and scalars, runs the op on real CPU, meta and fake tensors "
             "under OpCounter and checks: identical counts and bytes on all three; no negative category; counts "
             "that double exactly when the batch doubles (where the op is per-row); bytes equal to the element "
             "sizes of the real inputs and outputs (ops under the generic traffic rule).", "",
             f"- {len(harness.cases())} cases over {len(covered)} registered ops, up to {args.examples} examples "
             f"each: {ran} examples run, **{len(failures)} failing**.",
             f"- {len(listed)} of {len(covered) + len(listed)} registered ops have no case; each is listed "
             f"with its reason (`formula_harness.coverage()`):",
             *[f"  - {n} ops: {reason}" for reason, n in Counter(listed.values()).most_common()],
             "- Found and fixed by this harness: evaluation-mode `native_batch_norm` wrote different bytes on "
             "CPU (empty saved statistics) and meta (C elements); the formula now states what is written.",
             "- Found and fixed by the stress tests: under `torch.inference_mode` composite ops such as "
             "`aten.linear` reach the dispatch mode undecomposed (and were reported as unknown); the counter "
             "now decomposes any CompositeImplicit op that has no formula, so counts match no_grad exactly.", ""]
    lines += [f"  - FAIL {f}" for f in failures]
    fuzz_start = time.time()
    per, fuzz_failures, tally = fuzz_inputs.run(args.inputs, 0)
    lines += ["## Hostile inputs: fuzz campaign", "",
              f"`python scripts/fuzz_inputs.py --inputs {args.inputs}` generates each input from a valid one by a "
              "seeded mutation (a hostile value at a random field, a deleted field, a scope cycle, truncated or "
              "non-UTF-8 bytes, a BOM, a special file as input or output) and passes it when it is accepted or "
              "refused as the CLI promises: exit 0 or 2, at most one line, no internal error, within 30 s, no "
              "temporary file left, the input unchanged.", "",
              "    " + fuzz_inputs.summary(per, tally, time.time() - fuzz_start), ""]
    lines += [f"  - FAIL {f}" for f in fuzz_failures]
    glines, held, guarantees = guarantee_lines()
    lines += glines
    total_pass = total = 0
    for title, paths in SUITES.items():
        rows = run_suite(paths)
        total += len(rows)
        total_pass += sum(1 for _, o, _ in rows if o == "passed")
        lines += [f"## {title}", "", "| scenario (test) | what the user sees | result |", "|---|---|---|"]
        lines += [f"| `{node.split('::', 1)[-1]}` | {doc or '-'} | {outcome} |" for node, outcome, doc in rows]
        lines.append("")
    lines += [f"Guarantees: {held} of {guarantees} held. Scenarios: {total_pass} of {total} passed. "
              f"Total time {time.time() - start:.0f} s."]
    write_atomic(os.path.join(ROOT, "docs", "reliability.md"), "\n".join(lines) + "\n")
    print("\n".join(lines[-1:]), "-> docs/reliability.md")
    return 0 if not failures and not fuzz_failures and held == guarantees and total_pass == total else 1


if __name__ == "__main__":
    sys.exit(main())
