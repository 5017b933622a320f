# `make demo`: set up and run the main job.  `make test`: set up and run every test.
.PHONY: setup demo test wheel coverage bench reliability

setup:
	./scripts/setup.sh

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
