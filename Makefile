# Two entry points (see README.md):  `make demo` runs the main recipe, `make test` runs the suite.
# Both create .venv from requirements.txt on first use (Python 3.9-3.11; 3.11 preferred, and
# chosen unless PYTHON=... says otherwise).
PYTHON ?= $(shell command -v python3.11 || command -v python3.10 || command -v python3.9 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The stamp names the interpreter's version, so that PYTHON=python3.9 after a 3.11 set-up (or the
# other way round) rebuilds .venv instead of silently reusing it.
MAJOR_MINOR := -c 'import sys; print("%d.%d" % sys.version_info[:2])'
PYTHON_VERSION := $(shell $(PYTHON) $(MAJOR_MINOR) 2>/dev/null)
STAMP := $(VENV)/.installed-python$(PYTHON_VERSION)

.PHONY: setup demo test lint format bench clean

setup: $(STAMP)

# TensorFlow 2.15 has wheels for Python 3.9-3.11 only: say so before pip fails with "no matching
# distribution". setuptools >= 77 builds the editable install (PEP 660) and reads the SPDX
# license string (PEP 639); the venvs of Python 3.9-3.11 come with 58-65.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 11))' || { \
	  echo "tfest_kit needs Python 3.9-3.11 (TensorFlow 2.15 has no wheels for $$($(PYTHON) --version 2>&1))."; \
	  echo "Install Python 3.11 and run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11"; exit 1; }
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python $(MAJOR_MINOR))" != "$(PYTHON_VERSION)" ]; then \
	  echo "rm -rf $(VENV)   # it was made with another Python"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m recipes.mobilenet_cats_dogs $(ARGS)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
