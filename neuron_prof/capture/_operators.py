"""The operator recorder: a recorded Python call for tensor operator statements (``a @ b``, ``x[i]``,
``float(t)``), so that exact call sites (`_sites`) cover them too.

torch.profiler's Python tracer records calls made by a ``CALL`` instruction (functions, methods, C functions),
each with the caller's current line. Operators are slots (``nb_add``, ``mp_subscript``, ``nb_float``): no call is
recorded and the statement's line is lost. While a session records with stacks, the operator methods that
``torch.Tensor`` implements in C get a Python forwarder, so Python itself calls one for each operator and the
tracer records it with the user's line. The forwarder is a frame of neuron_prof: it is never written into the
trace (`_sites` drops it), only the line it carries is used. Methods torch already implements in Python
(``__rsub__``, ``__repr__``, ``__len__``...) are recorded anyway and are left alone. torch.compile'd code runs
its graph, not these methods, and Dynamo traces operators itself.

What it costs decides what is on by default (issue 32, measured by ``python -m bench capture``): a forwarder
is one Python call per operator, which on microsecond ops (a real device's launches, CPU tiny ops) made a
profiled step 1.4-1.6x torch.profiler's. By default only the conversions (`CONVERSIONS`: ``float(t)``,
``bool(t)``/``if t``, ``int(t)``, ``t.__index__``) are forwarded: each reads the tensor's data on the host (a sync
point on a device), which costs far more than the call. Every other operator (`OPERATORS`, `PROPERTIES`) is
forwarded only with ``profile(operator_lines=True)`` (``run --operator-lines``); without it such a statement's
op has line 0 (unknown) in its exact stack.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

from neuron_prof.model.callsite import HIDDEN, file_kind
from neuron_prof.patches import Saved, patch, restore_patches

CONVERSIONS = ("__bool__", "__float__", "__int__", "__index__", "__complex__")
"""Forwarded in every session with stacks: each is a host read of the tensor's data (a sync point)."""
OPERATORS = (
    "__add__", "__radd__", "__iadd__", "__sub__", "__isub__", "__mul__", "__rmul__", "__imul__", "__truediv__",
    "__itruediv__", "__idiv__", "__ifloordiv__", "__matmul__", "__mod__", "__imod__", "__neg__", "__pos__",
    "__abs__", "__invert__", "__and__", "__rand__", "__iand__", "__or__", "__ror__", "__ior__", "__xor__",
    "__rxor__", "__ixor__", "__lshift__", "__ilshift__", "__rshift__", "__irshift__", "__eq__", "__ne__",
    "__lt__", "__le__", "__gt__", "__ge__", "__getitem__", "__setitem__",
)
"""Forwarded only with ``operator_lines=True``: a Python call per operator."""
PROPERTIES = ("T", "mT", "H", "mH")
"""Attributes that run an op (``x.T`` is aten::numpy_T); forwarded only with ``operator_lines=True``."""


def _property(orig: Any) -> property:
    get = orig.__get__

    def attribute(self: Any) -> Any:
        return get(self)

    return property(attribute, doc=getattr(orig, "__doc__", None))


def _forwarder(name: str, orig: Any) -> Any:
    def op(*args: Any, **kwargs: Any) -> Any:
        return orig(*args, **kwargs)

    op.__name__ = op.__qualname__ = name
    op.__code__ = op.__code__.replace(co_name=name)  # the profiler records the code's name
    op.__doc__ = getattr(orig, "__doc__", None)
    return op


def _at_user_line(show: Any) -> Any:
    """`warnings.showwarning` that shows a warning raised inside one of neuron-prof's forwarders (torch warns
    from C++ at the innermost Python frame) at the user's line that made the call, as it would be unprofiled."""

    def showwarning(message: Any, category: Any, filename: str, lineno: int, *args: Any, **kwargs: Any) -> Any:
        if file_kind(filename) == HIDDEN:
            # inside warnings.warn, under the forwarder: walk up to the user's frame
            f: types.FrameType | None = sys._getframe(1)
            while f is not None and (file_kind(f.f_code.co_filename) == HIDDEN
                                     or f.f_code.co_filename.endswith(("warnings.py", "<frozen warnings>"))):
                f = f.f_back
            if f is not None:
                filename, lineno = f.f_code.co_filename, f.f_lineno
        return show(message, category, filename, lineno, *args, **kwargs)

    return showwarning


class OperatorRecorder:
    """Installs the forwarders on torch.Tensor (`install`) and restores the originals (`remove`): the
    conversions always, every operator when `all_operators` (``profile(operator_lines=True)``)."""

    def __init__(self, all_operators: bool = False) -> None:
        self._saved: Saved = []
        self.all_operators = all_operators

    def install(self) -> None:
        import torch

        cls = torch.Tensor
        for name in CONVERSIONS + (OPERATORS if self.all_operators else ()):
            orig = getattr(cls, name, None)
            if orig is None or type(orig).__name__ not in ("method_descriptor", "wrapper_descriptor"):
                continue  # absent, or already Python (recorded by the tracer as it is)
            patch(cls, name, _forwarder(name, orig), self._saved)
        for name in PROPERTIES if self.all_operators else ():
            orig = cls.__dict__.get(name)
            if type(orig).__name__ != "getset_descriptor":
                continue
            patch(cls, name, _property(orig), self._saved)
        patch(warnings, "showwarning", _at_user_line(warnings.showwarning), self._saved)

    def remove(self) -> None:
        restore_patches(self._saved)
