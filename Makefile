# spanguard: every command a user or CI needs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: help setup jars demo test test-fast lint bench schemas clean

help:
	@echo "make demo       set up, start a local Kafka broker + worker, run a live demo fleet"
	@echo "make test       set up (venv, packages, Kafka jars) and run every test"
	@echo "make test-fast  engine tests only (no broker)"
	@echo "make lint       ruff + mypy"
	@echo "make bench      benchmarks (writes bench/results/, see BENCHMARKS.md)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

jars: setup
	$(BIN)/spanguard kafka fetch

demo: jars
	$(BIN)/spanguard demo

test: jars
	$(BIN)/pytest -q

test-fast: setup
	$(BIN)/pytest -q -m "not kafka"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench.engine

schemas: setup
	$(BIN)/python -m schemas.export

clean:
	rm -rf $(VENV) .kafka/data .spanguard
