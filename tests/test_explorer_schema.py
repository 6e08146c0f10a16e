"""Neuron Explorer profiles of any schema version: the reader goes by what the folder declares (SchemaFields,
Metadata.profile_schema_version) and needs only the fields each view uses. Folders are generated from the
schema document (tests/fakes/explorer_schema.py), never from the reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_prof.cli import main
from neuron_prof.errors import TraceFormatError
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Meta, TrackKind
from tests.conftest import SHARED
from tests.fakes.explorer_profile import write_profile
from tests.fakes.explorer_schema import DOC, Field, documented, evolve, write_table

SAME = ("active_time_ns", "collectives", "summary", "opcodes", "executions", "instructions", "framework_ops",
        "source_lines", "host_ops", "hbm_peak_bytes", "errors", "device_clock", "bandwidth_peak_Bps", "events")
"""What must read the same whatever the schema version (metadata["neuron_explorer"] keys)."""


def _schema_12() -> Any:
    """A 12.0.1 as SDK 2.33 might write it: a new table, new fields (required and not), optional fields gone."""
    return evolve(documented(),
                  add={"KernelProfileInfo": {"kernel_name": Field("str", "", True), "calls": Field("i64", "", True)},
                       "ActiveTime": {"lnc_idx": Field("i64", "", True)},
                       "Summary": {"mfu_by_engine_percent": Field("f32", "%", False)},
                       "SystemProfileEvents": {"correlation_id": Field("str", "", False)}},
                  drop={"CcOp": ["replica_group", "bus_bandwidth"], "Instruction": ["hlo_name"],
                        "Metadata": ["driver_version"]})


def _metrics(tr) -> dict[str, Any]:
    ex = tr.metadata[EXPLORER_KEY]
    return {k: ex.get(k) for k in SAME}


@pytest.fixture(scope="module")
def v7(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("v7") / "p"
    write_profile(folder)
    return folder


def test_the_vendored_schema_is_the_document() -> None:
    """The generator reads tests/fakes' copy of the document; the reader's assumed layout is the same text."""
    from neuron_prof.loaders.explorer import _schema_740 as _explorer_schema_740

    shared = SHARED / "design" / "neuron-explorer-schema-7.4.0.txt"
    text = DOC.read_text()
    if shared.is_file():
        assert shared.read_text() == text
    assert _explorer_schema_740.TEXT == text
    assert len(documented()) == 52 and "raw_framework_id" in documented()["Instruction"]


def test_7_4_0_reads_the_same_with_or_without_schema_fields(v7: Path, tmp_path: Path) -> None:
    write_profile(tmp_path / "p", schema_fields=False)
    a, b = load(v7), load(tmp_path / "p")
    assert a.metadata[EXPLORER_KEY]["schema"] == {"version": "7.4.0", "declared_by": "SchemaFields"}
    assert b.metadata[EXPLORER_KEY]["schema"] == {"version": "7.4.0", "declared_by": "assumed"}
    assert _metrics(a) == _metrics(b)
    assert not any("schema" in w for w in a.metadata[Meta.WARNINGS])


def test_12_0_1_with_a_table_and_fields_added_and_optional_fields_gone_reads_the_same(
        v7: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    sch = _schema_12()
    write_profile(folder, version="12.0.1", schema=sch)
    write_table(folder, sch, "KernelProfileInfo", {"kernel_name": ["k"], "calls": [3]}, parts=2, rows=1)
    tr = load(folder)
    warns = [w for w in tr.metadata[Meta.WARNINGS] if "12.0.1" in w]
    assert len(warns) == 1 and "written to schema 7.x" in warns[0] and "SchemaFields" in warns[0]
    assert tr.metadata[EXPLORER_KEY]["schema"] == {"version": "12.0.1", "declared_by": "SchemaFields"}
    ref = load(v7)
    assert _metrics(tr) == _metrics(ref)  # same numbers
    cc = tr.slices_on(TrackKind.COLLECTIVE)
    assert len(cc) == 3 and "ranks" not in tr.slice_args(int(cc[0]))  # the optional field gone: not made up
    assert not [w for w in tr.metadata[Meta.WARNINGS] if "not shown" in w]  # nothing a view needs is gone


def test_cli_says_which_schema_version_was_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_profile(tmp_path / "p", version="12.0.1", schema=_schema_12())
    assert main(["summary", str(tmp_path / "p")]) == 0
    out, err = capsys.readouterr()
    assert "Neuron Explorer schema 12.0.1 (declared by SchemaFields)" in out
    assert err.count("12.0.1") == 1  # one warning naming the version
    assert main(["summary", str(tmp_path / "p"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"]["neuron_explorer"]["schema"] == {"version": "12.0.1", "declared_by": "SchemaFields"}


def test_a_missing_needed_field_leaves_out_only_its_views(v7: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write_profile(folder, version="12.0.1", schema=evolve(documented(), drop={"ActiveTime": ["engine"],
                                                                             "HbmUsage": ["current_throughput"]}))
    tr = load(folder)
    warns = tr.metadata[Meta.WARNINGS]
    assert [w for w in warns if "ActiveTime.engine" in w] == [
        "Neuron Explorer profile has no usable ActiveTime.engine: engine busy time not shown"]
    assert any("HbmUsage.current_throughput" in w and "HBM bandwidth not shown" in w for w in warns)
    names = {t.name for t in tr.tracks}
    assert not [n for n in names if n.endswith(" engine") or n.endswith("HBM bandwidth")]
    ref = _metrics(load(v7))
    got = _metrics(tr)
    for k in SAME:
        if k not in ("active_time_ns", "bandwidth_peak_Bps"):
            assert got[k] == ref[k], k
    assert got["bandwidth_peak_Bps"] == {"neuron:0 DMA bandwidth": ref["bandwidth_peak_Bps"]["neuron:0 DMA bandwidth"]}
    assert tr.metadata[EXPLORER_KEY]["views_left_out"] == ["HBM bandwidth", "engine busy time"]


def test_nothing_usable_is_one_clear_error_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder whose tables keep none of the fields any view needs (renamed in a future MAJOR)."""
    folder = tmp_path / "p"
    sch = evolve(documented(), drop={"SystemProfileEvents": ["start_ts", "trace_event_source"],
                                     "ActiveTime": ["engine"]},
                 add={"SystemProfileEvents": {"begin_ns": Field("i64", "ns", True)}})
    write_table(folder, sch, "Metadata", {"profile_schema_version": ["13.0.0"]})
    write_table(folder, sch, "SystemProfileEvents", {"name": ["nrt_execute"], "begin_ns": [5]})
    write_table(folder, sch, "ActiveTime", {"start_ts": [1], "end_ts": [2]})
    with pytest.raises(TraceFormatError) as e:
        load(folder)
    msg = str(e.value)
    assert "schema 13.0.0" in msg and "nothing neuron-prof can show" in msg
    assert "SystemProfileEvents.start_ts" in msg and "SystemProfileEvents.trace_event_source" in msg
    assert "ActiveTime.engine" in msg
    assert main(["summary", str(folder)]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "nothing neuron-prof can show" in err
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "check", str(folder)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "ActiveTime.engine" in p.stderr


def test_split_tables_unknown_tables_and_unknown_fields_load(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    sch = evolve(documented(), add={"Brand_New": {"x": Field("i64", "", True)},
                                    "ActiveTime": {"extra_field": Field("str", "", True)}})
    w = write_profile(folder, version="7.9.2", schema=sch)
    write_table(folder, sch, "Brand_New", {"x": [1, 2, 3]}, parts=3)
    # a table split across more files than the generator wrote, with a part of its own
    t = pq.read_table(folder / "ActiveTime_1.parquet")
    pq.write_table(t.slice(0, 1), folder / "ActiveTime_1.parquet")
    pq.write_table(t.slice(1), folder / "ActiveTime_2.parquet")
    tr = load(folder)
    assert tr.metadata[EXPLORER_KEY]["active_time_ns"] == w.busy_ns
    assert not any("7.9.2" in m for m in tr.metadata[Meta.WARNINGS])  # a newer MINOR: nothing to say
    assert "Brand_New" not in tr.metadata[EXPLORER_KEY]["tables"] and "extra_field" not in str(tr.metadata)


def test_a_field_held_as_text_leaves_its_view_out(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write_profile(folder)
    t = pq.read_table(folder / "HbmUsage.parquet")
    t = t.set_column(t.column_names.index("current_throughput"), "current_throughput",
                     pa.array(["fast"] * t.num_rows))
    pq.write_table(t, folder / "HbmUsage.parquet")
    tr = load(folder)
    assert any("HbmUsage.current_throughput" in m for m in tr.metadata[Meta.WARNINGS])
    assert "neuron:0 HBM bandwidth" not in {x.name for x in tr.tracks}
    assert "neuron:0 DMA bandwidth" in {x.name for x in tr.tracks}
