"""A runtime output folder as ONE trace: torch.profiler's ``trace.json`` (host ops) and the processed Neuron
Explorer tables of the same process (driver, runtime and hardware work), on one clock.

    trace = load_folder("output/i-0abc_pid_4242/")   # the pid folder, its <timestamp>/, or the tables' folder

Sources: shared/design/neuron-explorer-facts.md ("Capture": one ``<instance-id>_pid_<pid>/<timestamp>/``
folder per process, holding the runtime's files and ``trace.json``, torch.profiler's Kineto JSON;
"Processing": table times are ns on the host clock, aligned by the tool) and torch-neuronx-facts.md
("Corrections": the ``framework_mapping_<ts>.json`` written beside them; ``th_id`` is not the OS thread id;
``seq_nr`` may be one above the Kineto "Sequence number").

The processed tables are looked for in the capture folder itself, one folder below it (``<timestamp>/parquet``),
beside it as ``<timestamp>_parquet``, and, as the docs process a job (``neuron-explorer view -d RUN_DIR``: the
processes of a job combine), in the run directory's ``RUN_DIR/parquet`` above the pid folder: its run-wide
tables are cut to this process's rows (``instance_id`` and ``process_id`` from the folder name
``<instance-id>_pid_<pid>``; `run_profile`). torch.profiler's trace is ``trace.json`` (the documented
``NeuronProfiler.export_trace``) or ``pytorch_trace.json`` (the April ``NeuronProfiler`` context manager, in a
flat ``<instance>_pid_<pid>/`` folder). Joins:

* the profile's framework events (``trace_event_source = framework``: dispatch and ``privateuse1_driver``) are
  events trace.json already holds: each is the slice of the same name starting within `JOIN_TOL_NS`, on the
  same thread id when one is there, else on any thread; runtime and hardware events keep their ``flow_id``
  links, which now start at that host op. Framework events trace.json lacks are added as in a bare profile.
* Kineto ``privateuse1_driver`` events with ``nrt_sequence_id`` are linked to the op that submitted them
  through the framework mapping (`framework_mapping.mapping_links`).

The trace's rank is trace.json's (``distributedInfo``), so ``merge`` and the job summary take one pid
folder a rank.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.explorer.framework_mapping import MappingIndex, mapping_links, read_mapping_file
from neuron_prof.loaders.explorer.reader import (
    EXPLORER_KEY,
    RAW_CAPTURE,
    UNIX_NS_MIN,
    RowFilter,
    add_explorer,
    find_profile,
    is_explorer_folder,
    load_explorer,
)
from neuron_prof.loaders.json.fill import read_bytes
from neuron_prof.loaders.json.reader import parse_kineto_into
from neuron_prof.model import Cat, KinetoCat, Meta, Trace, TraceBuilder
from neuron_prof.model.order import searchsorted

__all__ = ["FRAMEWORK_TRACE", "FRAMEWORK_TRACES", "JOIN_TOL_NS", "PROCESSED_DIR", "PROCESSED_SUFFIX", "HostOps",
           "add_capture_tables", "capture_trace_json", "load_capture", "load_folder", "pid_folder_rows",
           "run_profile"]

FRAMEWORK_TRACE = "trace.json"
"""torch.profiler's Kineto JSON in the runtime output folder (neuron-explorer-facts, "Capture")."""
FRAMEWORK_TRACES = (FRAMEWORK_TRACE, "pytorch_trace.json")
"""Its names: the documented export_trace's, the April NeuronProfiler context manager's."""
PID_FOLDER = re.compile(r"^(?P<instance>.+)_pid_(?P<pid>\d+)$")
MAPPING_GLOB = "framework_mapping_*.json"
PROCESSED_DIR = "parquet"
"""``<timestamp>/parquet``: where neuron-prof asks neuron-explorer to write a capture's tables."""
PROCESSED_SUFFIX = "_parquet"
"""``<timestamp>_parquet``: tables beside their capture folder (also read)."""
JOIN_TOL_NS = 1_000
"""A framework event and its trace.json op start within this many ns (both are the host clock; Kineto's
JSON keeps µs with three decimals)."""
SOURCE_FORMAT = "neuron_capture"


