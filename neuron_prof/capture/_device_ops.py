"""What ops did with device data, read from the inputs torch.profiler records (``record_shapes``).

Each recorded op keeps its inputs' device, dtype and sizes (``_TensorMetadata``) in the profiler's event tree.
That is the aten layer, under every Python method and tensor subclass, so these forms cannot slip past it:

* **host reads of device data** (sync points): ``_local_scalar_dense`` / ``is_nonzero`` / ``equal`` on a
  device tensor (``.item()``, ``float()``, ``int()``, ``bool()``, ``if t:``), copies from a device tensor into a
  host one (``.cpu()``, ``.to("cpu")``, ``.tolist()``, ``.numpy()``, printing), and ops whose output size
  depends on the data (``nonzero``, ``masked_select``, ``unique``...: the host must learn the size);
* **float64 / int64 reaching a device**: a copy into a device tensor of that dtype from the host or from
  another dtype (``.to(dev)``, ``.double()``), an initialising op writing one (factories: ``zeros``,
  ``randn``, ``full``... with ``dtype=`` and ``device=``, or a float64 default dtype), a conversion of a device
  tensor asking for that dtype, an out-of-place op promoting float32 with float64 to a new float64 tensor.

One `DeviceOp` per call the user's code made (``print(t)`` copies several times; it is one sync point).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_SCALAR_READS = frozenset({"_local_scalar_dense", "is_nonzero", "equal"})
_DATA_DEPENDENT = frozenset({"nonzero", "masked_select", "_unique2", "_unique", "unique_dim", "unique_consecutive",
                             "unique_dim_consecutive", "argwhere", "bincount", "repeat_interleave"})
_COPIES = {"copy_": (1, 0), "_copy_from": (0, 1), "_copy_from_and_resize": (0, 1)}
"""op -> (index of the source input, index of the destination input)."""
_WRITERS = frozenset({"zero_", "fill_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_",
                      "geometric_", "log_normal_", "cauchy_", "lift_fresh", "arange", "linspace", "logspace",
                      "eye", "randperm"})
_CONVERSIONS = frozenset({"to", "_to_copy"})
_PROMOTING = frozenset({"add", "sub", "rsub", "mul", "div", "true_divide", "pow", "maximum", "minimum", "atan2",
                        "hypot", "fmod", "remainder", "where", "lerp", "addcmul", "addcdiv", "mm", "bmm", "matmul",
                        "addmm", "baddbmm", "mv", "dot", "cat", "stack", "linear"})
"""Out-of-place ops whose result takes the widest dtype of their operands (in-place ops keep theirs)."""
_NARROWER = frozenset({"torch.float32", "torch.float16", "torch.bfloat16"})
_DTYPE_ARG = {"7": "float64", "4": "int64"}
"""ScalarType numbers as the profiler records dtype arguments (c10::ScalarType::Double = 7, Long = 4)."""
_DTYPES = {"torch.float64": "float64", "torch.int64": "int64"}
WATCH = frozenset(f"aten::{n}" for n in (*_SCALAR_READS, *_DATA_DEPENDENT, *_COPIES, *_WRITERS, *_CONVERSIONS,
                                         *_PROMOTING))

SYNC, FLOAT64, INT64 = "sync", "float64", "int64"
USED_BEFORE, FIRST_USE = "float64_used_before", "float64_first_use"
"""A float64 device tensor's first use in the cycle (`float64_inputs`): one that reached the device before the
profile (USED_BEFORE), or where one that reached it inside is first used (FIRST_USE)."""


@dataclass
class DeviceOp:
    """One call of the user's code that read device data on the host or put float64/int64 on a device."""

    kind: str
    """"sync", "float64" or "int64"."""
    what: str
    """What it was: "item" (a scalar read), "copy to host", "data-dependent shape", "to device", "cast",
    "created on device"."""
    op: str
    """The aten op that did it."""
    start_ns: int
    end_ns: int
    stack: str
    """The exact ``Call stack`` of the op the user's code called (see `_sites`)."""
    shape: list[int]
    device: str
    call: str = ""
    """The user's call as written ("float()", ".item()", "print()", "@"): what the statement did."""
    tensor: int = 0
    """float64 arrivals and uses: the tensor's identity (its TensorImpl address while it lives), 0 if unknown."""


