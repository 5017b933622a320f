"""docs/guide.md's figures about the bundled GPU profiles are the catalog's: the list of GPUs, and
the launch and host cost per op every one of them has (the eager runtime's, in us)."""

from __future__ import annotations

import re

from dispatchprof.sim.catalog import list_devices, load_device
from tests.accuracy_docs import ROOT

TEXT = " ".join((ROOT / "docs" / "guide.md").read_text(encoding="utf-8").split())


def _gpus() -> list:
    return [d for d in map(load_device, list_devices()) if d.kind == "gpu"]


def test_the_gpu_list_is_the_catalogs():
    m = re.search(r"The GPUs: (.+?)\. Figures are per GPU", TEXT)
    assert m, "no GPU list in docs/guide.md"
    assert sorted(m.group(1).split(", ")) == sorted(d.name for d in _gpus())


def test_every_gpus_launch_and_host_cost():
    costs = {(d.launch_overhead_us, d.host_overhead_us) for d in _gpus()}
    assert len(costs) == 1, costs
    ((launch, host),) = costs
    assert f"launch and host cost ({launch:g} us and {host:g} us on every bundled GPU)" in TEXT
