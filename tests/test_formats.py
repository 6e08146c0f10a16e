"""The registry of trace formats (neuron_prof.formats): every suffix it lists round-trips through the exporter
and the loader, a capture's per-rank and companion files keep a name the registry reads back, and no shipped
module spells a trace suffix of its own."""

from __future__ import annotations

import ast
import gzip
import importlib
import json
import re
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as TraceProto

from neuron_prof.capture._outputs import planned_paths, write_all
from neuron_prof.errors import UsageError
from neuron_prof.exporters import write_trace
from neuron_prof.formats import (
    FORMATS,
    TRACE_SUFFIXES,
    companion_pftrace,
    format_for,
    named_format,
    rank_path,
    sniff,
    split_suffix,
)
from neuron_prof.job import rank_sources
from neuron_prof.loaders import load
from neuron_prof.model import Meta, Trace
from tests._demo_trace import demo_like_trace

ROOT = Path(__file__).resolve().parents[1]
FILE_SUFFIXES = [s for f in FORMATS.values() for s in f.suffixes]


def _content_format(path: Path) -> str:
    """What the written bytes are, read by the standard parsers (not ours): "json", "json.gz" or "protobuf"."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        assert isinstance(json.loads(gzip.decompress(raw)), dict)
        return "json.gz"
    try:
        assert isinstance(json.loads(raw), dict)
        return "json"
    except ValueError:
        proto = TraceProto()
        proto.ParseFromString(raw)
        assert len(proto.packet) > 0
        return "protobuf"


def _same_events(a: Trace, b: Trace) -> None:
    """The same processes, tracks, findings and events (as multisets: the Perfetto reader orders slices its
    own way); the loaders' own metadata (source, format) aside."""
    assert [(p.pid, p.name, p.kind, p.rank) for p in a.processes] == [(p.pid, p.name, p.kind, p.rank)
                                                                      for p in b.processes]
    assert [(t.name, t.kind, t.unit) for t in a.tracks] == [(t.name, t.kind, t.unit) for t in b.tracks]

    def events(t: Trace) -> list[tuple[object, ...]]:
        s, c = t.slices, t.counters
        return sorted([(int(s.ts_ns[i]), int(s.dur_ns[i]), int(s.track[i]), t.s(s.name[i]), t.s(s.cat[i]))
                       for i in range(len(s))]
                      + [(int(c.ts_ns[i]), -1, int(c.track[i]), float(c.value[i]), "") for i in range(len(c))])

    assert len(a.slices) > 0 and events(a) == events(b)
    assert a.findings == b.findings
    assert a.metadata[Meta.STEPS] == b.metadata[Meta.STEPS]


@pytest.fixture(scope="module")
def trace():  # type: ignore[no-untyped-def]
    t = demo_like_trace()
    return t.replace(metadata={**t.metadata, Meta.CLOCK: "unix"})  # what a loader assumes of Unix-ns times


def test_the_registry_lists_every_trace_suffix_once() -> None:
    assert len(FILE_SUFFIXES) == len(set(FILE_SUFFIXES)) == len(TRACE_SUFFIXES)
    assert set(TRACE_SUFFIXES) == set(FILE_SUFFIXES)
    # the documented names, each written by what its format promises
    assert {".json", ".json.gz", ".pftrace", ".perfetto-trace", ".pb"} <= set(FILE_SUFFIXES)


@pytest.mark.parametrize("suffix", FILE_SUFFIXES)
def test_every_suffix_round_trips(tmp_path: Path, trace, suffix: str) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a name with one of the registry's suffixes (in upper case too: names are case-blind)
    for name in (f"t.rank0{suffix}", f"T{suffix.upper()}"):
        path = tmp_path / name
        fmt = format_for(path)
        assert suffix in FORMATS[fmt].suffixes
        # WHEN the exporter writes it by its name and the loader reads it back
        write_trace(trace, path)
        back = load(path)
        # THEN the bytes are what the format says and every event comes back
        expected = {"chrome_json": "json.gz" if suffix.endswith(".gz") else "json"}.get(fmt, "protobuf")
        assert _content_format(path) == expected
        assert sniff(path.read_bytes()[:64]) is FORMATS[fmt]
        _same_events(trace, back)


