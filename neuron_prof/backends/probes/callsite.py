"""Call sites and module paths: the user's frame (not torch's) from stacks Kineto records.

Kineto's ``Call stack`` argument is innermost-first, ``;``-separated, e.g.::

    <built-in function linear>;torch/nn/modules/linear.py(130): forward;...;nn.Module: Linear_0;
    torch/nn/modules/container.py(248): forward;...;nn.Module: Sequential_0;train.py(4): step;train.py(7): <module>;

The line numbers Kineto's Python tracer records are the *function's first line*, not the current line:
that is the signal the profiler gives, so call sites reconstructed from it name the function's ``def``.
Probes that run at call time (collectives, sync) use `frame_call_site` and get the exact line.
"""

from __future__ import annotations

import os
import re
import sys
from functools import lru_cache

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
MODULE_PREFIX = "nn.Module: "

# Frames from these packages are never "the user's": the profiler, torch and its backends.
_LIB_PARTS = ("torch/", "torch_neuronx/", "neuron_prof/", "torchvision/", "torchaudio/", "functorch/",
              "importlib/", "contextlib.py", "threading.py", "runpy.py", "<frozen ", "<string>", "<built-in")
_LIB_ROOTS: tuple[str, ...] = ()


def _lib_roots() -> tuple[str, ...]:
    global _LIB_ROOTS
    if not _LIB_ROOTS:
        roots = [os.path.dirname(os.__file__)]  # the standard library
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        roots.append(here)  # neuron_prof itself
        for name in ("torch", "torch_neuronx"):
            mod = sys.modules.get(name)
            f = getattr(mod, "__file__", None)
            if f:
                roots.append(os.path.dirname(os.path.abspath(f)))
        _LIB_ROOTS = tuple(roots)
    return _LIB_ROOTS


@lru_cache(maxsize=4096)
def is_library_file(path: str) -> bool:
    """True for torch / torch_neuronx / neuron_prof / stdlib files (absolute or Kineto-shortened)."""
    p = path.replace("\\", "/")
    if p.startswith(("<", "nn.Module")):
        return True
    if "neuron_prof/demo/" in p:  # the demo is a user program that ships inside neuron_prof
        return False
    if "/site-packages/" in p or "/dist-packages/" in p:  # installed libraries (click, transformers...)
        return True
    if os.path.isabs(p):
        return any(p.startswith(r) for r in _lib_roots())
    return p.startswith(_LIB_PARTS) or "/torch/" in p or "/neuron_prof/" in p


@lru_cache(maxsize=16384)
def parse_call_stack(stack: str) -> tuple[str, str]:
    """(call_site "file.py:LINE" of the innermost user frame, module path "Outer_0/Inner_0") from a Call stack."""
    site = ""
    modules: list[str] = []
    for part in stack.split(";"):
        if not part:
            continue
        if part.startswith(MODULE_PREFIX):
            modules.append(part[len(MODULE_PREFIX):])
            continue
        if site:
            continue
        m = _FRAME.match(part)
        if m and not is_library_file(m.group("file")):
            site = f"{m.group('file')}:{m.group('line')}"
    return site, "/".join(reversed(modules))


def frame_site(name: str) -> str:
    """"file.py:LINE" from a python_function span name "file.py(LINE): func" ("" for library frames)."""
    m = _FRAME.match(name)
    if not m or is_library_file(m.group("file")):
        return ""
    return f"{m.group('file')}:{m.group('line')}"


def frame_call_site(skip: int = 1) -> str:
    """The innermost user frame of the *current* Python stack as "file.py:LINE" (exact line)."""
    try:
        f = sys._getframe(skip)
    except ValueError:  # called from a shallow stack (a thread's entry point)
        return ""
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_library_code(fn):
            return f"{_short(fn)}:{f.f_lineno}"
        f = f.f_back  # type: ignore[assignment]
    return ""


@lru_cache(maxsize=4096)
def _is_library_code(filename: str) -> bool:
    """is_library_file for a code object's filename (cached: called once per frame on hot paths)."""
    return is_library_file(os.path.abspath(filename) if not filename.startswith("<") else filename)


@lru_cache(maxsize=4096)
def _short(filename: str) -> str:
    return short_path(filename)


def short_path(path: str) -> str:
    """Path relative to the current directory when under it (as Kineto shortens), else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
