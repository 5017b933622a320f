"""A fast subset of the fuzz campaign (scripts/fuzz_inputs.py): every surface, 10 hypothesis inputs
each, must print 0 tracebacks, 0 hangs, 0 files left behind and 0 inputs changed."""

from __future__ import annotations

import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import fuzz_inputs  # noqa: E402


def test_every_surface_of_the_campaign_holds_on_80_inputs():
    per, failures, tally = fuzz_inputs.run(80, seed=7)
    assert per == dict.fromkeys(fuzz_inputs.SURFACES, 10)
    assert failures == [] and tally == {"tracebacks": 0, "hangs": 0, "files left behind": 0, "inputs changed": 0}
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_the_campaign_counts_a_broken_promise(monkeypatch):
    """The harness can fail: an internal error, a file left behind and a changed input are each counted."""
    def broken(self, rng, draw):
        path = self._put("saved.json", b"{}")
        open(os.path.join(self.folder, ".dispatchprof-left.tmp"), "w").close()
        open(path, "w").write("changed")
        return fuzz_inputs.cli_ok(["devices", "--json", "--no-such-option"]) or "internal error"
    monkeypatch.setattr(fuzz_inputs.Campaign, "trace", broken)
    per, failures, tally = fuzz_inputs.run(16, seed=7)
    assert per["trace"] == 2 and tally == {"tracebacks": 2, "hangs": 0, "files left behind": 2, "inputs changed": 2}
    assert len(failures) == 6
