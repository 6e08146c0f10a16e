"""Where an event came from in the user's code: the one set of rules every probe and analysis uses.

Frames are written as Kineto writes them, ``path(LINE): function``, innermost first, ``;``-separated, with
``nn.Module: Name_0`` entries where a module was called. Files are of three kinds:

* **hidden**: neuron_prof itself (but not its demo, a user program that ships inside it), the emulated
  device, torch_neuronx, and torch.compile's compiler (Dynamo, AOTAutograd, Inductor, FX: a compile runs
  millions of Python calls, summarised by the compile track). Never written into a trace, never a call
  site; library code they call is hidden with them.
* **library**: torch and other installed packages, the standard library, builtins. Shown in stacks,
  never a call site.
* **user**: everything else. The call site of an event is the innermost user frame.

Lines: traces captured by neuron-prof carry the line being executed in every frame (metadata
``stack_lines == "exact"``, see `neuron_prof.capture`); torch.profiler's own ``with_stack`` stacks give each
frame's *first* line, which is never reported as a call site: the function is named instead, with the reason.
Line 0 in an exact stack means the line is not known (an operator statement with no recorded call).
"""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig
from dataclasses import dataclass, field
from functools import lru_cache
from types import TracebackType

MODULE_PREFIX = "nn.Module: "
STACK_LINES = "stack_lines"
"""Metadata key: "exact" when the trace's ``Call stack`` lines are the lines being executed."""
USER_FILES = "user_files"
"""Metadata key: the display paths of the user's files seen during a capture (classification made there)."""
EXACT = "exact"

HIDDEN, LIBRARY, USER = "hidden", "library", "user"
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")

_HIDDEN_PARTS = ("neuron_prof", "torch_neuronx")
_COMPILER = tuple(f"torch/{d}/" for d in ("_dynamo", "_inductor", "_functorch", "fx", "_subclasses", "_prims",
                                          "_prims_common", "_refs", "_decomp", "_higher_order_ops", "_export",
                                          "export", "_logging", "utils/_sympy")) + ("torch/_guards.py",)
_LIB_PREFIXES = ("torch/", "torchvision/", "torchaudio/", "functorch/", "triton/", "importlib/", "<built-in",
                 "<frozen ", "<string>", "<lambda>")
_USER_PSEUDO = ("<stdin>", "<ipython-input", "<input>")
_LIB_PATH = re.compile(r"/(site|dist)-packages/|/lib/python\d+(\.\d+)?/")
"""Installed packages and the standard library, wherever the trace was recorded."""


