"""Exact call stacks for a profiler cycle, from torch.profiler's own Python tracer.

torch.profiler's JSON gives every Python frame its *first* line. Its in-memory event tree also keeps, for
each recorded Python call (a function, a module, a C function such as ``torch.sort``), the **caller's
current line** (``extra_fields.caller``): the statement that made the call. Walking the tree once per
cycle gives every top-level op the stack of lines being executed, innermost first:

    <built-in method sort ...> called from train.py line 13  ->  "train.py(13): <module>"

The stack is written into the op's ``Call stack`` argument (Kineto's format, so every viewer shows it), and
the trace is marked ``stack_lines = "exact"``. An operator statement (``a @ b``) makes no call the tracer
records; its innermost frame gets line 0 (unknown) unless a recorded call happened inside the op (the
operator recorder, `_operators`, makes sure one does).

A Python call the user's code made keeps that line as its span's ``call_site`` (what the host did in a
device-idle gap). Python frames of neuron_prof, the emulated device and torch_neuronx, and library frames
they call, are dropped from the trace (`StackRewriter`); Kineto writes no per-event ``Call stack`` (capture
asks for none: it was most of the JSON's bytes). The same walk reads each watched op's recorded inputs for
`_device_ops` (sync points, float64 arrivals). Cost: one visit per event, ~2-4 µs each, at the end of each
cycle, outside the user's steps.
"""

from __future__ import annotations

import bisect
import os
import re
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from neuron_prof.capture._device_ops import (
    FIRST_USE,
    FLOAT64,
    USED_BEFORE,
    WATCH,
    DeviceOp,
    classify,
    float64_inputs,
    user_call_name,
)
from neuron_prof.model.callsite import HIDDEN, MODULE_PREFIX, USER, display_path, file_kind, format_frame

CALL_STACK = "Call stack"
CALL_SITE = "call_site"  # model.Arg.CALL_SITE: the line of the user's code that made a Python call
_PY_CAT = "python_function"
_Node = tuple  # (text, visible, parent node | None)
_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')


@dataclass
class CycleSites:
    """What one cycle's walk found, keyed by (start ns, name) as the Kineto JSON has them (the tree's thread
    ids are RecordFunction's small counters, not the JSON's OS thread ids)."""

    op_stacks: dict[tuple[int, str], str] = field(default_factory=dict)
    """Top-level ops (not nested in another op) -> exact ``Call stack`` (innermost first, visible frames)."""
    visible_py: dict[tuple[int, str], str] = field(default_factory=dict)
    """Python events to keep (not of hidden frames: neuron_prof, the emulator, torch_neuronx, the compiler and
    what they call) -> "file.py:LINE" of the user's call that made it, or "" (a library's own call). Kept
    rather than the hidden ones: those can be millions (a torch.compile compile)."""
    user_files: set[str] = field(default_factory=set)
    """Display paths of the user's files seen on the stacks."""
    unreadable: int = 0
    """Events whose strings Kineto could not give back (skipped)."""
    device_ops: dict[tuple[str, int], DeviceOp] = field(default_factory=dict)
    """Host reads of device data and float64/int64 reaching a device, one per (kind, call of the user's code)."""
    cpu_ns: int = 0
    """CPU time of the walk (its thread's)."""
    nodes: int = 0
    """Events of the tree visited."""
    _f64: dict[int, int] = field(default_factory=dict)
    """float64 device tensor -> the call that made it on the device, or -1 once its first use is recorded."""

    def add_device_op(self, kind: str, what: str, op: str, ev: Any, stack: str, shape: list[int], device: str,
                      call: int, call_name: str) -> None:
        got = self.device_ops.get((kind, call))
        if got is None:
            self.device_ops[(kind, call)] = DeviceOp(kind, what, op, ev.start_time_ns, ev.end_time_ns, stack,
                                                     shape, device, call_name)
        else:  # the same call of the user's code did it again (print copies several tensors)
            got.end_ns = max(got.end_ns, ev.end_time_ns)

    def f64_seen(self, inputs: list[Any], tensor_type: type, arrived: bool, name: str, ev: Any, stack: str,
                 call: int, call_name: str) -> None:
        """Float64 device tensors an op touched: one that arrives here (`arrived`) is remembered with its call;
        one first seen in another call is used there, once per tensor: FIRST_USE, or USED_BEFORE when it did
        not arrive in this cycle."""
        for tid, shape, dev in float64_inputs(inputs, tensor_type):
            state = self._f64.get(tid)
            if state is None and arrived:
                self._f64[tid] = call
                got = self.device_ops.get((FLOAT64, call))
                if got is not None and not got.tensor:
                    got.tensor = tid
            elif state is not None and (state == -1 or state == call):
                continue  # already used once, or still inside the call that made it
            else:
                self._f64[tid] = -1
                kind = USED_BEFORE if state is None else FIRST_USE
                if (kind, call) not in self.device_ops:
                    self.device_ops[(kind, call)] = DeviceOp(kind, "used on the device", name, ev.start_time_ns,
                                                             ev.end_time_ns, stack, shape, dev, call_name, tid)


