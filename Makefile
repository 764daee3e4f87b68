# Two commands do all the set-up on a fresh machine with Python >= 3.11:
#   make demo   installs everything into .venv and runs the translation pipeline on the CPU
#   make test   installs everything into .venv and runs the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CONFIG ?= configs/translation/demo.yaml

# The machines this runs on have no internet beyond package registries: no telemetry, anywhere.
export DO_NOT_TRACK := true
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: install demo test benchmark clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m flows.translation --config $(CONFIG)

test: install
	$(PY) -m pytest

benchmark: install
	@for script in benchmarks/bench_*.py; do $(PY) $$script; done

clean:
	rm -rf runs .pytest_cache