# ---- file kinds ---------------------------------------------------------------------------------------
def _roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(library roots, hidden roots) as absolute directories with a trailing separator."""
    lib = {os.path.dirname(os.__file__), sysconfig.get_paths().get("scripts", "")}
    for getter in (site.getsitepackages, lambda: [site.getusersitepackages()]):
        try:
            lib.update(getter())
        except Exception:  # noqa: BLE001  (virtualenvs without these functions)
            pass
    lib.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    hidden = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # the neuron_prof package
    nx = sys.modules.get("torch_neuronx")
    if getattr(nx, "__file__", None):
        hidden.add(os.path.dirname(os.path.abspath(nx.__file__)))  # type: ignore[union-attr,arg-type]
    norm = lambda ps: tuple(sorted({os.path.join(os.path.abspath(p), "") for p in ps if p}, key=len, reverse=True))  # noqa: E731
    return norm(lib), norm(hidden)


_LIB_ROOTS, _HIDDEN_ROOTS = _roots()
_DEMO = os.path.join(_HIDDEN_ROOTS[0], "demo", "") if _HIDDEN_ROOTS else ""


@lru_cache(maxsize=8192)
def file_kind(path: str) -> str:
    """"hidden", "library" or "user" for a file path as Python (absolute or relative) or Kineto writes it."""
    p = path.replace("\\", "/")
    if not p:
        return LIBRARY
    if p.startswith("<"):
        return USER if p.startswith(_USER_PSEUDO) else LIBRARY
    if p.startswith(MODULE_PREFIX):
        return LIBRARY
    parts = p.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in _HIDDEN_PARTS:
            return USER if part == "neuron_prof" and parts[i + 1] == "demo" else HIDDEN
    if os.path.basename(p) == "neuron-prof":
        return HIDDEN  # the console script
    if any(c in p if os.path.isabs(p) else p.startswith(c) for c in _COMPILER):
        return HIDDEN
    if os.path.isabs(path):
        a = os.path.abspath(path)
        if _DEMO and a.startswith(_DEMO):
            return USER
        if any(a.startswith(r) for r in _HIDDEN_ROOTS):
            return HIDDEN
        if any(a.startswith(r) for r in _LIB_ROOTS) or _LIB_PATH.search(p):
            return LIBRARY  # this machine's libraries, or another machine's (a trace recorded elsewhere)
        return USER
    if p.startswith(_LIB_PREFIXES) or "/site-packages/" in p or "/dist-packages/" in p:
        return LIBRARY
    # Kineto shortens library paths relative to their root ("threading.py", "torch/nn/..."): a relative
    # path that names a file under a library root is that file (a user script would shadow it anyway)
    return LIBRARY if any(os.path.exists(os.path.join(r, path)) for r in _LIB_ROOTS) else USER


_PREFIXES: list[str] = []


def _prefixes() -> list[str]:
    """torch.profiler's own path prefixes (torch/profiler/python_tracer.py `_prefix_regex`, computed once per
    process as torch does), so that frames we read ourselves look like the frames its tracer wrote."""
    if not _PREFIXES:
        raw = list(sys.path)
        for getter in (site.getsitepackages, lambda: [site.getuserbase(), site.getusersitepackages()]):
            try:
                raw += getter()
            except Exception:  # noqa: BLE001  (virtualenvs without these functions)
                pass
        _PREFIXES[:] = [p + os.sep for p in sorted({os.path.abspath(p) for p in raw if isinstance(p, str)},
                                                   reverse=True)]
    return _PREFIXES


@lru_cache(maxsize=8192)
def display_path(path: str) -> str:
    """A file as torch.profiler writes it: relative to the first matching sys.path/site-packages entry
    ("torch/nn/modules/linear.py", "train.py"), else as given."""
    if not os.path.isabs(path):
        return path
    for p in _prefixes():
        if path.startswith(p):
            return path[len(p):]
    return path


# ---- stacks ---------------------------------------------------------------------------------------------
def parse_frame(frame: str) -> tuple[str, int, str] | None:
    """(path, line, function) of one ``path(LINE): function`` frame; None for other entries."""
    m = _FRAME.match(frame)
    return (m.group("file"), int(m.group("line")), m.group("func")) if m else None


def format_frame(path: str, line: int, func: str) -> str:
    return f"{path}({line}): {func}"


@dataclass(frozen=True)
class Site:
    """Where in the user's code an event was caused."""

    call_site: str = ""
    """"path/file.py:LINE" of the innermost user frame; "" when no exact line is known (see `reason`)."""
    stack: tuple[str, ...] = ()
    """The user's frames, outermost first, as "path:LINE function" (line 0: not known)."""
    module: str = ""
    """nn.Module path ("TinyGPT_0/Block_1/Linear_0") when the event ran inside modules."""
    reason: str = ""
    """Why `call_site` is empty (no stack recorded, only function entry lines, an operator statement...)."""
    function: str = field(default="", compare=False)
    """"path function" of the innermost user frame when its line is not known."""
    backward: str = ""
    """The autograd node ("LinalgQrBackward0") when the event ran in the backward pass: the site is then the
    forward op's that created the node (its line is the one the user can change), "" in the forward."""
    forward_op: str = ""
    """The forward op that created `backward`'s node ("aten::linalg_qr"); "" when it is not in the trace."""
    forward_site: str = ""
    """In a ``backward()`` the user wrote (a custom ``torch.autograd.Function``), whose own line is
    `call_site`: the line of its forward (the ``.apply()`` call); "" otherwise."""

    def evidence(self) -> dict[str, object]:
        """The JSON evidence every finding carries about where it happened."""
        out: dict[str, object] = {}
        if self.stack:
            out["stack"] = list(self.stack)
        if not self.call_site:
            out["site_unknown"] = self.reason or "no call stack was recorded"
            if self.function:
                out["function"] = self.function
        if self.backward:
            out["in_backward"] = self.backward
            if self.forward_op:
                out["forward_op"] = self.forward_op
            if self.forward_site:
                out["forward_site"] = self.forward_site
            else:
                out["forward_unknown"] = "the forward op that made this autograd node is not in the trace"
        return out

    def label(self) -> str:
        """The call site as views show it: "train.py:28", "train.py:28 (backward)"; "" when not known."""
        return f"{self.call_site} (backward)" if self.call_site and self.backward else self.call_site


