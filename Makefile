# `make demo`: set up and run the main job.  `make test`: set up and run every test.
# Set-up runs only when .venv is missing or older than what it installs from (the stamp file).
# `make setup SETUP_FLAGS=--cpu`: torch from PyTorch's CPU wheel index (no CUDA download).
# `make docs`: the documentation site (docs/ and the API reference from docstrings) in build/site,
# built with warnings as errors (installs the docs extra into .venv first).
.PHONY: setup demo test wheel coverage bench reliability sweep-demo docs-examples docs

STAMP := .venv/.dispatchprof-installed

setup: $(STAMP)

$(STAMP): setup.cfg .ci/constraints.txt scripts/setup.sh
	./scripts/setup.sh $(SETUP_FLAGS)
	touch $@

demo: setup
	.venv/bin/dispatchprof llama-3.2-1b --batch 16 --prompt-len 200 --device PIM-AI-1chip

wheel: setup
	./scripts/check_wheel.sh

test: setup wheel
	.venv/bin/python -m pytest

coverage: setup
	.venv/bin/python scripts/coverage.py

bench: setup
	.venv/bin/python scripts/bench_overhead.py
	.venv/bin/python scripts/bench_generation.py

reliability: setup
	.venv/bin/python scripts/reliability.py

sweep-demo: setup
	.venv/bin/dispatchprof sweep llama-3.2-1b llama-3.1-8b --device H100-SXM --device PIM-AI-4chip \
		--device L4 --batch 1,8,64 --prompt-len 128,2048 --new-tokens 128 -o docs/sweep.csv --plot docs/sweep.png

docs-examples: setup
	.venv/bin/python scripts/run_doc_examples.py --slow

docs: setup
	.venv/bin/pip install -q --disable-pip-version-check -c .ci/constraints.txt -e '.[docs]'
	.venv/bin/mkdocs build --strict --quiet
