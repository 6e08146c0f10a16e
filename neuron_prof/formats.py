"""The trace formats: every fact about each one lives here, once.

    fmt = format_for("run/t.json.gz")            # "chrome_json" (UsageError for a name of no trace format)
    split_suffix(Path("t.rank0.json.gz"))        # ("t.rank0", ".json.gz")
    rank_path(Path("run/t.pftrace"), 3)          # run/t.rank3.pftrace
    companion_pftrace(Path("run/t.rank0.json"))  # run/t.rank0.pftrace: the native trace written beside a JSON
    sniff(first_bytes)                           # the format the content says, or None

A format names its reader and its writer as "module:function" strings: the loaders and the exporters import
them (`neuron_prof.loaders.load`, `neuron_prof.exporters.write_trace`), so this leaf module imports none of
our layers. A new format is one `TraceFormat` here, its reader in `neuron_prof/loaders/` and its writer in
`exporters/`; tests/test_formats.py round-trips every suffix listed here and fails when a shipped module
spells a trace suffix of its own.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from neuron_prof.errors import UsageError

__all__ = [
    "CHROME_JSON", "DEFAULT_OUTPUT", "EXPLORER", "EXPLORER_PFTRACE", "FORMATS", "GZIP_MAGIC", "JSON_SUFFIXES",
    "PARQUET", "PFTRACE", "PFTRACE_SUFFIXES", "TRACE_SUFFIXES", "TraceFormat", "companion_pftrace", "detect", "format_for",
    "gzipped", "named_format", "rank_path", "sniff", "split_suffix", "suffix_list", "tool_format",
]


@dataclass(frozen=True)
class TraceFormat:
    """One trace format: how files of it are named and recognised, and what reads and writes it."""

    id: str
    """Stable id: `write_trace(fmt=...)`, `neuron-prof export --format`."""
    title: str
    suffixes: tuple[str, ...] = ()
    """File names that mean this format, lower case, the usual one first; empty for a folder format."""
    reader: str | None = None
    """"module:function" in neuron_prof.loaders taking a path and returning a Trace; None: not loadable."""
    writer: str | None = None
    """"module:function" in neuron_prof.exporters taking (trace, path); None: not written by us."""
    mime: str = "application/octet-stream"
    """What `neuron-prof open` serves it as (a gzip file is served as gzip)."""
    folder: bool = False
    """A folder of files rather than one file."""
    markers: tuple[str, ...] = ()
    """Glob patterns of files whose presence makes a folder one trace of this format."""
    names: tuple[str, ...] = ()
    """Glob patterns of whole file names another tool gives files of this format (read only: `detect`); they
    win over the suffix, as the content of such a file is also another format's (a .pftrace)."""


CHROME_JSON = TraceFormat(
    "chrome_json", "Chrome/Kineto JSON", (".json", ".json.gz"),
    reader="neuron_prof.loaders.json.reader:load_kineto_json",
    writer="neuron_prof.exporters.chrome_json:write_chrome_json", mime="application/json")
PFTRACE = TraceFormat(
    "pftrace", "Perfetto protobuf", (".pftrace", ".perfetto-trace", ".pb"),
    reader="neuron_prof.loaders.pftrace.reader:load_pftrace",
    writer="neuron_prof.exporters.perfetto:write_pftrace")
PARQUET = TraceFormat(
    "parquet", "Parquet tables (one folder; a job: one dataset partitioned by rank)",
    writer="neuron_prof.exporters.parquet:write_parquet", folder=True)
EXPLORER = TraceFormat(
    "explorer", "Neuron Explorer profile folder (processed Parquet tables, or the legacy JSON export)",
    reader="neuron_prof.loaders.explorer:load_dir", folder=True,
    markers=("*.parquet", "*.ntff", "ntrace.pb", "system_profile.json", "system_profile.pftrace",
             "device_profile_model_*.pftrace"))
EXPLORER_PFTRACE = TraceFormat(
    "explorer_pftrace", "Neuron Explorer Perfetto output (system_profile.pftrace, device_profile_model_<id>.pftrace)",
    reader="neuron_prof.loaders.explorer.perfetto:load_explorer_pftrace",
    names=("system_profile.pftrace", "device_profile_model_*.pftrace"))

DEFAULT_OUTPUT = "trace.json"
"""Where a capture writes when not told (`profile()`, `neuron-prof run`, `demo`): Chrome JSON, with the native
trace beside it."""

FORMATS: dict[str, TraceFormat] = {f.id: f for f in (CHROME_JSON, PFTRACE, PARQUET, EXPLORER, EXPLORER_PFTRACE)}
"""Every format by id."""
JSON_SUFFIXES = CHROME_JSON.suffixes
PFTRACE_SUFFIXES = PFTRACE.suffixes
TRACE_SUFFIXES: tuple[str, ...] = PFTRACE.suffixes + CHROME_JSON.suffixes
"""Every trace file suffix, the preferred first when one rank was written in several formats (the native
trace loads fastest; plain JSON before gzipped)."""
_BY_LENGTH = sorted(TRACE_SUFFIXES, key=len, reverse=True)  # ".json.gz" is tried before ".json"
GZIP_MAGIC = b"\x1f\x8b"
_GZIP_SUFFIX = ".gz"
_PB_PACKET_TAG = 0x0A
"""A Perfetto trace is a stream of `packet` fields: field 1, length-delimited."""
_TEXT_PAD = b"\xef\xbb\xbf \t\r\n"
"""What may come before a JSON document's first bracket: a UTF-8 BOM and whitespace."""


