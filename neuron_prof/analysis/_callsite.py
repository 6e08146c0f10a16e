"""Call sites: the user's frame ("path/file.py:LINE"), never torch's or ours.

Probe events carry ``call_site`` directly; others carry a ``stack`` (list or string) or Kineto's
``"Call stack"`` ("/p/a.py(12): fwd;/p/b.py(40): main", innermost first).
"""

from __future__ import annotations

import re
from typing import Any

from neuron_prof.model.schema import Arg

_LIBRARY_MARKERS = (
    "/torch/",
    "\\torch\\",
    "site-packages",
    "dist-packages",
    "<frozen",
    "/neuron_prof/",
    "torch_neuronx",
    "/lib/python3",
    "<built-in",
    "<string>",
    "/torch_xla/",
    "/_dynamo/",
)
_FRAME_PAREN = re.compile(r"^\s*(?P<path>.+?)\((?P<line>\d+)\)(?::.*)?$")
_FRAME_COLON = re.compile(r"^\s*(?P<path>[^:]+?\.py):(?P<line>\d+)\b")
_FRAME_PYSTYLE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')


def is_library_frame(path: str) -> bool:
    """True for frames in torch, site-packages, the stdlib or neuron-prof itself (its demo is user code)."""
    p = path.replace("\\", "/")
    if "neuron_prof/demo/" in p:
        return False
    return any(m in p for m in _LIBRARY_MARKERS) or p.startswith(("torch/", "neuron_prof/"))


def parse_frame(frame: str) -> tuple[str, int] | None:
    """(path, line) from one frame in Kineto, "file.py:12" or traceback style; None if unparseable."""
    for rx in (_FRAME_PYSTYLE, _FRAME_PAREN, _FRAME_COLON):
        m = rx.search(frame)
        if m:
            return m.group("path").strip(), int(m.group("line"))
    return None


def _frames(stack: Any) -> list[str]:
    if isinstance(stack, str):
        return [f for f in re.split(r"[;\n]", stack) if f.strip()]
    if isinstance(stack, (list, tuple)):
        out = []
        for f in stack:
            if isinstance(f, str):
                out.append(f)
            elif isinstance(f, dict) and "file" in f:
                out.append(f"{f['file']}:{f.get('line', 0)}")
            elif isinstance(f, (list, tuple)) and len(f) >= 2:
                out.append(f"{f[0]}:{f[1]}")
        return out
    return []


def user_frame(stack: Any) -> str:
    """The first frame of `stack` (innermost first) outside libraries, as "path:LINE"; "" if none."""
    for f in _frames(stack):
        pl = parse_frame(f)
        if pl and not is_library_frame(pl[0]):
            return f"{pl[0]}:{pl[1]}"
    return ""


def call_site_of(args: dict[str, Any]) -> str:
    """The user's call site of an event: probe ``call_site``, else its ``stack``, else Kineto "Call stack"."""
    cs = args.get(Arg.CALL_SITE)
    if isinstance(cs, str) and cs:
        return cs
    for key in (Arg.STACK, "Call stack", "call stack"):
        if key in args:
            site = user_frame(args[key])
            if site:
                return site
    return ""
