"""Write a merged multi-rank trace rank by rank, holding one rank in memory at a time.

    from neuron_prof.merge import StreamingMerge, rank_of
    m = StreamingMerge(paths, load=load, rank_of=rank_of)
    write_merged(m, "merged.pftrace")      # or merged.json / merged.json.gz

Both formats allow it:

* `.pftrace`: each rank is a file section of its own, written by the ordinary writer with the rank's
  sequence ids and uuid space (rank << 32); its metadata instant lists its processes and tracks. A last
  section (sequence ids of "rank" MERGE_SECTION) holds the findings track and the merged metadata and
  findings. Flow ids are shared: cross-rank flows carry the same id on both ranks' slices, and the
  (cat, name) codes of flow ids come from one registry that every section's metadata lists as it grew.
  `neuron_prof.loaders.pftrace.reader` reads every section's metadata in file order.
* Chrome JSON: the header (time base) first, then each rank's events; cross-rank flows are an "s" event in
  one rank's section and an "f" event in the other's. The `neuron_prof` block (processes and tracks of all
  ranks, metadata, findings) comes after `traceEvents`, with the findings on a synthetic track.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from neuron_prof.errors import ExportError
from neuron_prof.exporters.chrome_json import SYNTHETIC_TID_BASE, _ChromeWriter, _dumps, findings_events, json_stream
from neuron_prof.exporters.perfetto import CHUNK, _Writer
from neuron_prof.formats import CHROME_JSON, PFTRACE, format_for
from neuron_prof.model import ProcessKind, TraceBuilder, TrackKind
from neuron_prof.model.schema import FORMAT_VERSION, META_KEY

if TYPE_CHECKING:
    from neuron_prof.merge import StreamingMerge

__all__ = ["MERGE_SECTION", "write_merged"]

MERGE_SECTION = 1 << 15
"""The .pftrace "rank" of the last section (merged metadata and findings): above every real rank."""
_FINDINGS_PID = 0x7FFFFF00
"""pid of the synthetic process that holds the findings track in merged JSON (lowered while taken)."""


def write_merged(merge: StreamingMerge[Any], path: str | os.PathLike[str], fmt: str | None = None) -> Path:
    """Run the merge's second pass straight into `path` (.json, .json.gz or .pftrace).

    Writes to a temporary file and renames it, so a failed merge leaves no half file.

    Raises:
        ExportError: the file cannot be written. UsageError: an unknown format, or an input changed.
    """
    path = Path(path)
    fmt = fmt or format_for(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw:
            if fmt == PFTRACE.id:
                _write_pftrace(merge, raw)
            else:
                out = json_stream(raw, path)
                try:
                    _write_json(merge, out)
                finally:
                    if out is not raw:
                        out.close()
        os.replace(tmp, path)
    except BaseException as e:  # any failure (full disk, a bug, Ctrl-C) leaves no half file behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, (OSError, zlib.error)):
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ExportError(f"{path}: cannot write the merged trace ({reason})") from None
        raise
    return path


def _write_pftrace(merge: StreamingMerge[Any], f: BinaryIO) -> None:
    combos: dict[tuple[str, str], int] = {}
    for seg in merge.segments():
        if not 0 <= seg.rank < MERGE_SECTION:
            raise ExportError(f"rank {seg.rank}: a {PFTRACE.suffixes[0]} holds ranks 0..{MERGE_SECTION - 1}; "
                              f"merge to {CHROME_JSON.suffixes[0]}")
        # a section's metadata would add to the merged one on loading: the rank's own goes in the last section
        _Writer(seg.trace.replace(metadata={}), f, CHUNK, rank=seg.rank, flow_ends=seg.flow_ends,
                combos=combos).write()
        del seg  # before the next rank is read: one rank in memory at a time
    last = TraceBuilder().build().replace(metadata=merge.metadata(), findings=tuple(merge.findings))
    _Writer(last, f, CHUNK, rank=MERGE_SECTION, combos=combos, t0=merge.plan.time_range[0]).write()


def _write_json(merge: StreamingMerge[Any], out: BinaryIO) -> None:
    lo, _ = merge.plan.time_range
    base = (lo // 1_000_000_000) * 1_000_000_000
    head = {"schemaVersion": 1, "deviceProperties": [], "baseTimeNanoseconds": base, "displayTimeUnit": "ms"}
    out.write(_dumps(head)[:-1] + b',\n"traceEvents":[\n')
    procs: list[dict[str, Any]] = []
    tracks: list[dict[str, Any]] = []
    first = True

    def put(block: bytes) -> None:
        nonlocal first
        if block:
            out.write(block if first else b",\n" + block)
            first = False

    for seg in merge.segments():
        w = _ChromeWriter(seg.trace, base=base, row_base=seg.slice_base, flow_ends=seg.flow_ends)
        for block in w.events():
            put(block)
        own = w.own()
        procs += own["processes"]
        tracks += own["tracks"]
        del seg, w  # before the next rank is read: one rank in memory at a time
    findings = list(merge.findings)
    if findings:
        pids = {p["pid"] for p in procs}
        pid = _FINDINGS_PID
        while pid in pids:
            pid -= 1
        tid = SYNTHETIC_TID_BASE + (zlib.crc32(b"findings:findings") & 0xFFFFFF)
        m = b'{"ph":"M","name":"%b","pid":%d,"tid":%d,"args":{"name":"%b"}}'
        put(m % (b"process_name", pid, 0, b"neuron-prof") + b",\n" + m % (b"thread_name", pid, tid, b"findings"))
        put(findings_events(findings, (pid, tid), base, lo))
        procs.append({"pid": pid, "name": "neuron-prof", "kind": ProcessKind.HOST, "synthetic": True})
        tracks.append({"pid": pid, "tid": tid, "name": "findings", "kind": TrackKind.FINDINGS, "synthetic": True})
    own = {"format_version": FORMAT_VERSION, "metadata": merge.metadata(), "findings": findings,
           "processes": procs, "tracks": tracks}
    out.write(b'\n],\n"%b":%b}\n' % (META_KEY.encode(), _dumps(own)))
