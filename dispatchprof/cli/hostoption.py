"""``--host NAME|FILE``: the host CPU that drives the simulated GPUs (dispatchprof.sim.hostprofile),
and the decode step's host split printed after a generation's tables."""

from __future__ import annotations

from dispatchprof.cli.parser import Parser
from dispatchprof.report.hostsplit import decode_host_splits, host_split_text
from dispatchprof.sim.hostprofile import default_host, load_host
from dispatchprof.sim.placement import Placement, Scenarios


def add_host(p: Parser) -> None:
    p.add_argument("--host", metavar="NAME|FILE|auto",
                   help="host CPU driving the devices: eager host time becomes the measured model Python scaled to "
                        "it, plus dispatch and launch (auto: each GPU's usual server host, devices/hosts/hosts.yaml); "
                        "default: none, the device profile's fixed host cost per op")


def apply_host(scenarios: Scenarios, spec: str | None) -> Scenarios:
    """``scenarios`` with every device driven by host ``spec`` (unchanged for None; "auto": each
    device's usual host, none for a device without one); an unknown name or a bad file is a one-line
    error (HostProfileError, a ValueError: exit 2)."""
    if spec is None:
        return scenarios
    host = None if spec == "auto" else load_host(spec)

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
