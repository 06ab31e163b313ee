# Two entry points for a fresh machine (see README.md):
#   make demo   sets up a virtual environment and runs dispatch's main example locally
#   make test   sets up a virtual environment and runs every check and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

.PHONY: demo test setup setup-demo setup-slurm setup-postgres setup-chromium lint unit dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

setup: $(BIN)/python
	$(PIP) install --quiet -c constraints.txt -e '.[dev,kubeflow,torch,postgres,ui]'

# PyTorch for the demo: the CPU build from PyTorch's CPU index where that answers within a few
# seconds (TORCH_CPU_INDEX= skips the check), else from pip's configured indexes; pip's own
# progress is shown, since torch is a large download.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_VERSION   := $(shell sed -n 's/^torch==//p' constraints.txt)

setup-demo: $(BIN)/python
	@echo "Installing dispatch with PyTorch $(TORCH_VERSION) and numpy for the DDP example (a few minutes the first time):"
	@torch_args=$$($(BIN)/python scripts/torch_source.py '$(TORCH_VERSION)' '$(TORCH_CPU_INDEX)') && \
	  echo "$(PIP) install -c constraints.txt $$torch_args -e '.[torch]'" && \
	  $(PIP) install --progress-bar on -c constraints.txt $$torch_args -e '.[torch]'
	@$(BIN)/python -c "import torch; print('installed torch', torch.__version__, '(CUDA build)' if torch.version.cuda else '(CPU build)')"

# The main example: PyTorch DDP, 2 nodes x 2 processes, on the embedded local scheduler.
demo: setup-demo
	$(BIN)/dispatch run examples/ddp/job.yaml

lint: setup
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests bench examples scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The Slurm tests start a real two-node Slurm on this machine (Debian packages, as root).
setup-slurm:
	scripts/install-slurm.sh

# The records tests start a real PostgreSQL server (Debian's package, as an unprivileged user).
setup-postgres:
	scripts/install-postgres.sh

# The web UI's browser tests drive a headless Chromium (Debian's package, as root).
setup-chromium:
	scripts/install-chromium.sh

unit: setup setup-slurm setup-postgres setup-chromium
	$(BIN)/pytest -q

test: lint unit

# A release's files: the sdist and the wheel in dist/, checked as PyPI would (twine) and for
# what the package must carry (py.typed, the dispatch command). The release workflow
# (.github/workflows/release.yml) runs the same steps on a version tag, then publishes.
dist: setup
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/python scripts/check_dist.py dist

clean:
	rm -rf $(VENV) dist .mypy_cache .ruff_cache .pytest_cache .hypothesis
