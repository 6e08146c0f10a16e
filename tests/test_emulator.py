"""The emulated neuron device: numbers match CPU, compile/fallback/sync/memory behave like TorchNeuron.

The emulator is enabled once for the whole test process (PyTorch cannot undo the registration) with zero
compile cost; tests that need other costs use emulator.reconfigure() and restore the fast config after.
Tests needing a fresh process (disk cache across runs, enable() refusals, DDP) run subprocesses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch

from neuron_prof import emulator
from neuron_prof.emulator import EmulatorConfig


@pytest.fixture(scope="module")
def tnx():  # type: ignore[no-untyped-def]
    mod = emulator.enable(EmulatorConfig.fast())
    emulator.reconfigure(EmulatorConfig.fast())
    return mod


@pytest.fixture
def cfg(tnx) -> Iterator[EmulatorConfig]:  # type: ignore[no-untyped-def]
    """The fast config; whatever a test reconfigures is undone afterwards."""
    base = EmulatorConfig.fast()
    emulator.reconfigure(base)
    yield base
    torch.neuron.synchronize()
    emulator.reconfigure(base)


def _layer() -> torch.nn.Module:
    # bias=False: the key projection's bias has a mathematically zero gradient (softmax ignores a constant
    # shift), so its rounding noise, divided by Adam's eps, would dominate the comparison.
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True,
                                            bias=False)


def _train(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, steps: int = 2) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        # A loss with O(1) gradients: with near-zero gradients Adam divides rounding noise by eps.
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_transformer_training_step_matches_cpu(cfg: EmulatorConfig) -> None:
    torch.manual_seed(0)
    cpu_model = _layer()
    dev_model = _layer()
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_model.to("neuron")
    x = torch.randn(2, 8, 32)
    target = torch.randn(2, 8, 32)
    assert next(dev_model.parameters()).device.type == "neuron"

    cpu_losses = _train(cpu_model, x, target)
    dev_losses = _train(dev_model, x.to("neuron"), target.to("neuron"))

    assert dev_losses == pytest.approx(cpu_losses, rel=1e-5, abs=1e-6)
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert p_dev.device.type == "neuron"
        torch.testing.assert_close(p_dev.cpu(), p_cpu, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_factories_and_seeded_random_match_cpu(cfg: EmulatorConfig) -> None:
    torch.manual_seed(3)
    a = torch.randn(5, 3)
    torch.manual_seed(3)
    b = torch.randn(5, 3, device="neuron")
    torch.testing.assert_close(b.cpu(), a)
    assert torch.arange(2, 11, 3, device="neuron").cpu().tolist() == [2, 5, 8]
    assert torch.eye(3, device="neuron").shape == (3, 3)
    assert torch.tensor([1.5, 2.5], device="neuron").sum().item() == 4.0
    assert "device='neuron:0'" in repr(torch.ones(2, device="neuron"))


def test_autocast_runs_matmuls_in_bf16(cfg: EmulatorConfig) -> None:
    lin = torch.nn.Linear(8, 4).to("neuron")
    x = torch.randn(3, 8, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        y = lin(x)
        s = torch.softmax(y, dim=-1)
    assert y.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    torch.testing.assert_close(y.float().cpu(), lin(x).cpu(), rtol=2e-2, atol=2e-2)


def test_first_call_compile_only_on_first_call_of_a_signature(tnx, cfg: EmulatorConfig) -> None:  # type: ignore[no-untyped-def]
    emulator.reconfigure(replace(cfg, eager_compile_base_ms=40.0))
    gt = emulator.ground_truth()
    x = torch.ones(7, 13, device="neuron")
    y = torch.ones(7, 13, device="neuron")
    n0 = len(gt.records("compile"))

    t0 = time.perf_counter()
    x.mul(y)  # new signature: pays the compile
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    x.mul(y)  # same signature, new values: cached
    second = time.perf_counter() - t0
    x.mul(2.5)  # the scalar overload is a new signature...
    x.mul(3.5)  # ...but a different runtime scalar is not

    compiles = gt.records("compile")[n0:]
    assert [c["name"] for c in compiles] == ["aten::mul.Tensor", "aten::mul.Tensor"] or \
        [c["name"] for c in compiles] == ["aten::mul.Tensor"]
    assert first >= 0.040 and second < 0.020
    entries = [e for e in tnx._C._get_compilation_cache_entries() if e["cache_key"].startswith("aten::mul.Tensor_")]
    by_access = sorted(e["access_count"] for e in entries)
    assert by_access[-1] >= 2 and all(e["compilation_time_ms"] >= 40 for e in entries)
    stats = tnx._C._get_compilation_cache_stats()
    assert stats["total_compilations"] >= len(compiles) and stats["cache_hits"] >= 2
