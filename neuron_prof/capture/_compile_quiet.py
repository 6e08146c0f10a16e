"""Quiet compiles: torch.profiler's Python tracer is paused while torch.compile compiles.

With stacks on, torch.profiler records every Python call, and keeps ~1.5 KB per call once stopped. A
torch.compile of a two-layer MLP makes ~500,000 calls inside Dynamo, AOTAutograd and the backend per shape:
gigabytes for frames that are all hidden from the user's trace anyway (`model.callsite`). The compile's own
span comes from Dynamo's compilation metrics (`backends.probes.compile`), not from these calls, and the ops a
compile runs still land on the user's line that called the compiled code.

Dynamo runs each compile (a frame's tracing, and a backward compiled on first use) inside
``torch._dynamo.callback_handler.install_callbacks(...)``. While a session records with stacks, that method
returns a context whose `__enter__` pauses the tracer on the compiling thread and whose `__exit__` resumes
it. The pause and resume sit in calls at the same depth, so the tracer sees balanced calls: one hidden call
of `_pause` that spans the compile.

CPython has no call that returns a thread's C profile function (`sys.getprofile()` returns its object only),
so the thread state is read once per pause: the slot two pointers before the profile object is
``c_profilefunc`` (the field order ``c_profilefunc, c_tracefunc, c_profileobj, c_traceobj`` of CPython
3.10-3.13). Every read is checked against what `sys.getprofile()`/`sys.gettrace()` say; when anything does
not match, the compile is simply recorded in full. The tracer is only resumed if the same profiler cycle still
runs on that thread (`new_cycle()` is called before every profiler step and stop).
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Any

from neuron_prof.patches import Saved, patch, restore_patches

_SLOTS = 48
"""Pointers of the thread state scanned for the profile object (the field sits within the first ~20)."""

_generation = 0
_local = threading.local()


def new_cycle() -> None:
    """Say that torch.profiler may stop or restart its tracer now: a paused thread is not resumed after it."""
    global _generation
    _generation += 1


def _profile_function(obj: object) -> int | None:
    """The current thread's C profile function, if `obj` is the profile object and the fields read check out."""
    api = ctypes.pythonapi
    api.PyThreadState_Get.restype = ctypes.c_void_p
    tstate = api.PyThreadState_Get()
    if not tstate:
        return None
    slots = (ctypes.c_void_p * _SLOTS).from_address(tstate)
    trace = sys.gettrace()
    for i in range(2, _SLOTS - 1):
        if slots[i] != id(obj):
            continue
        func, trace_func, trace_obj = slots[i - 2], slots[i - 1], slots[i + 1]
        if not func:
            return None
        if trace is None and (trace_func or trace_obj):
            return None
        if trace is not None and trace_obj != id(trace):
            return None
        return int(func)
    return None


def _set_profile(func: int | None, obj: object | None) -> None:
    setter = ctypes.pythonapi.PyEval_SetProfile
    setter.argtypes = [ctypes.c_void_p, ctypes.py_object]
    setter.restype = None
    if func is None:
        setter(None, ctypes.py_object())  # NULL object: PyEval_SetProfile(NULL, NULL)
    else:
        setter(func, obj)


def _pause() -> None:
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    if depth:
        return  # a compile inside a compile: the outer one paused already
    _local.saved = None
    obj = sys.getprofile()
    if obj is None or type(obj).__name__ != "TraceContext":
        return  # no torch.profiler tracer on this thread (or someone else's profiler: leave it)
    func = _profile_function(obj)
    if func is None:
        return
    _local.saved = (func, obj, _generation)
    _set_profile(None, None)


def _resume() -> None:
    _local.depth = getattr(_local, "depth", 1) - 1
    if _local.depth:
        return
    saved, _local.saved = getattr(_local, "saved", None), None
    if saved is None:
        return
    func, obj, generation = saved
    if generation == _generation and sys.getprofile() is None:
        _set_profile(func, obj)


class _Quiet:
    """Dynamo's compile context, with the tracer paused inside it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __enter__(self) -> Any:
        value = self.inner.__enter__()
        _pause()
        return value

    def __exit__(self, *exc: Any) -> Any:
        _resume()
        return self.inner.__exit__(*exc)


class CompileQuiet:
    """Installs the pause on Dynamo's compile context for the length of a session.

    torch._dynamo is not imported for this (0.7 s): if the user's program has not imported it yet, the patch
    is put on when it is (a finder on `sys.meta_path` that patches right after the module runs).
    """

    def __init__(self) -> None:
        self._saved: Saved = []
        self._finder: _AfterImport | None = None

    def install(self) -> bool:
        """Patch Dynamo's callback handler now or when it is imported."""
        mod = sys.modules.get(_MODULE)
        if mod is not None:
            return self._patch(mod)
        self._finder = _AfterImport(self._patch)
        sys.meta_path.insert(0, self._finder)
        return True

    def _patch(self, mod: Any) -> bool:
        handler = getattr(mod, "callback_handler", None)
        orig = getattr(handler, "install_callbacks", None)
        if orig is None:
            return False

        def install_callbacks(*args: Any, **kwargs: Any) -> _Quiet:
            return _Quiet(orig(*args, **kwargs))

        patch(handler, "install_callbacks", install_callbacks, self._saved)
        return True

    def remove(self) -> None:
        if self._finder is not None:
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None
        restore_patches(self._saved)


_MODULE = "torch._dynamo.callback"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds `torch._dynamo.callback` the normal way and calls `then(module)` once it has run."""

    def __init__(self, then: Any) -> None:
        self.then = then

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader: Any = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        then, exec_module = self.then, loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                exec_module(module)
                then(module)

        spec.loader = _Loader()
        return spec