def load_folder(folder: Path) -> Trace:
    """A folder: the processed profile in or below it (`explorer.find_profile`), else the run-wide one above
    its pid folder (`run_profile`), with its capture's trace.json when there is one (`load_capture`), else the
    tables alone (`explorer.load_explorer`)."""
    run = run_profile(folder)
    if run is not None:
        profile, pid_dir = run
        tj = _trace_json_in(pid_dir, folder)
        rows = pid_folder_rows(pid_dir)
        if tj is not None:
            return load_capture(profile, tj, folder, rows)
    profile = find_profile(folder)
    if profile.name == PROCESSED_DIR:  # RUN_DIR/parquet: the job's tables, one process's when it is alone
        pids = [d for d in sorted(profile.parent.iterdir()) if d.is_dir() and PID_FOLDER.match(d.name)]
        found = [(d, _trace_json_in(d, d)) for d in pids]
        tjs = [(d, t) for d, t in found if t is not None]
        if len(pids) == 1 and len(tjs) == 1:
            return load_capture(profile, tjs[0][1], folder, pid_folder_rows(tjs[0][0]))
    tj = capture_trace_json(profile)
    return load_capture(profile, tj, folder) if tj is not None else load_explorer(profile)


def pid_folder_rows(pid_dir: Path) -> RowFilter:
    """The rows of run-wide tables that are this process's: ``<instance-id>_pid_<pid>``."""
    m = PID_FOLDER.match(pid_dir.name)
    return {"instance_id": m.group("instance"), "process_id": int(m.group("pid"))} if m else {}


def run_profile(folder: Path) -> tuple[Path, Path] | None:
    """(run-wide processed profile, pid folder) for a pid folder, or a folder in one (up to two levels), that
    holds no processed tables of its own: ``RUN_DIR/<instance>_pid_<pid>/...`` with ``RUN_DIR/parquet``."""
    for pid_dir in (folder, folder.parent, folder.parent.parent):
        if not PID_FOLDER.match(pid_dir.name):
            continue
        try:
            find_profile(folder)
            return None  # processed on its own (``<ts>/parquet``): those tables are this process's
        except TraceLoadError:
            pass
        run = pid_dir.parent / PROCESSED_DIR
        return (run, pid_dir) if run.is_dir() and is_explorer_folder(run) else None
    return None


def _trace_json_in(pid_dir: Path, folder: Path) -> Path | None:
    """torch.profiler's trace of a pid folder: in `folder` when it is a ``<timestamp>`` folder, else in the pid
    folder itself (the April layout) or its newest ``<timestamp>/``."""
    for d in dict.fromkeys([folder, pid_dir]):
        for name in FRAMEWORK_TRACES:
            if (d / name).is_file():
                return d / name
    found = sorted((p for name in FRAMEWORK_TRACES for p in pid_dir.glob(f"*/{name}")), key=lambda p: p.parent.name)
    return found[-1] if found else None


def capture_trace_json(profile: Path) -> Path | None:
    """The trace.json of the capture a processed profile comes from: beside its tables, else in the capture
    folder above them or in ``<ts>/`` for tables in ``<ts>_parquet/``, a folder that holds the runtime's own
    files (ntrace.pb, trace_info.pb, .ntff, a framework mapping): a trace.json that merely sits in the folder
    above (neuron-prof's own default output name) is not taken for the capture's. None when there is none."""
    for name in FRAMEWORK_TRACES:
        if (profile / name).is_file():
            return profile / name
    places = [profile.parent]
    if profile.name.endswith(PROCESSED_SUFFIX):
        places.insert(0, profile.with_name(profile.name[: -len(PROCESSED_SUFFIX)]))
    for d in places:
        for name in FRAMEWORK_TRACES:
            if (d / name).is_file() and _is_capture(d):
                return d / name
    return None


def _is_capture(folder: Path) -> bool:
    return any(next(folder.glob(g), None) is not None for g in (*RAW_CAPTURE, MAPPING_GLOB))


