"""scripts/validate_training.py and validate_training_memory.py refuse an unknown --only source in one
line that names the known ones (exit 2), before counting anything."""

import subprocess
import sys

import pytest

from tests.accuracy_docs import ROOT


@pytest.mark.parametrize("script,sources", [
    ("validate_training.py", "llm-foundry, megatron-bridge, megatron-lm, nemo, torchtitan"),
    ("validate_training_memory.py", "own, torchtitan"),
])
def test_an_unknown_source_is_a_usage_error(script, sources):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--only", "nope"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2
    assert run.stderr.splitlines()[-1] == (f"{script}: error: --only 'nope': no rows of that source; "
                                           f"the sources are {sources}")
