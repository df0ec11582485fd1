# One place for the everyday commands. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install dev run chat test lint typecheck check bench clean

$(BIN)/switchboard:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e .

install: $(BIN)/switchboard

dev: install
	$(BIN)/pip install -e '.[dev]'

run: install
	@test -f $${SWITCHBOARD_HOME:-$$HOME/.switchboard}/config.toml || $(BIN)/switchboard onboard
	$(BIN)/switchboard run

chat: install
	@test -f $${SWITCHBOARD_HOME:-$$HOME/.switchboard}/config.toml || $(BIN)/switchboard onboard
	$(BIN)/switchboard chat

test: dev
	$(BIN)/python -m pytest -n 2

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: dev
	$(BIN)/mypy

check: lint typecheck test

bench: dev
	$(BIN)/python -m bench.core

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
