"""Shared test fixtures: paths to the real traces in ../shared, the .pftrace checker, small helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # `make test &` from a script: a shell without job control starts background jobs with Ctrl-C ignored, and
    # Python then keeps it ignored. The tests send SIGINT as a terminal's Ctrl-C would (to this process and to
    # the `neuron-prof` processes they start, which inherit what is ignored): give them a terminal's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
KINETO_DIR = SHARED / "traces" / "kineto"
PFTRACE_CHECK = REPO / "tests" / "pftrace_check.py"
"""The .pftrace checker (vendored from ../shared/tools, so every clone checks its traces)."""


def pftrace_check(path: str | Path) -> subprocess.CompletedProcess[str]:
    """Run the .pftrace checker on `path` (it replays the Perfetto importer's rules)."""
    return subprocess.run([sys.executable, str(PFTRACE_CHECK), str(path)], capture_output=True, text=True,
                          timeout=300)


def shared_kineto(name: str) -> Path:
    """The real trace ../shared/traces/kineto/`name`; the test skips, as the others do, when ../shared is
    absent (a clone away from the workspace; `make check-skips` then reports it)."""
    path = KINETO_DIR / name
    if not path.is_file():
        pytest.skip("../shared/traces absent")
    return path


def kineto_traces() -> list[Path]:
    """Every real trace in ../shared/traces/kineto (empty when ../shared is absent)."""
    if not KINETO_DIR.is_dir():
        return []
    return sorted(p for p in KINETO_DIR.iterdir() if p.name.endswith((".json", ".json.gz")))


@pytest.fixture(params=kineto_traces() or [pytest.param(None, marks=pytest.mark.skip(reason="../shared/traces absent"))],
                ids=lambda p: p.name if p else "none")
def kineto_trace(request: pytest.FixtureRequest) -> Path:
    """Each real Kineto trace in turn."""
    return request.param  # type: ignore[no-any-return]


def pytest_configure(config: pytest.Config) -> None:
    """NEURON_PROF_TEST_NO_TORCH=1 (`make test-pythons`): the suite on a Python without torch, with the tests
    that tests/needs_torch.txt lists expected to fail (tests/_without_torch.py)."""
    if os.environ.get("NEURON_PROF_TEST_NO_TORCH") == "1":
        from tests._without_torch import WithoutTorch

        config.pluginmanager.register(WithoutTorch(config), "neuron-prof-without-torch")


@pytest.fixture(autouse=True, scope="session")
def _private_index_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Columnar index files go to a temporary folder, never beside ../shared or into ~/.cache; the run history
    (written by every capture) likewise, never into ~/.local/share."""
    os.environ["NEURON_PROF_CACHE_DIR"] = str(tmp_path_factory.mktemp("nprof-cache"))
    os.environ["NEURON_PROF_DATA_DIR"] = str(tmp_path_factory.mktemp("nprof-data"))


SLOW_FILES = frozenset({
    # real programs in other processes: userland programs, `neuron-prof run` captures, fresh interpreters
    "test_userland.py", "test_userland_run.py", "test_check_userland.py", "test_tui_compile_view.py",
    "test_cli_run_device_profile.py", "test_ops_captures.py", "test_exact_sites.py", "test_backward_sites.py",
    "test_cli_run_quiet.py", "test_cli_run_traceback.py", "test_emulator_explorer.py",
    "test_emulator_async_compile.py", "test_emulator_capture_default.py", "test_emulator_process.py",
    "test_emulator_idioms.py", "test_churn_plan.py", "test_dtype_use.py", "test_silent_fallback.py",
    "test_step_inference_run.py", "test_probe_deep_fallback.py", "test_compile_quiet.py", "test_demo.py",
    "test_capture_faults.py", "test_warmup_plan.py", "test_check_baseline.py", "test_capture_end_progress.py",
    "test_def_lines.py", "test_eval_phase.py", "test_efficiency.py", "test_emulator_explorer_outputs.py",
    "test_compile_fallbacks.py", "test_docs.py",
    # a trace larger than a memory limit, generated, read in memory and streamed
    "test_bigtraces.py",
    # multi-process jobs: gloo groups, torchrun, several ranks
    "test_run_torchrun.py", "test_job_real.py", "test_merge_multiproc.py", "test_capture_ranks.py",
    "test_probe_collectives.py", "test_cli_run_process_groups.py",
    # headless Chromium, and the TUI over every large trace of ../shared
    "test_report_browser.py", "test_report_lines_browser.py", "test_tui_traces.py",
})
"""Test files marked `slow` as a whole (single tests elsewhere carry `@pytest.mark.slow` themselves):
`make test` runs them, `make test-fast` leaves them out. Chosen by their seconds in tests/file_seconds.txt
(4-141 s each, 761 of the suite's 1,022 s), so that the everyday loop stays under 3 minutes on 2 cores."""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Marks the tests of `SLOW_FILES` slow as they are collected, before `-m` selects."""
    if item.path.name in SLOW_FILES:
        item.add_marker(pytest.mark.slow)


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Test files in the order of their seconds in the last full run, longest first (tests/file_seconds.py):
    `make test`'s workers take whole files in this order, so no long file starts when the other worker is
    nearly done. Tests keep their order within a file."""
    from tests.file_seconds import longest_first, read

    seconds = read()
    if not seconds:
        return
    names = list(dict.fromkeys(item.path.name for item in items))
    rank = {name: i for i, name in enumerate(longest_first(names, seconds))}
    items.sort(key=lambda item: rank[item.path.name])  # stable: a file's tests stay in order


@pytest.hookimpl(trylast=True)  # after `-m` deselection
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Test files go longest first (`_longest_files_first`); tests marked `emulator_inprocess` run in a pytest
    process of their own (`make test` runs two).

    They register the emulated neuron device in the test process, and PyTorch's autograd engine sizes its
    per-device queues once, at its first start: a process that already ran a CPU backward fails an internal
    assert on every later backward on the new device. In a mixed session they are skipped with the command
    that runs them.
    """
    _longest_files_first(items)
    emu = [item for item in items if item.get_closest_marker("emulator_inprocess")]
    if not emu:
        return
    if len(emu) < len(items):
        skip = pytest.mark.skip(reason="uses the emulated device in-process: run `pytest -m emulator_inprocess` "
                                       "in a process of its own (make test does)")
        for item in emu:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def emulated_torch_neuronx():  # type: ignore[no-untyped-def]
    """The emulator's torch_neuronx-shaped module, installed in sys.modules for one test module."""
    import sys

    from neuron_prof import emulator

    mod = emulator.enable(emulator.EmulatorConfig.fast())
    emulator.reconfigure(emulator.EmulatorConfig.fast())
    saved = {k: sys.modules.get(k) for k in ("torch_neuronx", "torch_neuronx._C", "torch_neuronx.profiling")}
    sys.modules["torch_neuronx"] = mod
    sys.modules["torch_neuronx._C"] = mod._C
    sys.modules["torch_neuronx.profiling"] = mod.profiling
    yield mod
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v