NO_STACK = Site(reason="no call stack was recorded for it (profile with with_stack=True)")
NO_USER_FRAME = Site(reason="no line of your code was on the stack when it ran (a library's own thread or "
                            "callback: DDP's gradient hooks, autograd's engine, a collective's worker)")
"""The site of an event in a trace whose stacks were recorded (`stack_is_exact`) but that has none: saying
"profile with with_stack=True" would be wrong there (`neuron-prof run` records stacks)."""


@lru_cache(maxsize=65536)
def site_from_stack(stack: str, exact: bool, user_files: frozenset[str] | None = None) -> Site:
    """The Site of a ``Call stack`` string (innermost first).

    Args:
        stack: Kineto's ``Call stack`` argument.
        exact: the lines are the lines being executed (neuron-prof captures); else function entry lines.
        user_files: the capture's own classification of the files; None classifies by path.
    """
    frames: list[tuple[str, int, str]] = []
    modules: list[str] = []
    for part in stack.split(";"):
        if not part:
            continue
        if part.startswith(MODULE_PREFIX):
            modules.append(part[len(MODULE_PREFIX):])
            continue
        f = parse_frame(part)
        if f is None:
            continue
        user = f[0] in user_files if user_files is not None else file_kind(f[0]) == USER
        if user:
            frames.append(f)
    module = "/".join(reversed(modules))
    if not frames:
        return Site(module=module, reason="no frame of the user's code on the stack (library or runtime work)")
    user_stack = tuple(f"{p}:{ln if exact else 0} {fn}" for p, ln, fn in reversed(frames))
    path, line, func = frames[0]
    if exact and line > 0:
        return Site(call_site=f"{path}:{line}", stack=user_stack, module=module)
    reason = ("the statement has no recorded call (an operator such as + or [] with the operator recorder off)"
              if exact else "the trace records only function entry lines (torch.profiler with_stack)")
    return Site(stack=user_stack, module=module, reason=reason, function=f"{path} {func}")


def live_site(skip: int = 1) -> Site:
    """The Site of the Python code running now, looking from `skip` frames up (1: live_site's caller);
    for probes that run inside the user's call. Exact lines."""
    try:
        f = sys._getframe(skip)
    except ValueError:  # a thread's entry point: no caller
        return Site(reason="called from no Python frame")
    frames: list[str] = []
    while f is not None:
        fn = f.f_code.co_filename
        if file_kind(fn) == USER:
            frames.append(f"{display_path(fn)}:{f.f_lineno} {f.f_code.co_name}")
        f = f.f_back  # type: ignore[assignment]
    if not frames:
        return Site(reason="no frame of the user's code on the stack")
    return Site(call_site=frames[0].split(" ", 1)[0], stack=tuple(reversed(frames)))


def traceback_site(tb: TracebackType | None) -> Site:
    """The Site of an exception from its traceback: where the user's code raised it, or called the library
    call that raised it (its innermost user frame). Exact lines."""
    frames: list[str] = []
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if file_kind(fn) == USER:
            frames.append(f"{display_path(fn)}:{tb.tb_lineno} {tb.tb_frame.f_code.co_name}")
        tb = tb.tb_next
    if not frames:
        return Site(reason="no frame of the user's code in the traceback")
    return Site(call_site=frames[-1].split(" ", 1)[0], stack=tuple(frames))


def user_files_of(metadata: dict[str, object]) -> frozenset[str] | None:
    """The capture's set of user files from trace metadata (None for traces neuron-prof did not capture)."""
    uf = metadata.get(USER_FILES)
    return frozenset(str(x) for x in uf) if isinstance(uf, (list, tuple)) else None


def stack_is_exact(metadata: dict[str, object]) -> bool:
    return metadata.get(STACK_LINES) == EXACT
