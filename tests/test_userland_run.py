"""User programs (tests/userland) against their tags under `neuron-prof run` (issue 14): the `run` half of
tests/test_userland.py's cases (its docstring says which programs run which ways), in a file of its own so
pytest-xdist gives the two halves to its two workers (tests/userland/_suite.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.userland import _harness as h
from tests.userland import _suite as s

pytestmark = pytest.mark.slow  # subprocess runs of real programs, like the other multi-process tests


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[s.Runs]:
    yield from s.module_runs(request, tmp_path_factory)


@pytest.mark.parametrize("case", s.case_params("run"))
def test_findings_at_exact_lines(case: tuple[h.Program, str], runs: s.Runs) -> None:
    """Every `# EXPECT` of the run's device is found at its exact line; CLEAN programs: nothing above info
    (but the load-dependent kinds, `h.LOAD_DEPENDENT`, which `bench accuracy` measures)."""
    s.check_findings(case, runs)
