# Two entry points for a fresh machine (see README.md):
#   make demo   sets up a virtual environment and runs dispatch's main example locally
#   make test   sets up a virtual environment and runs every check and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

.PHONY: demo test setup setup-demo setup-slurm lint unit clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

setup: $(BIN)/python
	$(PIP) install --quiet -c constraints.txt -e '.[dev,kubeflow,torch]'

setup-demo: $(BIN)/python
	$(PIP) install --quiet -c constraints.txt -e '.[torch]'

# The main example: PyTorch DDP, 2 nodes x 2 processes, on the embedded local scheduler.
demo: setup-demo
	$(BIN)/dispatch run examples/ddp/job.yaml

lint: setup
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The Slurm tests start a real two-node Slurm on this machine (Debian packages, as root).
setup-slurm:
	scripts/install-slurm.sh

unit: setup setup-slurm
	$(BIN)/pytest -q

test: lint unit

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