class _Ctx:
    """The walk's state below an event: the frames above it and the frame now executing."""

    __slots__ = ("chain", "hidden", "last", "open", "in_op", "call", "stack", "call_name")

    def __init__(self, chain: _Node | None, hidden: bool, last: Any, open_: Any, in_op: bool, call: int = -1,
                 stack: str = "", call_name: str = "") -> None:
        self.chain = chain
        """Frames with known lines (innermost first through parent links)."""
        self.hidden = hidden
        """The executing frame is hidden or runs under a hidden frame."""
        self.last = last
        """(file, func, line) of the frame pushed last when it is still the executing frame (else None)."""
        self.open = open_
        """(display path, func, is the user's) of the executing frame entered by a Python call: its line is not
        known yet (an op made directly in it is an operator statement)."""
        self.in_op = in_op
        """Directly inside an op span (nested ops inherit the outer op's stack)."""
        self.call = call
        """Start ns of the innermost call the user's code made (what one user statement did), -1 if none."""
        self.stack = stack
        """The rendered stack of the op we are inside (when `in_op`)."""
        self.call_name = call_name
        """How the user wrote that call (`_device_ops.user_call_name`)."""


def _py_event(ev: Any, ef: Any, c_call: bool, ctx: _Ctx, out: CycleSites) -> _Ctx:
    """The state below a recorded Python call (a function, a module or a C function)."""
    c = ef.caller
    cfile, cline, cfunc = c.file_name, c.line_number, _name(c)
    ckind = file_kind(cfile)
    if ckind == USER and not _exists(cfile):
        # the tracer keeps views of code objects' names: one freed since reads back as other bytes
        raise _Unreadable(cfile)
    if ckind == USER:
        out.user_files.add(display_path(cfile))
    chain = ctx.chain
    key = (cfile, cfunc, cline)
    if ctx.last != key:  # a new line of the executing frame (not the same frame seen again through a C call)
        # a frame "at" its own def line runs no statement of its own (torch.compile's bytecode runs under it):
        # kept out of the stack, the line is its caller's (the call of the compiled model)
        seen = not ctx.hidden and ckind != HIDDEN and not (ckind == USER and own_header(cfile, cline, cfunc))
        chain = (format_frame(display_path(cfile), cline, cfunc), seen, chain)
    # a new call of the user's code, unless it is the same statement seen again through a C call or an op
    new_call = ckind == USER and (ctx.last != key or ctx.call < 0)
    call = ev.start_time_ns if new_call else ctx.call
    call_name = user_call_name(ev.name, c_call, "" if c_call else _name(ef.callsite)) if new_call \
        else ctx.call_name
    if c_call:
        child = _Ctx(chain, ctx.hidden, key, None, False, call, "", call_name)
        hidden = ctx.hidden
    else:
        name = ev.name
        if name.startswith(MODULE_PREFIX):  # its own frames (torch/nn) come as calls of their own
            hidden = ctx.hidden
            chain = (name, not hidden, chain)
            child = _Ctx(chain, hidden, None, None, False, call, "", call_name)
        else:
            callee = ef.callsite
            kind = file_kind(callee.file_name)
            if kind == USER and not _exists(callee.file_name):
                raise _Unreadable(callee.file_name)
            hidden = kind == HIDDEN or (kind != USER and ctx.hidden)
            open_ = (display_path(callee.file_name), _name(callee), kind == USER) if not hidden else None
            child = _Ctx(chain, hidden, None, open_, False, call, "", call_name)
    if not hidden:
        out.visible_py[(ev.start_time_ns, ev.name)] = f"{display_path(cfile)}:{cline}" if ckind == USER else ""
    return child


