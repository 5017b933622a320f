#!/usr/bin/env bash
# The validation environment: NVIDIA's AIConfigurator (Apache-2.0), whose wheel ships the measured
# serving rows scripts/validate_serving.py predicts (silicon_sample.csv) and the estimator it runs
# side by side. It lives in .venv-validation, apart from .venv: it is never a dependency of dispatchprof.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-validation/bin/python ] || "$PY" -m venv .venv-validation
.venv-validation/bin/pip install -q --disable-pip-version-check aiconfigurator==0.12.0 aiconfigurator-core==0.12.0
echo "dispatchprof: .venv-validation is ready (aiconfigurator 0.12.0)."
