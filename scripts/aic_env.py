"""Files of AIConfigurator's wheel in the validation environment (``bash scripts/setup_validation.sh``:
.venv-validation, never a dependency of dispatchprof)."""

from __future__ import annotations

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The validation environment's python.
AIC_PYTHON = os.path.join(ROOT, ".venv-validation", "bin", "python")


def aic_path(python: str, *parts: str) -> str:
    """The path of ``parts`` under aiconfigurator-core's package folder, as the environment of
    ``python`` installs it; a SystemExit naming the setup script when it has no AIConfigurator."""
    code = f"import aiconfigurator_core, os; print(os.path.join(os.path.dirname(aiconfigurator_core.__file__), *{parts!r}))"
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"no AIConfigurator in {python} ({e}); run scripts/setup_validation.sh")
    return out.stdout.strip()
