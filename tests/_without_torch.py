"""The suite on a Python without torch (`make test-pythons`: Python 3.12 and 3.13, where no CPU torch wheel is
on the registry): a pytest plugin that tests/conftest.py registers when NEURON_PROF_TEST_NO_TORCH=1.

Every test runs. Those that tests/needs_torch.txt lists (a test file, or one test of it by name, all its
parameters) are expected to fail for torch's absence: strict xfail, so a listed test that passes fails the run
and the list cannot hold a test that needs no torch; a listed file that cannot be imported without torch is one
expected failure, its import; a listed test that skips (a torch console script absent, `importorskip("torch")`)
counts as expected too. Any other test that reaches for torch fails the run. An entry that names no test
is an error, so a renamed test cannot leave the list quietly."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

LIST = Path(__file__).with_name("needs_torch.txt")
REPO = Path(__file__).resolve().parents[1]
REASON = "needs torch (tests/needs_torch.txt)"


def read_list(path: Path = LIST) -> set[str]:
    """The entries, `tests/test_x.py` or `tests/test_x.py::test_name`, without comments and blank lines."""
    out = set()
    for line in path.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.add(entry)
    return out


def _torch_absent(error: BaseException | None) -> bool:
    return isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] == "torch"


class _ImportNeedsTorch(pytest.Item):
    """A listed test file that cannot be imported without torch: its import, as one test expected to fail."""

    def __init__(self, *, error: BaseException, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.error = error

    def runtest(self) -> None:
        raise self.error

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"import {self.path.name}"


class _ListedModule(pytest.Module):
    """A listed test file: collected as usual, or, when its import needs torch, as `_ImportNeedsTorch`."""

    def collect(self):  # type: ignore[no-untyped-def]
        try:
            self.obj  # noqa: B018 - imports the module
        except self.CollectError as e:
            if not _torch_absent(e.__cause__):
                raise
            item = _ImportNeedsTorch.from_parent(self, name="import", error=e.__cause__)
            item.add_marker(pytest.mark.xfail(reason=REASON, strict=True))
            return [item]
        return super().collect()


class WithoutTorch:
    """The plugin (see the module's docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        if importlib.util.find_spec("torch") is not None:
            raise pytest.UsageError("NEURON_PROF_TEST_NO_TORCH=1 runs the suite in a venv without torch, "
                                    f"and {sys.executable} has torch")
        self.entries = read_list()
        self.files = {e.split("::")[0] for e in self.entries}
        self.listed: set[str] = set()
        missing = sorted(f for f in self.files if not (REPO / f).is_file())
        if missing:
            raise pytest.UsageError(f"{LIST.name} names test files that do not exist: {', '.join(missing)}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if module_path.relative_to(REPO).as_posix() in self.files:
            return _ListedModule.from_parent(parent, path=module_path)
        return None

    @pytest.hookimpl(tryfirst=True)  # before `-m`/`-k` deselect: the entries are matched against every test
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        matched: set[str] = set()
        for item in items:
            file = item.path.relative_to(REPO).as_posix()
            test = f"{file}::{getattr(item, 'originalname', item.name)}"
            for entry in (file, test):
                if entry in self.entries:
                    matched.add(entry)
                    self.listed.add(item.nodeid)
                    if not isinstance(item, _ImportNeedsTorch):
                        item.add_marker(pytest.mark.xfail(reason=REASON, strict=True))
        collected = {item.path.relative_to(REPO).as_posix() for item in items}
        stale = sorted(e for e in self.entries - matched if e.split("::")[0] in collected)
        if stale:
            raise pytest.UsageError(f"{LIST.name} names tests that do not exist: {', '.join(stale)}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A listed test that skips is expected not to run, as an xfail (not a skip `make check-skips` counts)."""
        report = yield
        if report.skipped and not hasattr(report, "wasxfail") and item.nodeid in self.listed:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            report.wasxfail = f"{REASON}: {reason}"
        return report

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        stats = terminalreporter.stats
        terminalreporter.write_line(
            f"without torch, Python {sys.version.split()[0]}: {len(stats.get('passed', []))} passed, "
            f"{len(stats.get('xfailed', []))} that {LIST.name} lists failed as expected")