_DUNDER = {"__float__": "float()", "__int__": "int()", "__bool__": "bool() or if", "__index__": "use as an index",
           "__complex__": "complex()", "__repr__": "printing", "__str__": "printing", "__format__": "formatting",
           "__getitem__": "indexing", "__setitem__": "indexed assignment", "__len__": "len()", "__iter__": "iteration",
           "__contains__": "in", "__array__": "numpy conversion", "__matmul__": "@", "__eq__": "==", "__ne__": "!=",
           "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}


def user_call_name(event_name: str, c_call: bool, func: str = "") -> str:
    """How the user wrote a recorded call: "<built-in method item of Tensor ...>" -> ".item()",
    "<built-in function print>" -> "print()", a Python function `__float__` -> "float()"."""
    if c_call:
        if event_name.startswith("<built-in method "):
            return "." + event_name[17:].split(" ", 1)[0] + "()"
        if event_name.startswith("<built-in function "):
            return event_name[19:].rstrip(">") + "()"
        return event_name
    return _DUNDER.get(func, f"{func}()" if func else event_name)


def _device(t: Any) -> str:
    d = str(t.device)
    return "" if d == "cpu" or d.startswith("cpu:") else d


def classify(name: str, inputs: list[Any], tensor_type: type[Any]) -> list[tuple[str, str, list[int], str]]:
    """(kind, what, shape, device) of what op `name` did with device data, from its recorded inputs."""
    base = name[6:] if name.startswith("aten::") else name
    tensors = [(i, x) for i, x in enumerate(inputs) if type(x) is tensor_type]
    out: list[tuple[str, str, list[int], str]] = []
    if base in _SCALAR_READS or base in _DATA_DEPENDENT:
        dev = next(((x, d) for _, x in tensors if (d := _device(x))), None)
        if dev is not None:
            what = "item" if base in _SCALAR_READS else "data-dependent shape"
            out.append((SYNC, what, list(dev[0].sizes), dev[1]))
        return out
    if base in _COPIES:
        si, di = _COPIES[base]
        src = inputs[si] if si < len(inputs) and type(inputs[si]) is tensor_type else None
        dst = inputs[di] if di < len(inputs) and type(inputs[di]) is tensor_type else None
        if src is None or dst is None:
            return out
        sdev, ddev = _device(src), _device(dst)
        if sdev and not ddev:
            out.append((SYNC, "copy to host", list(src.sizes), sdev))
        dt = _DTYPES.get(str(dst.dtype))
        if ddev and dt and (not sdev or str(src.dtype) != str(dst.dtype)):
            out.append((dt, "to device" if not sdev else "cast", list(dst.sizes), ddev))
        return out
    if base in _WRITERS:
        if tensors:
            x = tensors[0][1]
            d, dt = _device(x), _DTYPES.get(str(x.dtype))
            if d and dt:
                out.append((dt, "created on device", list(x.sizes), d))
        return out
    if base in _PROMOTING:  # float32 (or lower) meeting float64 on the device: a new float64 tensor there
        f64 = [x for _, x in tensors if str(x.dtype) == "torch.float64" and _device(x)]
        if f64 and any(str(x.dtype) in _NARROWER and _device(x) for _, x in tensors):
            out.append((FLOAT64, "promotion", max((list(x.sizes) for _, x in tensors), key=len), _device(f64[0])))
        return out
    if base in _CONVERSIONS and tensors:
        x = tensors[0][1]
        d = _device(x)
        want = next((_DTYPE_ARG[str(a)] for a in inputs[1:] if type(a) is not tensor_type and str(a) in _DTYPE_ARG),
                    None)
        if d and want and _DTYPES.get(str(x.dtype)) != want:
            out.append((want, "cast", list(x.sizes), d))
    return out


def float64_inputs(inputs: list[Any], tensor_type: type[Any]) -> list[tuple[int, list[int], str]]:
    """(identity, shape, device) of the float64 device tensors among an op's recorded inputs."""
    return [(int(x.impl_ptr), list(x.sizes), d) for x in inputs
            if type(x) is tensor_type and str(x.dtype) == "torch.float64" and (d := _device(x))]