def _name(frame: Any) -> str:
    """A recorded frame's function name, "?" when it no longer reads (the tracer keeps a view of the code
    object's name, and a function freed before the profile is read, e.g. a script's after runpy returns,
    leaves other bytes there). Its file is checked apart (`_exists`) and its line is a number: both stay."""
    try:
        return str(frame.function_name)
    except UnicodeDecodeError:
        return "?"


class _Unreadable(ValueError):
    """A name the profiler gave back is not one (its code object was freed): skip what it says."""


@lru_cache(maxsize=4096)
def own_header(path: str, line: int, func: str) -> bool:
    """Whether `line` of `path` is the header of function `func` itself (its ``def`` line, or a decorator line
    above it) with no statement after the colon: a line where no code of `func` runs."""
    import linecache

    f = _abs(path)
    for k in range(line, line + 20):  # decorators stand above the def line
        code = linecache.getline(f, k).split("#", 1)[0].strip()
        if code.startswith("@"):
            continue
        m = _DEF.match(code)
        return m is not None and m.group(1) == func and not (m.group(2) or "").strip()
    return False


_DEF = re.compile(r"^(?:async\s+)?def\s+(\w+)\s*\(.*?(?:\)\s*(?:->.*?)?:(.*))?$")


def _abs(path: str) -> str:
    """A user's file as torch names it (absolute, or relative to a sys.path entry), found on this machine."""
    if os.path.isabs(path):
        return path
    roots = [*sys.path, os.getcwd()]
    return next((q for r in roots if os.path.exists(q := os.path.join(r or os.getcwd(), path))), path)


@lru_cache(maxsize=4096)
def _exists(path: str) -> bool:
    """Whether a user's file name names a file (as given, or relative to sys.path as torch shortens it)."""
    if path.startswith("<"):
        return True
    if os.path.isabs(path):
        return os.path.exists(path)
    return any(os.path.exists(os.path.join(p or os.getcwd(), path)) for p in [*sys.path, os.getcwd()])


