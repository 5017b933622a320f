"""scripts/torchvision_absent.py: placeholder torchvision modules for timm where torchvision cannot
load. Run in a subprocess, so that this test process never sees the placeholders."""

import os
import subprocess
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")

PROBE = """
import sys
sys.path.insert(0, {scripts!r})
import torchvision_absent
if torchvision_absent.loads():
    print("loads")
    raise SystemExit(0)
torchvision_absent.install()
torchvision_absent.install()                      # idempotent: one finder
from torchvision.ops.misc import FrozenBatchNorm2d
from torchvision.transforms.functional import InterpolationMode
modes = {{InterpolationMode.BILINEAR: "bilinear", InterpolationMode.NEAREST: "nearest"}}   # hashable, distinct
print(sum(f is torchvision_absent._Finder for f in sys.meta_path), len(modes), isinstance(object(), FrozenBatchNorm2d))
try:
    FrozenBatchNorm2d(8)
except ImportError as e:
    print(e)
"""


def test_placeholders_import_and_refuse_to_run():
    out = subprocess.run([sys.executable, "-c", PROBE.format(scripts=SCRIPTS)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "loads":
        pytest.skip("torchvision loads here: the placeholders are not used")
    lines = out.stdout.splitlines()
    assert lines[0] == "1 2 False"
    assert lines[1] == ("torchvision.ops.misc.FrozenBatchNorm2d is a placeholder: torchvision could not be "
                        "loaded on this torch (scripts/torchvision_absent.py)")
