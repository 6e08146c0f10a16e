"""Short lane names for the timeline: what a lane is in a few characters.

    host main, autograd 0, dataloader, nc0 exec, nc0 tensor, gpu0 s7, compile, nc0 alloc

The full name (process and track as the trace names them) is the lane's `title`, shown in its detail.
Pure functions over the model, no Textual.
"""

from __future__ import annotations

import re

from neuron_prof.model import Trace, TrackKind

# words that take room and say little, in lane names
_WORDS = {
    "executions": "exec",
    "execution": "exec",
    "engine": "",
    "allocated": "alloc",
    "reserved": "resv",
    "bandwidth": "bw",
    "tensors": "tens",
    "points": "",
    "demotions": "",
    "collectives": "coll",
    "stream": "s",
}
_DEVICE = (
    (re.compile(r"^neuron:(\d+)$"), "nc{}"),
    (re.compile(r"^neuron device (\d+)$"), "nd{}"),
    (re.compile(r"^GPU (\d+)$", re.I), "gpu{}"),
    (re.compile(r"^MTIA (\d+)$", re.I), "mtia{}"),
)
_PROBES = {
    TrackKind.COMPILE: "compile",
    TrackKind.FALLBACK: "fallback",
    TrackKind.SYNC: "sync",
    TrackKind.COLLECTIVE: "collective",
    TrackKind.DTYPE: "dtype",
}


def device_prefix(name: str) -> str:
    """"neuron:0" -> "nc0", "GPU 2" -> "gpu2", "neuron device 0" -> "nd0"; other names unchanged."""
    for pat, fmt in _DEVICE:
        m = pat.match(name.strip())
        if m:
            return fmt.format(m.group(1))
    return name.strip()


def _shorten(words: str) -> str:
    """Known long words shortened or dropped; "stream 7" -> "s7"."""
    out = [s for w in words.split() if (s := _WORDS.get(w.lower(), w))]
    return re.sub(r"\bs (\d+)\b", r"s\1", " ".join(out))


def _strip_prefixes(name: str, *prefixes: str) -> str:
    """`name` without a leading device or process name ("neuron:0 tensor engine" -> "tensor engine")."""
    for p in prefixes:
        p = p.strip()
        if p and name.startswith(p) and name[len(p) :][:1] in (" ", ":"):
            return name[len(p) :].lstrip(" :")
    return name


def _thread_name(trace: Trace, track: int) -> str:
    t = trace.tracks[track]
    p = trace.processes[t.process]
    if t.tid not in (None, "") and str(t.tid) == str(p.pid):
        return "host main"
    m = re.match(r"^thread (\S+) \((.*)\)$", t.name.strip())
    if m:
        tid, tname = m.groups()
        if not tname or tname == p.name or tname.startswith("neuron-prof") or tname.startswith("python"):
            return f"thread {tid}"
        tname = re.sub(r"^pt_", "", tname).replace("_", " ")
        return tname
    name = t.name.strip()
    if name.startswith("thread ") and "Profiler" in name:
        return "profiler"
    if name.lower() in ("mainthread", "main"):
        return "host main"
    return name.removeprefix("thread ").strip() or "thread"


def lane_name(trace: Trace, track: int) -> str:
    """The short name of `track`'s lane (module docstring)."""
    t = trace.tracks[track]
    p = trace.processes[t.process]
    if t.kind in _PROBES:
        return _PROBES[t.kind]
    if p.kind == "device" or t.kind == TrackKind.DEVICE:
        dev = device_prefix(p.labels or p.name)
        rest = _shorten(_strip_prefixes(t.name.strip(), p.name, p.labels, str(p.pid)))
        if rest.lower().startswith(dev.lower()):
            rest = rest[len(dev) :].strip()
        return f"{dev} {rest}".strip() if dev else rest
    if t.kind == TrackKind.THREAD:
        return _thread_name(trace, track)
    # host counters and other host tracks: "host allocated" -> "host alloc", "neuron_rt nc 0" -> "rt nc0"
    name = re.sub(r"^neuron_rt nc (\d+)$", r"rt nc\1", t.name.strip())
    name = re.sub(r"^neuron:(\d+)\b", r"nc\1", name)
    return _shorten(name) or t.kind


def lane_title(trace: Trace, track: int) -> str:
    """The full name: "process: track" as the trace names them."""
    t = trace.tracks[track]
    p = trace.processes[t.process]
    proc = f"{p.name} ({p.labels})" if p.labels and p.labels != p.name else p.name
    return f"{proc}: {t.name.strip()}" if proc else t.name.strip()


def _is_host(trace: Trace, process: int) -> bool:
    p = trace.processes[process]
    return p.kind != "device" and isinstance(p.pid, int)


def lane_names(trace: Trace, tracks: list[int]) -> dict[int, str]:
    """Short names of `tracks`, made unique: with several host processes (ranks merged in one file) each
    name gets its rank or pid ("r1 host main"); left duplicates get their track number."""
    names = {t: lane_name(trace, t) for t in tracks}
    # Kineto's "Spans"/"Traces" pseudo-processes (string pids) are no second host
    hosts = {trace.tracks[t].process for t in tracks if _is_host(trace, trace.tracks[t].process)}
    if len(hosts) > 1:
        for t in tracks:
            p = trace.processes[trace.tracks[t].process]
            if _is_host(trace, trace.tracks[t].process):
                tag = f"r{p.rank}" if p.rank is not None else f"p{p.pid}"
                names[t] = f"{tag} {names[t]}"
    seen: dict[str, int] = {}
    for t in tracks:
        seen[names[t]] = seen.get(names[t], 0) + 1
    for t in tracks:
        if seen[names[t]] > 1:
            names[t] = f"{names[t]} #{t}"
    return names