class HostOps:
    """The slices trace.json put in the builder, found by name and start for the profile's framework events
    (an `explorer.HostRow`): sorted columns, one vectorised binary search per distinct name."""

    def __init__(self, b: TraceBuilder, tol_ns: int = JOIN_TOL_NS) -> None:
        self._strings, self._tol = b.strings, tol_ns
        name, ts = np.asarray(b.s_name, dtype=np.int64), np.asarray(b.s_ts, dtype=np.int64)
        self._order = np.lexsort((ts, name))
        self._name, self._ts = name[self._order], ts[self._order]
        tids = np.asarray([t.tid if isinstance(t.tid, int) else -1 for t in b.tracks] or [-1], dtype=np.int64)
        self._tid = tids[np.asarray(b.s_track, dtype=np.int64)[self._order]] if len(name) else self._name
        self.asked = self.joined = self.other_thread = 0

    def __call__(self, tid: np.ndarray, names: list[str], name_idx: np.ndarray, ts: np.ndarray) -> np.ndarray:
        out = np.full(len(ts), -1, dtype=np.int64)
        self.asked += len(ts)
        for k, name in enumerate(names):
            q = np.flatnonzero(name_idx == k)
            nid = self._strings.get(name)
            if not len(q) or nid is None:
                continue
            lo, hi = searchsorted(self._name, nid, "left"), searchsorted(self._name, nid, "right")
            block = self._ts[lo:hi]
            a = lo + searchsorted(block, ts[q] - self._tol, "left")
            z = lo + searchsorted(block, ts[q] + self._tol, "right")
            one = z - a == 1  # the usual case: one op of that name starts there
            out[q[one]] = a[one]
            for j in np.flatnonzero(z - a > 1).tolist():  # several: same thread first, then the nearest start
                cand = np.arange(a[j], z[j])
                same = cand[self._tid[cand] == tid[q[j]]]
                pick = same if len(same) else cand
                out[q[j]] = pick[np.argmin(np.abs(self._ts[pick] - ts[q[j]]))]
        hit = out >= 0
        # Explorer's thread id need not be Kineto's: those are joined by name and time alone
        self.other_thread += int((self._tid[out[hit]] != tid[hit]).sum())
        self.joined += int(hit.sum())
        out[hit] = self._order[out[hit]]
        return out


def load_capture(profile: Path, trace_json: Path, source: Path | None = None, rows: RowFilter | None = None
                 ) -> Trace:
    """trace.json's host ops plus the processed profile's tables (see the module docstring).

    Raises:
        TraceLoadError / TraceFormatError: trace.json or a table cannot be read (the message names the file).
    """
    b = TraceBuilder()
    warnings: list[str] = []
    try:
        data = orjson.loads(read_bytes(trace_json, warnings))
    except orjson.JSONDecodeError as e:
        raise TraceFormatError(trace_json, f"not JSON ({e})") from None
    parse_kineto_into(b, data, str(trace_json))
    del data
    host_clock = b.metadata.get(Meta.CLOCK)
    host_wall = _span(b)
    more, wall = add_capture_tables(b, profile, trace_json.parent, rows)
    warnings += more
    md = b.metadata
    md[Meta.SOURCE] = str(source if source is not None else trace_json.parent)
    md[Meta.SOURCE_FORMAT] = SOURCE_FORMAT
    md[Meta.BACKEND] = "neuron"
    spans = [s for s in (host_wall, wall) if s is not None]
    if spans:
        md[Meta.WALL] = [min(s[0] for s in spans), max(s[1] for s in spans)]
    unix = host_clock == "unix" and (wall is None or wall[0] >= UNIX_NS_MIN)
    md[Meta.CLOCK] = "unix" if unix else "relative"
    if not unix:
        warnings.append(f"{trace_json.name} and the Neuron Explorer tables are not both on the Unix clock: "
                        "host and device times may not line up")
    all_warnings = list(md.get(Meta.WARNINGS) or []) + warnings
    if all_warnings:
        md[Meta.WARNINGS] = all_warnings
    return b.build()


def add_capture_tables(b: TraceBuilder, profile: Path, capture: Path, rows: RowFilter | None = None
                       ) -> tuple[list[str], tuple[int, int] | None]:
    """Add a processed profile's tables to a builder that holds its capture's trace.json ops (a load of the
    folder, or a session that captured it): framework events joined to those ops (`HostOps`), runtime and
    hardware flows from them, trace.json's driver events linked through the mapping files in `capture`.
    `rows`: this process's rows of run-wide tables (`pid_folder_rows`). Returns the load warnings and the
    profile's (first, last) Unix ns; ``metadata["neuron_explorer"]["framework_join"]`` counts the joins."""
    n_host = b.n_slices
    ops = HostOps(b)
    index = _mapping(capture)
    runtime: list[int] = []
    link = lambda lone: runtime.append(_runtime_links(b, n_host, index, lone))  # noqa: E731
    warnings, wall = add_explorer(b, profile, ops, rows, link)
    mapped = _mapping_links(b, n_host, index) + sum(runtime)
    b.metadata[EXPLORER_KEY]["framework_join"] = {"framework_events": ops.asked, "joined": ops.joined,
                                                  "joined_on_other_thread": ops.other_thread,
                                                  "mapping_links": mapped}
    if ops.joined < ops.asked / 2:  # driver events trace.json lacks (April source) are few; most: a mismatch
        warnings.append(f"{ops.asked - ops.joined} of {ops.asked} framework events of the Neuron Explorer "
                        f"profile match no op in {FRAMEWORK_TRACE} (same name, start within "
                        f"{JOIN_TOL_NS} ns): added from the profile; are both from the same capture?")
    return warnings, wall


