"""Users' code unchanged on the emulated device: each idiom in tests/_idioms.py gives the same result on the
CPU and on the emulated "neuron" device.

Each device runs every idiom in a process of its own (`python -m tests._idioms`; the emulated device cannot
share a process with CPU backwards, see tests/conftest.py); the two run side by side. A process that dies (a
segfault) is restarted after the idiom it died in, which counts as a crash.

The emulated device is a C++ PrivateUse1 extension, so a device tensor is a plain torch.Tensor and every
idiom matches, the four a tensor subclass cannot (`type(t) is torch.Tensor`, `type(p) is nn.Parameter`,
`torch.load(map_location="neuron")`, `torch.Generator(device="neuron")`) included. docs/emulator.md has the
measurement and the subclass fallback for machines without a C++ compiler.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._idioms import IDIOMS, results_on, same

SUBCLASS_ONLY = ("type_is_tensor", "exact_parameter_type", "load_map_location_device", "device_generator")
"""The idioms a tensor subclass fails (the strict xfails while the device was one): the extension passes them."""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    return results_on(["cpu", "neuron"], tmp_path_factory.mktemp("idioms"))


def test_at_least_30_idioms() -> None:
    assert len(IDIOMS) >= 30
    assert set(SUBCLASS_ONLY) <= set(IDIOMS)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(IDIOMS))
def test_idiom_same_on_cpu_and_emulated_device(
    name: str, results: dict[str, dict[str, dict[str, Any]]]
) -> None:
    cpu, neuron = results["cpu"][name], results["neuron"][name]
    assert "ok" in cpu, f"the idiom itself fails on the CPU: {cpu}"
    assert "ok" in neuron, f"on the emulated device: {neuron}"
    assert same(cpu["ok"], neuron["ok"]), f"cpu {cpu['ok']!r}\nneuron {neuron['ok']!r}"


@pytest.mark.slow
def test_the_subclass_only_idioms_see_plain_tensors(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """What the subclass device could not give, the extension gives as the CPU does: a plain Tensor and
    Parameter, tensors loaded onto the device, a device generator."""
    neuron = results["neuron"]
    assert neuron["type_is_tensor"]["ok"][:2] == [True, "Tensor"]
    assert neuron["exact_parameter_type"]["ok"][:2] == [True, "Parameter"]
    assert all("ok" in neuron[n] for n in SUBCLASS_ONLY), {n: neuron[n] for n in SUBCLASS_ONLY}
