"""Regenerate docs/reliability.md: what was tried against dispatchprof, and the results.

    python scripts/reliability.py [--examples 50] [--inputs 5000] [--fuzz-table FILE] [--only-inputs]

``--only-inputs`` regenerates only the fuzz campaign, the guarantees and the rules (the whole run
takes about ten minutes, most of it the formula harness); ``--fuzz-table FILE`` quotes the table
that ``python scripts/fuzz_inputs.py --inputs N > FILE`` printed instead of running it again.

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
TOTALS, HOSTILE, HUB = "tests/test_saved_totals.py::", "tests/test_hostile.py::", "tests/test_hub_configs.py::"
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
        ("A folder swapped for a symlink mid-write cannot redirect the write (the checked folder is opened once; "
         "temporary, rename and clean-up work relative to it)",
         WRITE + "test_a_folder_swapped_for_a_symlink_mid_write_cannot_redirect_the_write"),
        ("A final name swapped for a symlink just before the rename is replaced, never followed",
         WRITE + "test_a_name_swapped_for_a_symlink_before_the_rename_is_replaced_never_followed"),
        ("A name that became a FIFO after the check is refused and left as it is",
         WRITE + "test_a_name_that_became_a_fifo_after_the_check_is_refused"),
        ("Ctrl-C right after the temporary file is created still removes it",
         WRITE + "test_a_signal_right_after_the_temporary_is_created_still_removes_it"),
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
        ("Stated totals that disagree with their records (a generation's prefill and decode totals, a forward "
         "file's totals) are refused naming the field and both values", TOTALS + "test_report_refuses_totals_"
         "that_disagree_with_their_records"),
        ("The totals dispatchprof writes are the sums of their records (checked independently)",
         TOTALS + "test_the_saved_totals_are_the_sums_of_their_records_as_written"),
        ("A saved generation's names, runtime and tp are checked", TOTALS + "test_the_text_fields_of_a_saved_"
         "generation_are_checked"),
        ("merge checks a rank file's meta (a mapping; process_index a whole number >= 0)",
         READ + "test_merge_checks_the_meta_of_a_rank_file"),
        ("A serving trace with a UTF-8 BOM is read; 'inf' token counts and other bad rows are one line",
         "tests/test_serving_cli.py::test_trace_edge_cases_are_one_line"),
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
        ("SIGINT and SIGTERM during start-up, while torch is imported, exit 130 and 143 with one line (the "
         "installed command and python -m)",
         CLI + "test_a_signal_during_start_up_while_torch_is_imported_is_one_line_and_130_or_143"),
        ("Before the handlers are installed only the standard library and two small modules are imported",
         CLI + "test_importing_the_cli_imports_neither_torch_nor_the_subcommands"),
        ("A signal a dependency swallows or turns into another error (as transformers' lazy import does) still "
         "ends the command with 130 or 143 and one line",
         CLI + "test_a_signal_a_dependency_swallows_or_turns_into_another_error_still_ends_the_command"),
        ("An interrupt at any step of OpCounter.__enter__ leaves no hook, mode or limit installed",
         "tests/test_counter_interrupts.py::test_an_interrupt_at_any_step_of_enter_leaves_nothing_installed"),
        ("An interrupt at any step of OpCounter.__exit__ still removes everything",
         "tests/test_counter_interrupts.py::test_an_interrupt_at_any_step_of_exit_still_removes_everything"),
        ("SIGINT while hooks are installed or removed arrives after the step",
         "tests/test_counter_interrupts.py::test_sigint_inside_a_deferred_block_arrives_after_it"),
    ],
    "Configs and device profiles": [
        ("Device YAML: alias bombs, unsafe tags, NaN, infinities, wrong types, zero, negative and out-of-range "
         "figures of every numeric field: one line naming file, device, field and allowed range",
         HOSTILE + "test_hostile_device_yaml"),
        ("3.35e3, 1e3, 2E+3 are numbers in device YAML (YAML 1.2), a quoted number is refused with that reason",
         HOSTILE + "test_numbers_with_an_exponent_read_as_yaml_1_2_writes_them"),
        ("A device file named like a bundled device in the same run is refused naming both files",
         HOSTILE + "test_a_device_file_named_like_a_bundled_device_in_the_same_run_is_refused"),
        ("A hub config is read from the cache and built (Llama 3.1's list of eos ids accepted)",
         HUB + "test_a_hub_config_is_read_from_the_cache_and_built"),
        ("A hub config gets every check of a local config.json", HUB + "test_a_hub_config_gets_every_check_of_a_"
         "local_file"),
        ("A hub config is bounded as any config", HUB + "test_a_hub_config_is_bounded_as_any_config"),
        ("A field naming a hub kernel (attn_implementation, experts_implementation: a repository, flash "
         "attention's hub fallback, sonicmoe) is refused, in a file and from the hub",
         HUB + "test_a_field_naming_a_hub_kernel_is_refused_in_a_file_and_from_the_hub"),
        ("use_kernels and kernel_config are refused", HUB + "test_use_kernels_and_kernel_config_are_refused"),
        ("eager, sdpa, flex_attention pass; a config built in the library is checked too",
         HUB + "test_local_implementations_pass_and_a_built_config_is_checked_too"),
        ("A hub id not in the cache fails at once without network", HUB + "test_a_hub_id_not_in_the_cache_fails_at_"
         "once_without_network"),
    ],
    "Fuzz campaign (fast subset)": [
        ("80 hypothesis inputs over the 8 surfaces: 0 tracebacks, hangs, files left, inputs changed",
         "tests/test_fuzz_inputs.py::test_every_surface_of_the_campaign_holds_on_80_inputs"),
        ("The campaign counts a broken promise (it can fail)",
         "tests/test_fuzz_inputs.py::test_the_campaign_counts_a_broken_promise"),
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


#: What the guarantees rest on, and what they leave out, stated once.
RULES = [
    "## Rules and their limits", "",
    "- **Signals.** Ctrl-C exits 130 and SIGTERM 143 with one line from the first line of `dispatchprof.cli.main` "
    "on: the package imports its names on first use, so what runs before (`import dispatchprof.cli`) is the "
    "standard library and two small modules (26 to 50 ms measured on a busy 2-core machine). A signal in that window "
    "(or in the interpreter's own start-up) ends the process the default way: Python's traceback for SIGINT, "
    "killed by SIGTERM. While torch and the subcommand are imported, a signal ends the process at once (nothing "
    "is written yet; an interrupt inside torch's C initialisation can abort the interpreter). Later, a signal "
    "raises where the program is, whatever exception then ends the command is reported as the signal (a "
    "dependency may turn it into another error), and one a dependency swallowed is raised again 1 s later.",
    "- **Writing.** A destination is checked (`output_target`), then its folder is opened once and the final "
    "name re-checked there without following a symlink; the temporary file is created (O_EXCL, O_NOFOLLOW), "
    "renamed and removed relative to that open folder. A folder swapped for a symlink cannot redirect the write. "
    "The one instant no check closes is between that re-check and rename(); rename() then replaces whatever "
    "entry is there (a symlink is replaced, never followed; a device node is unlinked, never written), so the "
    "write still lands in the checked folder only. Whoever can swap entries in that folder can write there anyway.",
    "- **Device names.** Each device of a run has its own name, compared ignoring case: a device file whose "
    "device is named like a bundled device (or like another file's device) given in the same run is an error "
    "naming both files, never a silent replacement. The same device given twice is simulated once.",
    "- **Device figures.** Every numeric field is checked for type, finiteness, sign (> 0 wherever the "
    "simulator divides by it) and magnitude (the physical range of its unit). YAML numbers follow YAML 1.2: "
    "`3.35e3` is a number; a quoted number is text and refused with that reason.",
    "- **Configs.** A hub config is its config.json, read and checked by the same function as a local file. "
    "No config may ask for remote code (`auto_map`) or name code from the hub in place of a layer "
    "(`attn_implementation`, `experts_implementation` naming a repository, `flash_attention_2/3` whose "
    "fallback loads a hub kernel, `sonicmoe`; `use_kernels`, `kernel_config`), at any depth.",
    "- **Saved totals.** Totals a file states must equal the sums of its records exactly; a disagreement is "
    "refused naming the field and both values, never recomputed (the file was edited or is corrupt, and no "
    "reader can tell which figure is right). A plain profile, and so every rank file `merge` reads, states no "
    "totals: they are always computed from its records.", "",
    "- **The counter never changes which code runs.** The fast paths of nn.MultiheadAttention, nn.TransformerEncoderLayer and nn.TransformerEncoder (fused kernels, the nested-tensor encoder) run with the counter as without it: outputs are bit-identical and the recorded ops are the uncounted run's ops, for every one of the zoo's 66 models in eval mode (`test_zoo_runs_and_counts_as_uncounted`: transformers, diffusers and timm families at tiny sizes) and 11 calls of these modules with and without masks, the padding-mask encoder included (`test_torch_fast_paths_run_and_count_as_uncounted`). nn.MultiheadAttention's fast-path conditions are torch 2.13's, checked against torch over 14 calls (`test_mha_fast_path_conditions_are_torchs`); the checks transformers, diffusers and timm make to pick a path read the same with and without the counter (`test_library_path_checks_read_the_same_under_the_counter`). On CUDA (a lent H100, torch 2.11, `scripts/cuda_identity.py`), the 11 module calls and 11 zoo models (flash attention, cuDNN batch norm and LSTM) are bit-identical and op for op the uncounted run; cuDNN's batch norm and LSTM count as the CPU's kernels of the same module (`tests/test_cuda_library_kernels.py`).",
    "- **Real = fake = meta for torch's transformer modules.** On meta tensors these modules take the path the real device takes (torch's device check is shown meta as a supported device for the module's call only, and put back when it returns or raises: `test_meta_leaves_torch_as_it_was`): the same records, op by op, with the same counts and bytes, on real, fake and meta tensors (`test_real_fake_meta_count_record_by_record`). Where torch's slow path runs, attention's output and input gradients have the CPU kernels' layouts on meta too, so meta copies nothing the real run does not, forward and backward (`test_meta_attention_has_the_cpu_layouts`). The padding-mask encoder packs sequences by the mask's values: with the mask a real CPU tensor it counts on fake and meta sources as on real ones, record by record, for masks of different lengths (`test_padding_mask_encoder_real_fake_meta_with_lengths`), and leaves torch as it was after exit and after an exception (`test_packed_encoder_leaves_torch_as_it_was_after_exit_and_exception`); a mask without values stops with an error saying so (`test_padding_mask_encoder_refuses_a_mask_without_values`).",
    "- **Attention calls.** `F.scaled_dot_product_attention` is counted however it is called (positional, `query=`/`key=`/`value=`, mixed); its parameters come from torch's schema, so a new one fails a test, not a user (`tests/test_sdpa_calls.py`).",
    ""]


def input_sections(inputs: int, fuzz_table: str | None) -> tuple[list[str], bool, int, int]:
    """The fuzz campaign, guarantee and rules sections: (lines, campaign clean, held, guarantees)."""
    import fuzz_inputs

    if fuzz_table:
        with open(fuzz_table, encoding="utf-8") as f:
            printed = f.read().rstrip("\n").splitlines()
        first = printed.index(next(ln for ln in printed if ln.startswith("surface")))
        last = printed.index(next(ln for ln in printed if ln.startswith("inputs changed")))
        table = printed[first:last + 1]
        fuzz_failures = [ln for ln in printed if ln.startswith("FAIL")]
        clean = not fuzz_failures and all(ln.split()[-1] == "0" for ln in table[-4:])
        inputs = int(next(ln for ln in table if ln.startswith("total")).split()[1].replace(",", ""))
    else:
        start = time.time()
        per, failures, tally = fuzz_inputs.run(inputs, 0)
        table = fuzz_inputs.summary(per, tally, time.time() - start).splitlines()
        fuzz_failures = [f"FAIL {f}" for f in failures]
        clean = not failures and not any(tally.values())
    lines = ["## Hostile inputs: fuzz campaign", "",
             f"`python scripts/fuzz_inputs.py --inputs {inputs}` (seed 0) draws each input with hypothesis from a "
             "valid one: a hostile value (NaN, infinities, huge or negative numbers, control characters, nested "
             "values of any JSON type) at a drawn field, a deleted field, a scope cycle, truncated or non-UTF-8 "
             "bytes, a BOM, a special file as input or output, a drawn option value, a signal at a drawn instant "
             "of a write. An input passes when it is accepted or refused as the CLI promises: exit 0 or 2 (130 or "
             "143 for a signal), at most one line, no internal error, within 30 s, no temporary file left, the "
             "input unchanged, an output either old or new. Its table:", "",
             *["    " + ln for ln in table], ""]
    lines += [f"  - {f}" for f in fuzz_failures]
    glines, held, guarantees = guarantee_lines()
    return lines + glines + RULES, clean, held, guarantees


def only_inputs(inputs: int, fuzz_table: str | None) -> int:
    """Splice regenerated input sections into docs/reliability.md (from the fuzz campaign's heading to
    the next section the full run writes) and update the guarantee count of its last line."""
    import re

    from dispatchprof.results.files import write_atomic

    path = os.path.join(ROOT, "docs", "reliability.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin, end = text.index("## Hostile inputs: fuzz campaign"), text.index("## Attribution under stress")
    lines, clean, held, guarantees = input_sections(inputs, fuzz_table)
    text = text[:begin] + "\n".join(lines) + "\n" + text[end:]
    text = re.sub(r"Guarantees: \d+ of \d+ held\.", f"Guarantees: {held} of {guarantees} held.", text)
    write_atomic(path, text)
    print(f"Guarantees: {held} of {guarantees} held; fuzz campaign {'clean' if clean else 'FAILED'} -> {path}")
    return 0 if clean and held == guarantees else 1


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
    p.add_argument("--fuzz-table", metavar="FILE", help="quote the table a run of scripts/fuzz_inputs.py printed "
                   "(saved to FILE) instead of running the campaign here")
    p.add_argument("--only-inputs", action="store_true", help="regenerate only the fuzz campaign, the guarantees "
                   "and the rules in docs/reliability.md, keeping the other sections")
    args = p.parse_args(argv)
    if args.only_inputs:
        return only_inputs(args.inputs, args.fuzz_table)
    import warnings
    warnings.simplefilter("ignore")
    import formula_harness as harness
    from fuzz_formulas import run

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
    inputs_lines, fuzz_ok, held, guarantees = input_sections(args.inputs, args.fuzz_table)
    lines += inputs_lines
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
    return 0 if not failures and fuzz_ok and held == guarantees and total_pass == total else 1


if __name__ == "__main__":
    sys.exit(main())
