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