def _span(b: TraceBuilder) -> tuple[int, int] | None:
    if not b.n_slices:
        return None
    ts, dur = np.asarray(b.s_ts, dtype=np.int64), np.asarray(b.s_dur, dtype=np.int64)
    return int(ts.min()), int((ts + dur).max())


def _mapping(folder: Path) -> MappingIndex:
    index: MappingIndex = {}
    for f in sorted(folder.glob(MAPPING_GLOB)):
        for k, v in read_mapping_file(f).items():
            index.setdefault(k, []).extend(v)
    return index


def _host_seq(b: TraceBuilder, n_host: int) -> tuple[np.ndarray, np.ndarray]:
    """trace.json's cpu_ops (rows) and their Kineto "Sequence number" (-2 where none)."""
    cpu = b.strings.get(KinetoCat.CPU_OP)
    if cpu is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ops = np.flatnonzero(np.asarray(b.s_cat[:n_host], dtype=np.int64) == cpu)
    return ops, np.asarray([_arg(b, int(r), "Sequence number", -2) for r in ops], dtype=np.int64)


def _mapping_links(b: TraceBuilder, n_host: int, index: MappingIndex) -> int:
    """Flows from host ops to trace.json's ``privateuse1_driver`` events through the framework mapping
    (``nrt_sequence_id`` → ``nrta_seq_id``), for the events no flow reaches yet; returns how many."""
    drv = b.strings.get(KinetoCat.PRIVATEUSE1_DRIVER)
    if not index or drv is None:
        return 0
    cat = np.asarray(b.s_cat[:n_host], dtype=np.int64)
    linked = set(b.f_dst)
    dev = [int(r) for r in np.flatnonzero(cat == drv) if int(r) not in linked]
    ops, seq = _host_seq(b, n_host)
    if not dev or not len(ops):
        return 0
    ts = np.asarray(b.s_ts, dtype=np.int64)
    nrt = [_arg(b, r, "nrt_sequence_id", None) for r in dev]
    pairs = mapping_links(index, seq, ts[ops], nrt, ts[np.asarray(dev)])
    for h, j in pairs:
        b.add_flow(int(ops[h]), dev[j], cat=Cat.DEVICE, name="launch")
    return len(pairs)


def _runtime_links(b: TraceBuilder, n_host: int, index: MappingIndex, lone: list[tuple[int, int, int]]) -> int:
    """Flows from host ops to the profile's runtime calls that no framework event of the profile ties to an op
    (its framework trace was not processed with it): their ``flow_id`` is the runtime's sequence id, which the
    framework mapping's ``nrta_seq_id`` names (the emulated runtime and the Kineto driver events carry the same
    number as ``nrt_sequence_id``); joined by `framework_mapping.host_op_for`. Returns how many."""
    if not index or not lone:
        return 0
    ops, seq = _host_seq(b, n_host)
    if not len(ops):
        return 0
    ts = np.asarray(b.s_ts, dtype=np.int64)
    rows = [r for r, _, _ in lone]
    pairs = mapping_links(index, seq, ts[ops], [f for _, f, _ in lone], np.asarray([t for _, _, t in lone]))
    for h, j in pairs:
        b.add_flow(int(ops[h]), rows[j], cat=Cat.DEVICE, name="launch")
    return len(pairs)


def _arg(b: TraceBuilder, row: int, key: str, default: object) -> object:
    i = b.s_args[row]
    v = b.args.get(i).get(key, default) if i >= 0 else default
    return v if isinstance(v, int) and not isinstance(v, bool) else default
