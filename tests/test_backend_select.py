"""get_backend: chosen by name, by where tensors live, else by what is available."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

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


# capture.md: `backend` defaults to "from `hint` (a model or tensor) or what is installed". Written by hand:
# (torch_neuronx installed, CUDA available, hint) -> backend.
AUTO_TABLE = [
    (False, False, None, "cpu"),
    (True, False, None, "neuron"),
    (False, True, None, "cuda"),
    (True, False, "cpu", "cpu"),  # a hint wins over what is installed
    (False, True, "cpu", "cpu"),
    (False, False, "neuron:0", "neuron"),
    (False, False, "cuda:1", "cuda"),
]


@pytest.fixture()
def no_torch_neuronx() -> Iterator[None]:
    """No torch_neuronx in sys.modules during the test (a look-alike an earlier test left is put back)."""
    saved = sys.modules.pop("torch_neuronx", None)
    yield
    sys.modules.pop("torch_neuronx", None)
    if saved is not None:
        sys.modules["torch_neuronx"] = saved


@pytest.mark.usefixtures("no_torch_neuronx")
@pytest.mark.parametrize(("neuronx", "cuda", "hint", "expected"), AUTO_TABLE)
def test_auto_from_hint_or_what_is_installed(neuronx: bool, cuda: bool, hint: str | None, expected: str,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if neuronx:  # an installed package of that name on sys.path
        (tmp_path / "torch_neuronx").mkdir()
        (tmp_path / "torch_neuronx" / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert get_backend(hint=torch.zeros(1) if hint == "cpu" else hint).name == expected