def test_a_name_without_a_trace_suffix_is_refused() -> None:
    for name in ("t.txt", "t.json.bak", "t", "t.gz", "t.parquet"):
        assert named_format(name) is None and split_suffix(Path(name)) == (name, "")
        with pytest.raises(UsageError, match="cannot tell the trace format"):
            format_for(name)


@pytest.mark.parametrize("suffix", FILE_SUFFIXES)
def test_rank_files_keep_a_suffix_the_registry_reads(tmp_path: Path, trace, suffix: str) -> None:  # type: ignore[no-untyped-def]
    # GIVEN a capture of 4 ranks to run/t<suffix>: rank 3 plans its files
    out = tmp_path / "run" / f"t{suffix}"
    paths = planned_paths(out, 3, 4, pftrace=True)
    # THEN its own file is t.rank3<suffix>, and a JSON also gets the native trace beside it
    assert paths[0] == tmp_path / "run" / f"t.rank3{suffix}"
    assert paths[1:] == ([tmp_path / "run" / "t.rank3.pftrace"] if FORMATS[format_for(out)].id == "chrome_json"
                         else [])
    # AND every planned file is written and loads back
    rep = write_all(trace, paths)
    assert rep.written == paths and not rep.failed
    for p in paths:
        _same_events(trace, load(p))


def test_capture_to_perfetto_trace_plans_rank_files_that_load(tmp_path: Path, trace) -> None:  # type: ignore[no-untyped-def]
    """Issue 31: split_suffix did not know .perfetto-trace, so rank 3 of 4 planned `t.perfetto-trace.rank3`,
    which format_for refused (the capture then lost that rank's trace)."""
    paths = [planned_paths(tmp_path / "t.perfetto-trace", r, 4, pftrace=True) for r in range(4)]
    assert [p.name for ps in paths for p in ps] == [f"t.rank{r}.perfetto-trace" for r in range(4)]
    for (p,) in paths:
        assert format_for(p) == "pftrace"
    rep = write_all(trace, [ps[0] for ps in paths])
    assert not rep.failed and rep.fallback is None
    _same_events(trace, load(paths[3][0]))
    # and a folder of such ranks is a job of 4 ranks (one file each)
    assert rank_sources([str(tmp_path)]) == [str(ps[0]) for ps in paths]


def test_companion_keeps_the_whole_stem() -> None:
    assert companion_pftrace("run/trace.rank0.json") == Path("run/trace.rank0.pftrace")
    assert companion_pftrace("run/t.v2.JSON.GZ") == Path("run/t.v2.pftrace")
    for name in ("run/t.pftrace", "run/t.perfetto-trace", "run/t.pb", "run/t.txt"):
        assert companion_pftrace(name) is None
    assert rank_path("run/t.v2.json.gz", 10) == Path("run/t.v2.rank10.json.gz")


