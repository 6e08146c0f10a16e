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


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Register the emulated neuron device before any test runs when some test uses it in this process.

    PyTorch's autograd engine sizes its per-device queues at the first backward of the process; a device
    registered after that makes every later backward on it fail an internal assert. So the device must exist
    before the first backward of the session, whichever test runs first. `torch_neuronx` is not put in
    sys.modules here (tests that want it use the `emulated_torch_neuronx` fixture), so other tests still see
    a process without torch-neuronx.
    """
    if any(item.get_closest_marker("emulator_inprocess") for item in items):
        from neuron_prof import emulator

        emulator.enable(emulator.EmulatorConfig.fast(install_torch_neuronx=False))
        import torch

        # The first backward sizes the engine's queues: do it now, while the device count is the real one
        # (later tests swap device modules for fakes).
        x = torch.ones(2, device="neuron", requires_grad=True)
        (x * 2).sum().backward()


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
