# Two commands from a fresh clone: `make demo` and `make test`. Everything else is set up on the way.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/neuron-prof demo

# Two pytest processes: tests that register the emulated neuron device in-process need a process whose
# autograd engine has not started yet (see tests/conftest.py).
test: $(STAMP)
	$(PY) -m pytest -q -m "not emulator_inprocess" $(PYTEST_ARGS)
	$(PY) -m pytest -q -m emulator_inprocess $(PYTEST_ARGS)

# The suite (bench/RESULTS.md); first the separate venv for Holistic Trace Analysis (bench/.venv-hta, once).
# BENCH_ARGS picks benchmarks and sizes: make bench BENCH_ARGS="ingest --events 1e6".
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m bench.hta_venv
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
