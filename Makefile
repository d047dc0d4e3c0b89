# Every target installs into .venv as needed, so a fresh clone needs only `make demo` / `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STORE ?= demo-store
OUT ?= demo-out
# The VC quotas the sample's scheduler enforced (written by `make sample`).
QUOTAS ?= sample_data/ground_truth/vc_quotas.csv

# The replay engine's modules, compiled with mypyc beside their sources (docs/replay.md,
# *Compiled engine*); rebuilt when one changes. Without a C compiler the build says so and the
# pure-Python engine runs (as it does whenever the build is older than the sources).
NATIVE_SRC := $(addprefix philly_analyze/sim/,events.py placement.py core.py engine.py preemptive.py)
NATIVE := $(VENV)/.native

.PHONY: install native demo test test-all lint format bench sample clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

$(NATIVE): $(STAMP) $(NATIVE_SRC) philly_analyze/sim/native.py
	$(BIN)/python -c 'from philly_analyze.sim.native import main; main()'
	touch $(NATIVE)

install: $(STAMP) $(NATIVE)

native: $(STAMP)
	rm -f $(NATIVE)
	$(MAKE) $(NATIVE)

demo: $(STAMP) $(NATIVE)
	rm -rf $(STORE) $(OUT)
	$(BIN)/philly-analyze ingest sample_data --store $(STORE)
	$(BIN)/philly-analyze report --store $(STORE) --vc-quotas $(QUOTAS) --format html \
		-o $(OUT)/report.html --figures $(OUT)/figures
	$(BIN)/philly-analyze replay --store $(STORE) --quotas $(QUOTAS) --policy philly,relaxed \
		--out $(OUT)/replay
	$(BIN)/philly-analyze replay --store $(STORE) --policy muxflow --out $(OUT)/replay-muxflow

test: $(STAMP) $(NATIVE)
	$(BIN)/pytest -n 2

test-all: $(STAMP) $(NATIVE)
	$(BIN)/pytest -n 2 -m ''

# mypy checks what [tool.mypy] `files` in pyproject.toml lists, with that section's settings.
lint: $(STAMP)
	$(BIN)/ruff check philly_analyze tests bench
	$(BIN)/ruff format --check philly_analyze tests bench
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix philly_analyze tests bench
	$(BIN)/ruff format philly_analyze tests bench

bench: $(STAMP) $(NATIVE)
	$(BIN)/python -m bench

# sample_data/: a small synthetic history (all formats + ground truth), same bytes every run.
sample: $(STAMP)
	$(BIN)/philly-analyze synth --out sample_data --force --quiet --jobs 300 --machines 8 \
		--days 2 --start 2017-11-04 --seed 3 --ganglia-step 360

clean:
	rm -rf $(VENV) $(STORE) $(OUT) build *.egg-info .pytest_cache .ruff_cache .mypy_cache bench-out
	rm -f philly_analyze/sim/*.so philly_analyze/sim/native.json
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
