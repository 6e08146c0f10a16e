"""Reading a processed Neuron Explorer profile folder: its Parquet tables, a few columns at a time.

Source: shared/design/neuron-explorer-facts.md ("Processing"; aws-neuron-sdk tools/neuron-explorer, schema
7.4.0). A table is ``Name.parquet`` or, when big, split into ``Name_0.parquet``, ``Name_1.parquet``...; every
part is read with only the columns asked for (an ``Instruction`` table can hold 10^8 rows), cast to the
documented type, and columns the schema gained later are never read. A column the caller needs that a
table lacks, or a file that is not Parquet, is a TraceFormatError naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from neuron_prof.errors import TraceFormatError, TraceLoadError

SUPPORTED_MAJOR = 7
"""``Metadata.profile_schema_version`` MAJOR this reader is written to (7.4.0, Neuron SDK 2.31.0)."""
_PART = re.compile(r"^(?P<table>[A-Za-z][A-Za-z0-9]*?)(?:_(?P<part>\d+))?\.parquet$")


def _pa() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # an optional extra: say how to get it
        raise TraceLoadError("pyarrow", "reading Neuron Explorer Parquet needs pyarrow: "
                             "pip install 'neuron-prof[parquet]'") from None
    return pa, pq


def table_parts(folder: Path) -> dict[str, list[Path]]:
    """Table name -> its files in part order (``Name.parquet`` first, then ``Name_0``, ``Name_1``...)."""
    out: dict[str, list[tuple[int, Path]]] = {}
    for f in folder.iterdir():
        m = _PART.match(f.name)
        if m is None or not f.is_file():
            continue
        part = int(m.group("part")) if m.group("part") is not None else -1
        out.setdefault(m.group("table"), []).append((part, f))
    return {k: [f for _, f in sorted(v)] for k, v in out.items()}


def is_explorer_folder(folder: Path) -> bool:
    """True when the folder holds Parquet tables named after Explorer's (Metadata, SystemProfileEvents...)."""
    try:
        names = set(table_parts(folder))
    except OSError:
        return False
    return bool(names & {"Metadata", "SystemProfileEvents", "SystemProfileMetadata", "Summary", "ActiveTime",
                         "CcOp", "Instruction", "SchemaFields"})


class Tables:
    """The tables of one processed profile folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.parts = table_parts(folder)
        self.read: list[str] = []
        """Tables read so far, for the trace's metadata."""

    def has(self, table: str) -> bool:
        return table in self.parts

    def columns(self, table: str) -> set[str]:
        """Union of the column names of the table's parts (reads only the Parquet footers)."""
        _, pq = _pa()
        out: set[str] = set()
        for f in self.parts.get(table, ()):
            out.update(self._schema(pq, f).names)
        return out

    def table(self, table: str, spec: Mapping[str, Any], required: tuple[str, ...] = ()) -> Any | None:
        """The table with the columns of `spec` ({name: pyarrow type}) present in any part, cast to their
        documented types; None when the folder has no such table. Parts missing an optional column get nulls."""
        pa, pq = _pa()
        files = self.parts.get(table)
        if not files:
            return None
        pieces = []
        for f in files:
            names = set(self._schema(pq, f).names)
            lost = [c for c in required if c not in names]
            if lost:
                raise TraceFormatError(f, f"Neuron Explorer table {table} has no column {', '.join(lost)}")
            want = [c for c in spec if c in names]
            try:
                t = pq.read_table(f, columns=want)
            except (OSError, pa.ArrowException) as e:
                raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None
            cols = []
            for c, typ in spec.items():
                if c in names:
                    cols.append(_cast(pa, t.column(c), typ, f, table, c))
                else:
                    cols.append(pa.nulls(t.num_rows, typ))
            pieces.append(pa.table(cols, names=list(spec)))
        self.read.append(table)
        return pa.concat_tables(pieces)

    def batches(self, table: str, columns: list[str], batch_rows: int = 1 << 20) -> Iterator[Any]:
        """Record batches of only `columns` (those present), part after part: for tables too big to hold."""
        pa, pq = _pa()
        for f in self.parts.get(table, ()):
            try:
                pf = pq.ParquetFile(f)
                want = [c for c in columns if c in pf.schema_arrow.names]
                yield from pf.iter_batches(batch_size=batch_rows, columns=want)
            except (OSError, pa.ArrowException) as e:
                raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None
        if table in self.parts:
            self.read.append(table)

    def _schema(self, pq: Any, f: Path) -> Any:
        pa, _ = _pa()
        try:
            return pq.read_schema(f)
        except (OSError, pa.ArrowException) as e:
            raise TraceFormatError(f, f"not a readable Parquet file ({e})") from None


def _cast(pa: Any, col: Any, typ: Any, f: Path, table: str, name: str) -> Any:
    if col.type == typ:
        return col
    try:
        return col.cast(typ)
    except (pa.ArrowException, ValueError):
        raise TraceFormatError(f, f"Neuron Explorer column {table}.{name} is {col.type}, "
                                  f"expected {typ}") from None


def check_version(version: str | None, source: Path) -> list[str]:
    """Warnings for a readable ``profile_schema_version``; TraceFormatError for a MAJOR this reader does not know.

    MAJOR.MINOR.PATCH with MAJOR = incompatible (neuron-explorer-facts "Processing"): a newer MINOR loads.
    """
    if not version:
        return [f"Neuron Explorer profile has no profile_schema_version: read as {SUPPORTED_MAJOR}.x"]
    m = re.match(r"^\s*(\d+)(?:\.(\d+))?", str(version))
    if m is None:
        raise TraceFormatError(source, f"Neuron Explorer profile_schema_version {version!r} is not MAJOR.MINOR.PATCH")
    major = int(m.group(1))
    if major != SUPPORTED_MAJOR:
        raise TraceFormatError(source, f"Neuron Explorer profile schema {version} is not supported (this "
                                       f"neuron-prof reads schema {SUPPORTED_MAJOR}.x); upgrade neuron-prof or "
                                       f"process the capture with a neuron-explorer that writes {SUPPORTED_MAJOR}.x")
    return []