def walk(prof: Any) -> CycleSites:
    """Walk the cycle's event tree once (`prof` is a torch.profiler.profile that just finished a cycle)."""
    import torch._C._profiler as P

    t0 = time.thread_time_ns()
    py_call, py_ccall, torch_op = P._ExtraFields_PyCall, P._ExtraFields_PyCCall, P._ExtraFields_TorchOp
    tensor_meta = P._TensorMetadata
    user_scope = P.RecordScope.USER_SCOPE
    out = CycleSites()
    rendered: dict[int, str] = {}
    keep_alive: list[_Node] = []  # rendered[] is keyed by id(): keep the nodes alive for the whole walk
    roots = prof.profiler.kineto_results.experimental_event_tree()
    todo: list[tuple[Any, _Ctx]] = [(r, _Ctx(None, False, None, None, False)) for r in reversed(roots)]

    def render(node: _Node | None) -> str:
        if node is None:
            return ""
        got = rendered.get(id(node))
        if got is None:
            parts = []
            n: _Node | None = node
            while n is not None:
                if n[1]:
                    parts.append(n[0])
                n = n[2]
            got = ";".join(parts)
            rendered[id(node)] = got
            keep_alive.append(node)
        return got

    n = 0
    adopted = _Adopted()
    while todo:
        ev, ctx = todo.pop()
        ef = ev.extra_fields
        t = type(ef)
        try:
            if t is py_call or t is py_ccall:
                child = _py_event(ev, ef, t is py_ccall, ctx, out)
            elif t is torch_op:
                name = ev.name
                stack, call, call_name = ctx.stack, ctx.call, ctx.call_name
                if not ctx.in_op:
                    chain = ctx.chain
                    if ctx.open is not None:
                        chain = (format_frame(ctx.open[0], 0, ctx.open[1]), True, chain)
                        if ctx.open[2]:  # an operator statement of the user's code: the op is the call
                            call, call_name = ev.start_time_ns, name
                    stack = render(chain)
                    out.op_stacks[(ev.start_time_ns, name)] = stack
                inputs = list(ef.inputs)
                arrived = False
                if name in WATCH:
                    for kind, what, shape, dev in classify(name, inputs, tensor_meta):
                        arrived |= kind == FLOAT64 and what != "promotion"  # a promotion's float64 input was there
                        out.add_device_op(kind, what, name, ev, stack, shape, dev,
                                          call if call >= 0 else ev.start_time_ns, call_name)
                if "::" in name:  # an aten op, not a dispatcher span around one (PythonSubclass)
                    out.f64_seen(inputs, tensor_meta, arrived, name, ev, stack,
                                 call if call >= 0 else ev.start_time_ns, call_name)
                # ops inside an op inherit its stack; inside an annotation (ProfilerStep#, record_function,
                # Optimizer.step#...) they are top-level ops of their own
                child = ctx if ef.scope == user_scope else _Ctx(ctx.chain, ctx.hidden, ctx.last, ctx.open, True,
                                                                call, stack, call_name)
            else:
                child = ctx
        except (UnicodeDecodeError, _Unreadable):
            # Kineto keeps some strings as views into code objects that may be gone by now (seen on frames
            # that were running when the profiler started): this event says nothing; its children still do
            child = ctx
            out.unreadable += 1
        tid = ev.start_tid
        for ch in reversed(ev.children):
            if ch.start_tid == tid:
                todo.append((ch, child))
            elif not adopted.defer(ev, ch, child):  # an op of another thread (autograd's device thread) hung
                todo.append((ch, child))  # under this event of its forward thread, unless its name is gone
        if adopted.names:
            adopted.span(ev, child)
        n += 1
        if not todo:
            todo = adopted.resolve()
    out.nodes = n
    out.cpu_ns = time.thread_time_ns() - t0
    return out