def test_a_job_folder_keeps_one_file_per_rank_preferring_the_native_trace(tmp_path: Path, trace) -> None:  # type: ignore[no-untyped-def]
    for name in ("t.rank0.json", "t.rank0.pftrace", "t.rank1.json.gz", "t.rank1.pb", "t.rank2.json",
                 "t.rank2.json.gz"):
        write_trace(trace, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a trace")
    assert [Path(s).name for s in rank_sources([str(tmp_path)])] == ["t.rank0.pftrace", "t.rank1.pb",
                                                                       "t.rank2.json"]


def test_sniff_reads_the_first_bytes() -> None:
    assert sniff(b"\xef\xbb\xbf \n{") is FORMATS["chrome_json"]
    assert sniff(b"[{") is FORMATS["chrome_json"]
    assert sniff(b"\x1f\x8b\x08") is FORMATS["chrome_json"]
    assert sniff(b"\x0a\x12\x08") is FORMATS["pftrace"]
    for head in (b"", b"\n\n", b"PK\x03\x04", b"\x00"):
        assert sniff(head) is None


def test_readers_and_writers_live_in_their_layers() -> None:
    """The registry names its callables as strings (it imports no layer): each resolves, in the right package."""
    for f in FORMATS.values():
        for ref, package in ((f.reader, "neuron_prof.loaders."), (f.writer, "neuron_prof.exporters.")):
            if ref is None:
                continue
            module, _, name = ref.partition(":")
            assert module.startswith(package), ref
            assert callable(getattr(importlib.import_module(module), name)), ref
    assert all(f.reader or f.writer for f in FORMATS.values())


# ---- no other spelling of a suffix -------------------------------------------------------------------------
_NEURON_NAMES = ("spells the Neuron runtime's and Neuron Explorer's own file names (ntrace.pb, a runtime "
                 "folder's trace.json, system_profile.json, ...): fixed by those tools, not a trace suffix rule")
ALLOWED = {
    "neuron_prof/backends/probes/runtime_profile.py": _NEURON_NAMES,
    "neuron_prof/emulator/_api.py": _NEURON_NAMES,
    "neuron_prof/emulator/_explorer_view.py": _NEURON_NAMES,
    "neuron_prof/emulator/_runtime_capture.py": _NEURON_NAMES,
    "neuron_prof/emulator/profiling/host_usage.py": _NEURON_NAMES,
    "neuron_prof/loaders/explorer/capture.py": _NEURON_NAMES,
    "neuron_prof/loaders/explorer/legacy_json.py": _NEURON_NAMES,
    "neuron_prof/loaders/explorer/reader.py": _NEURON_NAMES,
    "neuron_prof/job/_findings.py": "advice text naming merged.pftrace in a command; the findings module is "
                                    "frozen while finding kinds are reworked (issue 31)",
}
"""Shipped modules that may spell a trace suffix in a string (docstrings never count), and why."""
_SUFFIX = re.compile("(?:" + "|".join(re.escape(s) for s in sorted({*TRACE_SUFFIXES, ".gz"}, key=len, reverse=True))
                     + r")(?![\w-]|\.\w)", re.IGNORECASE)
"""A suffix ending a name (`trace.json`, `*.pb`, `.json.gz`), not a module path (`loaders.json.reader`)."""


def _spellings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for folder in (ROOT / "neuron_prof", ROOT / "exporters", ROOT / "tui"):
        for p in sorted(folder.rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel == "neuron_prof/formats.py":
                continue
            tree = ast.parse(p.read_text(), rel)
            docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
            for n in ast.walk(tree):
                if not isinstance(n, ast.Constant) or id(n) in docs:
                    continue
                if (isinstance(n.value, str) and _SUFFIX.search(n.value)) or (
                        isinstance(n.value, bytes) and b"\x1f\x8b" in n.value):
                    out.setdefault(rel, []).append(f"{rel}:{n.lineno}: {n.value!r}")
    return out


def test_no_shipped_module_spells_a_trace_suffix() -> None:
    found = _spellings()
    bad = [line for rel, lines in found.items() if rel not in ALLOWED for line in lines]
    assert not bad, "use neuron_prof.formats instead of spelling a suffix or magic:\n" + "\n".join(bad)
    assert not set(ALLOWED) - set(found), "allowed but no longer needed: " + ", ".join(set(ALLOWED) - set(found))


def test_the_scan_sees_a_spelled_suffix() -> None:
    assert _SUFFIX.search("x.endswith(('.json', '.json.gz'))") and _SUFFIX.search("t.perfetto-trace")
    assert _SUFFIX.search("merged.PFTRACE") and _SUFFIX.search("*.pb")
    assert not _SUFFIX.search("neuron_prof.loaders.json.reader") and not _SUFFIX.search("orjson")
