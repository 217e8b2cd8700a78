# Commons: `make run` serves on embedded defaults; `make test` runs the whole suite against
# real PostgreSQL, Redis and S3 (started when not already running).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: run test lint bench install install-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-dev

run: install
	$(BIN)/commons serve

test: install-test
	$(BIN)/python -m pytest -n 2 --dist loadfile -q $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check app storage realtime push migrations tests bench
	$(BIN)/mypy

bench: install-test
	$(BIN)/python bench/rest.py
	$(BIN)/python bench/fanout.py
	$(BIN)/python bench/push.py

clean:
	rm -rf $(VENV) .pytest-data *.egg-info
