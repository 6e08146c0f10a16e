# Two commands from a fresh clone: `make demo` and `make test`. Everything else is set up on the way.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test test-fast test-pythons check-skips mutation-check coverage bench lint clean

C_SOURCES := $(wildcard neuron_prof/loaders/json/_jscan*.[ch]) $(wildcard neuron_prof/loaders/pftrace/_pfscan*.[ch]) neuron_prof/model/_bytefind.c

$(STAMP): pyproject.toml constraints.txt setup.py $(C_SOURCES)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	# the emulated neuron device's C++ extension, built once into the user cache (without a compiler the
	# emulator falls back to its tensor-subclass device: docs/emulator.md)
	$(PY) -m neuron_prof.emulator._ext_build || echo "emulated device: no C++ extension, the subclass device runs"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/neuron-prof demo

# Two pytest processes, side by side: tests that register the emulated neuron device in-process need a process
# whose autograd engine has not started yet (see tests/conftest.py); it runs beside the other (about a minute of
# one core, which the other's two workers would otherwise leave idle at the end), its output printed after. The other spreads its test files over
# TEST_JOBS workers (pytest-xdist, one file per worker at a time: module fixtures are made once), longest
# files first (tests/file_seconds.txt, ordered by tests/conftest.py; --no-loadscope-reorder keeps that order
# instead of xdist's, by test count); -rs prints why each skipped test skipped; the JUnit reports in
# build/test-reports feed `make check-skips` (and `python tests/file_seconds.py` to refresh the seconds).
REPORTS := build/test-reports
TEST_JOBS ?= 2
test: $(STAMP)
	rm -rf $(REPORTS) && mkdir -p $(REPORTS)
	@echo "the emulated device's in-process tests run beside the others; their output: $(REPORTS)/emulator.log"
	$(PY) -m pytest -q -rs -m emulator_inprocess --junitxml=$(REPORTS)/emulator.xml $(PYTEST_ARGS) \
		>$(REPORTS)/emulator.log 2>&1 & emu=$$!; \
	$(PY) -m pytest -q -rs -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not emulator_inprocess" \
		--junitxml=$(REPORTS)/main.xml $(PYTEST_ARGS); main=$$?; \
	wait $$emu; emu_rc=$$?; \
	echo "== the emulated device's in-process tests ($(REPORTS)/emulator.log), exit $$emu_rc"; \
	cat $(REPORTS)/emulator.log; \
	[ $$main -eq 0 ] && [ $$emu_rc -eq 0 ]

# The everyday loop, under 3 minutes on 2 cores: `make test` less the tests marked slow (real programs in other
# processes, multi-process jobs, the browser: tests/conftest.py SLOW_FILES); no reports.
test-fast: $(STAMP)
	$(PY) -m pytest -q -rs -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not slow and not emulator_inprocess" \
		$(PYTEST_ARGS)
	$(PY) -m pytest -q -rs -m "emulator_inprocess and not slow" $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The suite on other Pythons (docs/development.md): a venv each (.venv-py312, .venv-py313) from pyenv's
# interpreter or python3.X on PATH, with the package and both C extensions built for that Python (checked: the
# install itself goes on without them) and every dependency but torch (scripts/requirements.py reads
# pyproject.toml): torch's CPU build is not on PyPI (constraints.txt's, for 3.11, lies on this machine's disk) and
# its CUDA build is 502 MB plus GBs of CUDA libraries.
# NEURON_PROF_TEST_NO_TORCH=1: the tests tests/needs_torch.txt lists must fail, every other one must pass
# (tests/_without_torch.py); emulator_inprocess tests (the emulated device is torch's) are left out.
PYTHONS ?= 3.12 3.13
test-pythons: $(foreach v,$(PYTHONS),test-py$(subst .,,$(v)))

.PRECIOUS: .venv-py%/.installed
test-py%: .venv-py%/.installed
	NEURON_PROF_TEST_NO_TORCH=1 .venv-py$*/bin/python -m pytest -q -rs -n $(TEST_JOBS) --dist loadfile \
		--no-loadscope-reorder -m "not emulator_inprocess" --junitxml=$(REPORTS)/py$*.xml $(PYTEST_ARGS)

.venv-py%/.installed: pyproject.toml constraints.txt setup.py scripts/requirements.py $(C_SOURCES)
	@v=$$(echo $* | sed 's/^./&./'); base=$$(pyenv prefix $$v 2>/dev/null)/bin/python$$v; \
	[ -x "$$base" ] || base=$$(command -v python$$v) || { echo "error: no Python $$v (pyenv install $$v)" >&2; exit 1; }; \
	test -x $(@D)/bin/python || (set -x; $$base -m venv $(@D))
	$(@D)/bin/python scripts/requirements.py --without torch --extra dev --build-system >$(@D)/requirements.txt
	$(@D)/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -r $(@D)/requirements.txt
	$(@D)/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(@D)/bin/python -c "import neuron_prof.loaders.json._jscan, neuron_prof.loaders.pftrace._pfscan, neuron_prof.model._bytefind"
	touch $@

# ruff, then mypy over the package as it installs (scripts/typecheck.py); settings in pyproject.toml; fails on
# any finding.
LINT_PATHS := neuron_prof exporters tui tests bench scripts setup.py
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(PY) scripts/typecheck.py

# Fails when the last `make test` skipped a test that tests/skips_allowed.txt does not allow.
check-skips: $(STAMP)
	$(PY) tests/check_skips.py $(REPORTS)/*.xml

# Breaks each security-critical line in a copy of the tree and shows its guarding tests fail.
mutation-check: $(STAMP)
	$(PY) tests/mutation_check.py

# Branch coverage per file (make coverage COV_PACKAGES=neuron_prof/analysis for one package): the same two
# processes as `make test`, combined in build/coverage/. A test failing under coverage (timing: probe hooks run
# slower under the tracer) is shown but does not stop the report: `make test` is the gate.
COV_PACKAGES ?= neuron_prof exporters tui
COV := build/coverage
coverage: $(STAMP)
	rm -rf $(COV) && mkdir -p $(COV)
	COVERAGE_FILE=$(COV)/.coverage.main $(PY) -m pytest -q -m "not emulator_inprocess" \
		$(addprefix --cov=,$(COV_PACKAGES)) --cov-branch --cov-report= $(PYTEST_ARGS) \
		|| echo "coverage: tests failed under coverage (above); make test is the gate, the figures follow"
	COVERAGE_FILE=$(COV)/.coverage.emulator $(PY) -m pytest -q -m emulator_inprocess \
		$(addprefix --cov=,$(COV_PACKAGES)) --cov-branch --cov-report= $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m coverage combine -q --data-file=$(COV)/.coverage $(COV)
	$(PY) -m coverage report --data-file=$(COV)/.coverage --sort=cover

# The suite (bench/RESULTS.md); first the separate venv for Holistic Trace Analysis (bench/.venv-hta, once).
# BENCH_ARGS picks benchmarks and sizes: make bench BENCH_ARGS="ingest --events 1e6".
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m bench.hta_venv
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-py3* build *.egg-info .pytest_cache .mypy_cache .ruff_cache