class _Adopted:
    """Ops of one thread that torch.profiler's tree hangs under an event of another thread, given the context of
    the right event of that thread.

    An op run by autograd's engine on its device thread names the thread of its forward; the tree builder takes
    that thread's open event as the op's parent the first time, and then keeps it as the device thread's parent
    for good: every backward of the profile hangs under its *first* ``run_backward`` call. The right parent is
    the event of the same name on that thread that was running when the op started (the ``run_backward`` of
    that backward() call); the adopter's context stays when none was (the op started outside every one)."""

    __slots__ = ("names", "spans", "deferred")

    def __init__(self) -> None:
        self.names: set[tuple[int, str]] = set()
        """(thread, name) of the events that adopted another thread's ops."""
        self.spans: dict[tuple[int, str], list[tuple[int, int, _Ctx]]] = {}
        """(thread, name) -> (start ns, end ns, context below) of each such event, in the walk's (time) order."""
        self.deferred: list[tuple[tuple[int, str], Any, _Ctx]] = []

    def defer(self, parent: Any, child: Any, ctx: _Ctx) -> bool:
        """Keep `child` for later; False when `parent`'s name no longer reads (freed code: see `_name`)."""
        try:
            key = (parent.start_tid, parent.name)
        except UnicodeDecodeError:
            return False
        self.names.add(key)
        self.deferred.append((key, child, ctx))
        return True

    def span(self, ev: Any, ctx: _Ctx) -> None:
        try:
            key = (ev.start_tid, ev.name)
        except UnicodeDecodeError:
            return
        if key in self.names:
            self.spans.setdefault(key, []).append((ev.start_time_ns, ev.end_time_ns, ctx))

    def resolve(self) -> list[tuple[Any, _Ctx]]:
        """The deferred ops with their contexts, as the walk's next to-do list (last first); empties the list."""
        todo: list[tuple[Any, _Ctx]] = []
        for key, child, ctx in reversed(self.deferred):
            spans = self.spans.get(key, [])
            t = child.start_time_ns
            i = bisect.bisect_right(spans, t, key=lambda s: s[0]) - 1
            while i >= 0 and spans[i][1] < t:  # an earlier event that ended before the op (nested ones come later)
                i -= 1
            todo.append((child, spans[i][2] if i >= 0 else ctx))
        self.deferred.clear()
        return todo


def base_ns(path: str) -> int | None:
    """``baseTimeNanoseconds`` of a Kineto JSON file, read from its head or tail (Kineto writes its
    top-level keys around ``traceEvents``); None when absent."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
            m = _BASE.search(head)
            if m is None:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - 65536))
                m = _BASE.search(f.read())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _hidden_name(name: str) -> bool:
    """A python_function event named "path(LINE): func" whose file is hidden."""
    i = name.find("(")
    return i > 0 and file_kind(name[:i]) == HIDDEN


class StackRewriter:
    """Loader hook (`load_kineto_json(transform=...)`): exact op stacks in, hidden Python events out."""

    def __init__(self, sites: CycleSites | None, base: int | None) -> None:
        self.sites = sites if sites is not None else CycleSites()
        self.by_path = sites is None or base is None
        """No walk (it failed) or no way to match its events: drop the Python events whose own file is hidden,
        keep no stack."""
        self.base = base
        self.rewritten = 0
        self.dropped = 0
        self.cpu_ns = 0
        """CPU time of this thread spent rewriting."""

    def __call__(self, events: list[Any]) -> list[Any]:
        t0 = time.thread_time_ns()
        out: list[Any] = []
        keep = out.append
        stacks, visible, base, by_path = self.sites.op_stacks, self.sites.visible_py, self.base, self.by_path
        rewritten = dropped = 0
        for e in events:
            if type(e) is not dict or e.get("ph") != "X":
                keep(e)
                continue
            args = e.get("args")
            ts: Any = e.get("ts")
            # the walk's key: (start ns, name); Kineto writes ts in µs with ns decimals
            key = (base + round(ts * 1000), e.get("name", "")) \
                if base is not None and type(ts) in (float, int) else None
            if e.get("cat") == _PY_CAT:
                if by_path:
                    if _hidden_name(str(e.get("name", ""))):
                        dropped += 1
                        continue
                    site = None
                else:
                    site = visible.get(key)  # type: ignore[arg-type]
                    if site is None:
                        dropped += 1
                        continue
                if type(args) is dict:
                    args.pop(CALL_STACK, None)
                    if site:
                        args[CALL_SITE] = site
            elif type(args) is dict:
                stack = stacks.get(key)  # type: ignore[arg-type]
                if stack:
                    args[CALL_STACK] = stack
                    rewritten += 1
                else:  # a nested op (its stack is its parent op's) or one no Python code made
                    args.pop(CALL_STACK, None)
            keep(e)
        self.rewritten += rewritten
        self.dropped += dropped
        self.cpu_ns += time.thread_time_ns() - t0
        return out
