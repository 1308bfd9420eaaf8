# Two entry points (see README.md):  `make demo` runs the main recipe, `make test` runs the suite.
# Both create a virtualenv for one of the two TensorFlow stacks on first use, from its lock file:
#   STACK=2.15  TensorFlow 2.15.1 + Keras 2.15      Python 3.9-3.11  requirements-2.15.txt  .venv-2.15
#   STACK=2.21  TensorFlow 2.21.0 + tf-keras 2.21   Python 3.11-3.13 requirements-2.21.txt  .venv-2.21
# Choosing (each can be given: `make test STACK=2.21`, `make demo PYTHON=/usr/bin/python3.12`):
# - PYTHON given, STACK not: STACK is 2.15 on Python 3.9-3.11, 2.21 on 3.12 and 3.13;
# - STACK given, PYTHON not: the first of its Pythons that runs (2.15: python3.11, 3.10, 3.9;
#   2.21: python3.13, 3.12, 3.11);
# - neither: the first of python3.11, 3.10, 3.9, 3.13, 3.12, python3 that runs, and its STACK.
# A name on PATH that does not run (a pyenv shim for a version not selected) does not count.
# A wrong combination (STACK=2.15 on Python 3.12) stops before anything is installed.
PYTHONS_2.15 := python3.11 python3.10 python3.9
PYTHONS_2.21 := python3.13 python3.12 python3.11
# The first of the names given that runs, as its real path.
first_python = $(shell for p in $(1); do $$p -c 'import sys; print(sys.executable)' 2>/dev/null && break; done)
ifneq ($(strip $(PYTHON)),)
  TRIED := PYTHON=$(PYTHON)
else ifneq ($(strip $(STACK)),)
  TRIED := $(PYTHONS_$(STACK))
  PYTHON := $(call first_python,$(TRIED))
else
  TRIED := $(PYTHONS_2.15) python3.13 python3.12 python3
  PYTHON := $(call first_python,$(TRIED))
endif
MAJOR_MINOR := -c 'import sys; print("%d.%d" % sys.version_info[:2])'
PYTHON_VERSION := $(if $(strip $(PYTHON)),$(shell $(PYTHON) $(MAJOR_MINOR) 2>/dev/null))
ifeq ($(strip $(STACK)),)
  STACK := $(if $(filter 3.12 3.13,$(PYTHON_VERSION)),2.21,2.15)
endif
ifeq ($(filter 2.15 2.21,$(STACK)),)
  $(error STACK=$(STACK) is not a stack: use STACK=2.15 (Python 3.9-3.11) or STACK=2.21 (Python 3.11-3.13))
endif
# Each stack's Pythons: the check below, and what the messages say.
RANGE_2.15 := (3, 9) <= sys.version_info[:2] <= (3, 11)
RANGE_2.21 := (3, 11) <= sys.version_info[:2] <= (3, 13)
PYTHONS_TEXT_2.15 := Python 3.9-3.11
PYTHONS_TEXT_2.21 := Python 3.11-3.13
OTHER_2.15 := 2.21
OTHER_2.21 := 2.15
GOAL := make $(or $(MAKECMDGOALS),setup)
LOCK := requirements-$(STACK).txt
VENV := .venv-$(STACK)
BIN := $(VENV)/bin
# The stamp names the interpreter's version, so that PYTHON=python3.9 after a 3.11 set-up (or the
# other way round) rebuilds the venv instead of silently reusing it; a newer lock file or
# pyproject.toml rebuilds it too.
STAMP := $(VENV)/.installed-python$(PYTHON_VERSION)

.PHONY: setup demo test lint format bench clean stack

setup: $(STAMP)

# TensorFlow has wheels for some Pythons only: say so before pip fails with "no matching
# distribution". setuptools >= 77 builds the editable install (PEP 660) and reads the SPDX
# license string (PEP 639); the venvs of Python 3.9-3.11 come with 58-65. The lock file then
# pins setuptools itself (tensorboard 2.15 needs its pkg_resources). Bytecode is compiled after
# the install, on all cores; a file that does not compile (a template) is skipped, as pip skips it.
$(STAMP): $(LOCK) pyproject.toml
	@[ -n "$(PYTHON_VERSION)" ] || { \
	  echo "No Python runs for STACK=$(STACK) (tried $(TRIED))."; \
	  echo "Install Python 3.11 and run: $(GOAL) STACK=$(STACK) PYTHON=/path/to/python3.11"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(not ($(RANGE_$(STACK))))' || { \
	  echo "STACK=$(STACK) needs $(PYTHONS_TEXT_$(STACK)) (TensorFlow $(STACK) has no wheels for $$($(PYTHON) --version 2>&1))."; \
	  if $(PYTHON) -c 'import sys; sys.exit(not ($(RANGE_$(OTHER_$(STACK)))))'; then \
	    echo "Run: $(GOAL) STACK=$(OTHER_$(STACK)) PYTHON=$(PYTHON)   (or give STACK=$(STACK) a PYTHON of $(PYTHONS_TEXT_$(STACK)))"; \
	  else \
	    echo "Install Python 3.11 and run: $(GOAL) STACK=$(STACK) PYTHON=/path/to/python3.11"; \
	  fi; exit 1; }
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python $(MAJOR_MINOR))" != "$(PYTHON_VERSION)" ]; then \
	  echo "rm -rf $(VENV)   # it was made with another Python"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/python -m pip install --quiet --no-compile -r $(LOCK)
	@echo "Compiling the installed packages' bytecode on every core (pip compiles one file at a time)"
	$(BIN)/python -m compileall -qq -j0 $(VENV)/lib || true
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

# .venv: where the single-stack Makefile of before made its venv.
clean:
	rm -rf .venv-2.15 .venv-2.21 .venv .pytest_cache

# Which stack, Python and venv the targets above take (`make stack STACK=2.21`).
stack:
	@echo "STACK=$(STACK) PYTHON=$(or $(PYTHON),none) (Python $(or $(PYTHON_VERSION),?)) VENV=$(VENV) LOCK=$(LOCK)"
