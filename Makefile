# Two commands do all the set-up on a fresh machine with Python >= 3.11:
#   make demo   installs everything into .venv and runs the translation pipeline on the CPU
#   make test   installs everything into .venv and runs the test suite
# one opens MLflow's UI on the demo's runs (on 127.0.0.1; prints the newest run's page):
#   make ui [STORE=sqlite:///runs/RUN_DIR/mlflow.db UI_PORT=5000]
# and one serves a registered model over HTTP (no virtualenv to activate):
#   make serve [MODEL=models:/NAME@champion TRACKING_URI=sqlite:///runs/RUN_DIR/mlflow.db PORT=5001
#               WORKERS=1 THREADS=0]
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CONFIG ?= configs/translation/demo.yaml

# The machines this runs on have no internet beyond package registries: no telemetry, anywhere.
export DO_NOT_TRACK := true
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export TF_CPP_MIN_LOG_LEVEL ?= 2

# What `make serve` serves: the weekly retraining's champion by default.
MODEL ?= models:/translation-ddtp-en-de-cpu-small@champion
TRACKING_URI ?= sqlite:///runs/cpu-small/mlflow.db
HOST ?= 127.0.0.1
PORT ?= 5001
# Server processes, and the decoding threads of each (0: every core); README, "Serving settings".
WORKERS ?= 1
THREADS ?= 0

# What `make ui` shows: the demo's store by default.
STORE ?= sqlite:///runs/demo/mlflow.db
UI_PORT ?= 5000

.PHONY: install demo test benchmark serve ui clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m flows.translation --config $(CONFIG)

# One pytest worker per core (pytest-xdist), each test file on one worker: the files' session
# fixtures (a trained model, a tokenizer, a Prefect server) are built once per worker, not per test.
test: install
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder

# The benchmarks that need no input of their own (the probes need a finished run, the parsing
# peers a treebank), each run as a module from the checkout: python -m benchmarks.<group>.<module>.
BENCHMARKS = $(subst /,.,$(basename $(wildcard benchmarks/speed/bench_*.py benchmarks/peers/bench_*_vs_kerashub.py)))

benchmark: install
	@for module in $(BENCHMARKS); do $(PY) -m $$module; done

# `mlflow models serve --env-manager local` starts the scoring server by the name `uvicorn`, which
# only the virtualenv has: its bin goes first on PATH, as activating it would do. A run_dir's own
# store that was copied or moved is made to name its models where they are now (flows/relocation.py).
# TensorFlow's oneDNN kernels keep a cache of primitives per input shape and thread that a server's
# varied requests fill: the worker grew by 40-47% of its ready size under load with them, 4-7% without
# (benchmarks/results/README.md, "make serve's memory"); the trim after each request cannot return it.
serve:
	$(PY) -m flows.relocation "$(TRACKING_URI)"
	PATH="$(abspath $(VENV))/bin:$$PATH" MLFLOW_TRACKING_URI="$(TRACKING_URI)" KERAS_TRANSFORMER_THREADS=$(THREADS) \
	  TF_ENABLE_ONEDNN_OPTS=0 \
	  $(VENV)/bin/mlflow models serve -m "$(MODEL)" --env-manager local --host $(HOST) --port $(PORT) \
	  --workers $(WORKERS)

# The newest run's page first (MLflow 3's UI opens an experiment in its GenAI view; that page is in the
# model-training one), then the UI itself, on this machine only and with the telemetry opt-outs above.
# Without MLflow's job runner: its processes run GenAI jobs (LLM judges, trace scans) that no run here submits,
# and more than double the UI's memory (benchmarks/results/make-ui-job-runner-2026-12-07.json).
ui: install
	$(PY) -m flows.relocation "$(STORE)"
	$(PY) -m flows.ui "$(STORE)" --port $(UI_PORT)
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
	  $(VENV)/bin/mlflow ui --backend-store-uri "$(STORE)" --host 127.0.0.1 --port $(UI_PORT)

clean:
	rm -rf runs .pytest_cache
