"""Users' code unchanged on the emulated device: each idiom in tests/_idioms.py gives the same result on the
CPU and on the emulated "neuron" device.

Each device runs every idiom in a process of its own (`python -m tests._idioms`; the emulated device cannot
share a process with CPU backwards, see tests/conftest.py); the two run side by side. A process that dies (a
segfault) is restarted after the idiom it died in, which counts as a crash.

Idioms in DIFFERENT cannot match on a tensor subclass (the emulated device's tensor is one): they are strict
xfails, so one that starts to match fails the test until it is moved out. README "The emulated neuron
device" lists them and why.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._idioms import IDIOMS, results_on, same

DIFFERENT = {
    "type_is_tensor": "a tensor subclass is never `type(t) is torch.Tensor`",
    "exact_parameter_type": "nn.Parameter(subclass tensor) keeps the subclass: `type(p) is nn.Parameter` is "
                            "False (isinstance holds)",
    "load_map_location_device": "torch.load(map_location='neuron') builds device storages; a subclass has "
                                "none: a clear RuntimeError instead of torch's crash",
    "device_generator": "torch.Generator(device='neuron') needs C++ PrivateUse1 hooks (getNewGenerator)",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict[str, Any]]]:
    return results_on(["cpu", "neuron"], tmp_path_factory.mktemp("idioms"))


def test_at_least_30_idioms() -> None:
    assert len(IDIOMS) >= 30
    assert set(DIFFERENT) <= set(IDIOMS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=DIFFERENT[n])) if n in DIFFERENT else n
     for n in IDIOMS],
)
def test_idiom_same_on_cpu_and_emulated_device(
    name: str, results: dict[str, dict[str, dict[str, Any]]]
) -> None:
    cpu, neuron = results["cpu"][name], results["neuron"][name]
    assert "ok" in cpu, f"the idiom itself fails on the CPU: {cpu}"
    assert "ok" in neuron, f"on the emulated device: {neuron}"
    assert same(cpu["ok"], neuron["ok"]), f"cpu {cpu['ok']!r}\nneuron {neuron['ok']!r}"


@pytest.mark.slow
def test_the_differences_are_the_documented_ones(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Each idiom in DIFFERENT fails on the emulated device the way README says: the subclass's own type, a
    plain RuntimeError for map_location="neuron" (not torch's crash or AttributeError), C++ hooks missing."""
    neuron = results["neuron"]
    assert neuron["type_is_tensor"]["ok"] == [False, "NeuronTensor", False]
    assert neuron["exact_parameter_type"]["ok"] == [False, "NeuronTensor", False, False]
    assert neuron["load_map_location_device"]["error"].startswith(
        "RuntimeError: neuron (emulated): torch.load(map_location='neuron')")
    assert neuron["device_generator"]["error"].startswith("NotImplementedError")
    assert "getNewGenerator" in neuron["device_generator"]["error"]
