"""scripts/torchvision_absent.py: placeholder torchvision modules for timm where torchvision cannot
load. Run in a subprocess, so that this test process never sees the placeholders."""

import os
import subprocess
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")

PROBE = """
import sys
sys.path.insert(0, {scripts!r})
import torchvision_absent


class Broken:  # torchvision fails to import here whether or not it is installed (a wheel for another torch)
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            raise ImportError("torchvision built for another torch")


sys.meta_path.insert(0, Broken)
assert not torchvision_absent.loads()
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
    lines = out.stdout.splitlines()
    assert lines[0] == "1 2 False"
    assert lines[1] == ("torchvision.ops.misc.FrozenBatchNorm2d is a placeholder: torchvision could not be "
                        "loaded on this torch (scripts/torchvision_absent.py)")
