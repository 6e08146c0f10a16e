"""get_backend: chosen by name, by where tensors live, else by what is available."""

from __future__ import annotations

import pytest
import torch

from neuron_prof.backends import device_type_of, get_backend
from neuron_prof.backends.base import Backend
from neuron_prof.errors import UsageError


def test_by_name_and_protocol() -> None:
    for name in ("cpu", "cuda", "neuron"):
        b = get_backend(name)
        assert b.name == name
        assert isinstance(b, Backend)


def test_unknown_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown backend 'tpu'"):
        get_backend("tpu")


def test_hint_module_tensor_device() -> None:
    m = torch.nn.Linear(2, 2)
    assert device_type_of(m) == "cpu"
    assert device_type_of(torch.zeros(1)) == "cpu"
    assert device_type_of(torch.device("cuda", 1)) == "cuda"
    assert device_type_of("neuron:0") == "neuron"
    assert device_type_of([torch.zeros(1), "cuda:0"]) == "cuda"
    assert get_backend(hint=m).name == "cpu"
    assert get_backend(hint="neuron:0").name == "neuron"
    assert get_backend(hint=torch.device("privateuseone")).name == "neuron"
    assert get_backend(hint=torch.device("cuda")).name == "cuda"


def test_auto_from_what_is_available() -> None:
    import sys

    # torch_neuronx (or a look-alike registered under its name by an earlier test) wins; this machine has no CUDA
    expected = "neuron" if "torch_neuronx" in sys.modules else "cuda" if torch.cuda.is_available() else "cpu"
    assert get_backend().name == expected
