"""``--host NAME|FILE|auto|fixed``: the host CPU that drives the simulated GPUs
(dispatchprof.sim.hostprofile), and the decode step's host split printed after a generation's tables.

The CLI's default is ``auto``: each GPU is driven by its usual server host (the host whose ``gpus``
lists it in devices/hosts/hosts.yaml), so an eager prediction uses the model Python measured while
counting. ``fixed`` keeps the device profile's fixed host cost per op (host_overhead_us): no
measured time, figures that repeat exactly between runs. The library's own default (a Device with
no host) is the fixed figure; `apply_host` is where the CLI chooses otherwise."""

from __future__ import annotations

from dispatchprof.cli.parser import Parser
from dispatchprof.report.hostsplit import decode_host_splits, host_split_text
from dispatchprof.sim.hostprofile import default_host, load_host
from dispatchprof.sim.placement import Placement, Scenarios

#: --host values that name no host: each GPU's usual one, or none (the fixed per-op figure).
AUTO, FIXED = "auto", "fixed"


def add_host(p: Parser) -> None:
    p.add_argument("--host", metavar="NAME|FILE|auto|fixed", default=AUTO,
                   help="host CPU driving the devices: eager host time is the model Python measured while counting, "
                        "scaled to it, plus dispatch and launch; default auto: each GPU's usual server host "
                        "(devices/hosts/hosts.yaml); fixed: the device profile's fixed host cost per op instead "
                        "(no measured host time: figures that repeat exactly between runs)")


def apply_host(scenarios: Scenarios, spec: str | None) -> Scenarios:
    """``scenarios`` with every device driven by host ``spec``: "auto" (or None) each GPU's usual
    host (a device no host lists keeps the fixed figure); "fixed" unchanged (the device's fixed
    host_overhead_us per op); a name or file drives every device. An unknown name or a bad file is a
    one-line error (HostProfileError, a ValueError: exit 2)."""
    if spec == FIXED:
        return scenarios
    host = None if spec in (None, AUTO) else load_host(spec)

    def driven(d):
        chosen = default_host(d.name) if host is None else host
        return d if chosen is None else d.with_host(chosen)
    return Scenarios(tuple((name, Placement(tuple((glob, driven(d)) for glob, d in p.rules)))
                           for name, p in scenarios.items))


def host_split_block(g, scenarios: Scenarios, args) -> str:
    """The decode step's host split for the table formats ("" when there is none to show)."""
    if getattr(args, "format", "table") not in ("table", "markdown") or args.bound:
        return ""
    text = host_split_text(decode_host_splits(g, scenarios, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype))
    return "\nHost time per decode step (eager):\n" + text + "\n" if text else ""