def split_suffix(path: str | os.PathLike[str]) -> tuple[str, str]:
    """("trace", ".json.gz") for trace.json.gz (the suffix as written); ("name", "") for no trace suffix."""
    name = Path(path).name
    low = name.lower()
    for suf in _BY_LENGTH:
        if low.endswith(suf):
            return name[: -len(suf)], name[-len(suf):]
    return name, ""


def named_format(path: str | os.PathLike[str]) -> TraceFormat | None:
    """The format a file name implies, or None when it has no trace suffix."""
    suf = split_suffix(path)[1].lower()
    return next((f for f in FORMATS.values() if suf and suf in f.suffixes), None)


def suffix_list(fmts: tuple[TraceFormat, ...] = (CHROME_JSON, PFTRACE)) -> str:
    """The suffixes of `fmts` in words, for help and error texts: ".json, .json.gz, ... or .pb"."""
    sufs = [s for f in fmts for s in f.suffixes]
    return ", ".join(sufs[:-1]) + f" or {sufs[-1]}" if len(sufs) > 1 else "".join(sufs)


def format_for(path: str | os.PathLike[str]) -> str:
    """The id of the format a file name implies; raises UsageError for a name of no trace format."""
    fmt = named_format(path)
    if fmt is None:
        raise UsageError(f"{path}: cannot tell the trace format from the name (use {suffix_list()})")
    return fmt.id


def rank_path(path: str | os.PathLike[str], rank: int) -> Path:
    """One rank's file of a job: `run/trace.json.gz` -> `run/trace.rank3.json.gz` (the suffix kept last)."""
    p = Path(path)
    stem, suf = split_suffix(p)
    return p.with_name(f"{stem}.rank{rank}{suf}")


def companion_pftrace(path: str | os.PathLike[str]) -> Path | None:
    """The native trace written beside a JSON trace, same folder and stem (`run/t.rank0.json.gz` ->
    `run/t.rank0.pftrace`); None when `path` is not a JSON trace's name."""
    p = Path(path)
    if named_format(p) is not CHROME_JSON:
        return None
    return p.with_name(split_suffix(p)[0] + PFTRACE.suffixes[0])


def gzipped(path: str | os.PathLike[str]) -> bool:
    """True when the name says gzip (`.json.gz`, or any `.gz`): the JSON writers compress it."""
    return Path(path).name.lower().endswith(_GZIP_SUFFIX)


def sniff(head: bytes) -> TraceFormat | None:
    """The format a file's first bytes say: gzip or a JSON bracket (after a BOM and whitespace) is Chrome
    JSON, a protobuf `packet` tag is Perfetto; None when they say neither (or only whitespace)."""
    if head[:2] == GZIP_MAGIC:
        return CHROME_JSON
    text = head.lstrip(_TEXT_PAD)
    if text[:1] in (b"{", b"[") and _json_trace_follows(text[:1], text[1:]):
        return CHROME_JSON
    if text and head[0] == _PB_PACKET_TAG:
        return PFTRACE
    return None


def _json_trace_follows(bracket: bytes, rest: bytes) -> bool:
    """After the first bracket, what a JSON trace has next: a key or the end of an object, an event object or
    the end of a list (or nothing: the head ended). A Perfetto trace starts with its first packet's tag, 0x0a
    (whitespace to `lstrip`), then the packet's length: a packet of 123 or 91 bytes makes that `{` or `[`, and
    what follows is a field's tag, not these."""
    rest = rest.lstrip(_TEXT_PAD)
    return not rest or rest[:1] in (b'"}' if bracket == b"{" else b"{]")


def tool_format(path: str | os.PathLike[str]) -> TraceFormat | None:
    """The format whose `TraceFormat.names` a file's whole name matches (another tool's output), or None."""
    name = Path(path).name
    return next((f for f in FORMATS.values() if any(fnmatch.fnmatchcase(name, g) for g in f.names)), None)


def detect(head: bytes, path: str | os.PathLike[str]) -> TraceFormat | None:
    """The format whose reader gets a file: JSON content first, then a tool's file name when the content is
    its container's (`tool_format`: Neuron Explorer's .pftrace), then the name's suffix, then any other content
    (a `.json` that does not start like JSON is still given to the JSON reader, which says what is wrong)."""
    by_content = sniff(head)
    if by_content is CHROME_JSON:
        return by_content
    tool = tool_format(path)
    if tool is not None and by_content is PFTRACE:
        return tool
    return named_format(path) or by_content
