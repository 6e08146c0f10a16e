"""Shared test fixtures: paths to the real traces in ../shared and small helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
KINETO_DIR = SHARED / "traces" / "kineto"
PFTRACE_CHECK = SHARED / "tools" / "pftrace_check.py"


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


@pytest.fixture(autouse=True, scope="session")
def _private_index_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Columnar index files go to a temporary folder, never beside ../shared or into ~/.cache."""
    import os

    os.environ["NEURON_PROF_CACHE_DIR"] = str(tmp_path_factory.mktemp("nprof-cache"))
