"""What an op did with device data, from the inputs torch.profiler records (capture/_device_ops.classify).

The inputs are shaped like torch's `_TensorMetadata` (device, dtype, sizes) plus the non-tensor arguments as
the profiler records them (ScalarType numbers as strings, None for devices): see torch-facts.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from neuron_prof.capture._device_ops import classify, user_call_name


@dataclass
class TM:
    """A recorded tensor input (torch._C._profiler._TensorMetadata's fields we read)."""

    device: str
    dtype: str
    sizes: tuple[int, ...]


def dev(*sizes: int, dtype: str = "torch.float32") -> TM:
    return TM("neuron:0", dtype, sizes)


def host(*sizes: int, dtype: str = "torch.float32") -> TM:
    return TM("cpu", dtype, sizes)


@pytest.mark.parametrize("name, inputs, expected", [
    # host reads of device data
    ("aten::_local_scalar_dense", [dev()], [("sync", "item", [], "neuron:0")]),
    ("aten::is_nonzero", [dev(1)], [("sync", "item", [1], "neuron:0")]),
    ("aten::nonzero", [dev(4, 3, dtype="torch.bool")], [("sync", "data-dependent shape", [4, 3], "neuron:0")]),
    ("aten::copy_", [host(4, 3), dev(4, 3), "False"], [("sync", "copy to host", [4, 3], "neuron:0")]),
    ("aten::_copy_from", [dev(2), host(2), "False"], [("sync", "copy to host", [2], "neuron:0")]),
    # the same ops on the host read nothing from a device
    ("aten::_local_scalar_dense", [host()], []),
    ("aten::copy_", [host(4), host(4), "False"], []),
    ("aten::nonzero", [host(4)], []),
    # float64 / int64 reaching the device
    ("aten::copy_", [dev(3, 5, dtype="torch.float64"), host(3, 5, dtype="torch.float64"), "False"],
     [("float64", "to device", [3, 5], "neuron:0")]),
    ("aten::copy_", [dev(3, dtype="torch.float64"), dev(3), "False"], [("float64", "cast", [3], "neuron:0")]),
    ("aten::copy_", [dev(5, dtype="torch.int64"), host(5, dtype="torch.int64"), "False"],
     [("int64", "to device", [5], "neuron:0")]),
    ("aten::zero_", [dev(2, dtype="torch.float64")], [("float64", "created on device", [2], "neuron:0")]),
    ("aten::to", [dev(4, 3), "7", "False", "False", "None"], [("float64", "cast", [4, 3], "neuron:0")]),
    # not arrivals: a float64 tensor already on the device used again, host-side float64, a float32 copy
    ("aten::copy_", [dev(3, dtype="torch.float64"), dev(3, dtype="torch.float64"), "False"], []),
    ("aten::zero_", [host(2, dtype="torch.float64")], []),
    ("aten::copy_", [dev(3), host(3), "False"], []),
    ("aten::to", [host(4, 3), "7", "False", "False", "None"], []),
])
def test_classify(name: str, inputs: list[object], expected: list[tuple[object, ...]]) -> None:
    assert classify(name, inputs, TM) == expected


@pytest.mark.parametrize("event, c_call, func, expected", [
    ("<built-in method item of Tensor object at 0x7f>", True, "", ".item()"),
    ("<built-in function print>", True, "", "print()"),
    ("<built-in method nonzero of type object at 0x7f>", True, "", ".nonzero()"),
    ("neuron_prof/capture/_operators.py(21): __float__", False, "__float__", "float()"),
    ("neuron_prof/capture/_operators.py(21): __bool__", False, "__bool__", "bool() or if"),
    ("torch/_tensor.py(560): __repr__", False, "__repr__", "printing"),
    ("train.py(3): helper", False, "helper", "helper()"),
])
def test_user_call_name(event: str, c_call: bool, func: str, expected: str) -> None:
    assert user_call_name(event, c_call, func) == expected


@pytest.mark.parametrize("name, inputs, expected", [
    ("aten::add", [dev(3), dev(3, dtype="torch.float64"), "1"], [("float64", "promotion", [3], "neuron:0")]),
    ("aten::mm", [dev(2, 3), dev(3, 4, dtype="torch.float64")], [("float64", "promotion", [2, 3], "neuron:0")]),
    # in place keeps the destination's dtype; float64 with float64 or on the host is no new arrival
    ("aten::add_", [dev(3, dtype="torch.float64"), dev(3), "1"], []),
    ("aten::add", [dev(3, dtype="torch.float64"), dev(3, dtype="torch.float64"), "1"], []),
    ("aten::add", [host(3), host(3, dtype="torch.float64"), "1"], []),
])
def test_promotion(name: str, inputs: list[object], expected: list[tuple[object, ...]]) -> None:
    assert classify(name, inputs, TM) == expected
