"""Neuron Explorer's legacy JSON export (system_profile.json, shaped as AWS's get-started guide shows
it) loads what it has and says what it lacks."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.model import Meta, TrackKind

T0 = 1729888371056597613
RUNTIME = [{"duration": 27094 + k, "group": "nrt-nc-000", "id": k + 1, "instance_id": "i-0f207fb2a99bd2d08",
            "name": "nrt_tensor_write" if k % 2 else "nrt_execute", "timestamp": T0 + k * 100_000, "type": 11}
           for k in range(4)]
FRAMEWORK = [{"duration": 3758079, "group": "framework-80375131", "instance_id": "i-0f207fb2a99bd2d08",
              "name": "PjitFunction(matmul_allgather)", "timestamp": T0 - 1_000_000}]
MEM = [{"timestamp": T0 + k * 500_000, "used_bytes": 1000 + k} for k in range(3)]


def _slices(tr) -> list[tuple[str, str, int, int]]:
    return sorted((tr.tracks[int(tr.slices.track[r])].name, tr.slice_name(r), int(tr.slices.ts_ns[r]),
                   int(tr.slices.dur_ns[r])) for r in range(len(tr.slices)))


def _expected() -> list[tuple[str, str, int, int]]:
    return sorted((e["group"], e["name"], e["timestamp"], e["duration"]) for e in RUNTIME + FRAMEWORK)


@pytest.mark.parametrize("shape", ["by_type", "list_of_objects"])
def test_events_load_on_a_track_per_group(tmp_path: Path, shape: str) -> None:
    if shape == "by_type":
        doc = {"Neuron_Runtime_API_Event": RUNTIME, "Framework_Event": FRAMEWORK[0], "mem_usage": MEM}
    else:
        doc = [{"Neuron_Runtime_API_Event": e} for e in RUNTIME] + [{"Framework_Event": FRAMEWORK[0]}]
    path = tmp_path / "system_profile.json"
    path.write_bytes(orjson.dumps(doc))
    (tmp_path / "device_profile_model_7.json").write_text("{}")
    tr = load(tmp_path)  # the folder the export wrote
    assert _slices(tr) == _expected()
    assert {tr.s(int(c)) for c in tr.slices.cat} == {"Neuron_Runtime_API_Event", "Framework_Event"}
    md = tr.metadata
    assert md[Meta.CLOCK] == "unix" and md[Meta.SOURCE_FORMAT] == "neuron_explorer_json"
    assert any("partial" in w and "collectives" in w for w in md[Meta.WARNINGS])
    # the 2.34 announcement: the full-profile JSON is no longer maintained; still read, and said
    assert any("no longer maintained from Neuron 2.34" in w and "summary-json remains" in w
               for w in md[Meta.WARNINGS])
    assert any("device_profile_model_7.json not read" in w for w in md[Meta.WARNINGS])
    if shape == "by_type":
        cnt = [int(t) for t in tr.track_ids(TrackKind.COUNTER)]
        assert [tr.tracks[t].name for t in cnt] == ["mem_usage used_bytes"]
        assert tr.counters.value.tolist() == [1000.0, 1001.0, 1002.0]


def test_a_renamed_export_is_recognised_and_bad_ones_are_clear_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "integrated_trace.json"  # --output-file names it
    path.write_bytes(orjson.dumps({"Neuron_Runtime_API_Event": RUNTIME}))
    assert len(load(path).slices) == 4
    assert main(["summary", str(path)]) == 0
    assert "partial" in capsys.readouterr().err
    (tmp_path / "system_profile.json").write_bytes(orjson.dumps({"mem_usage": MEM}))
    assert main(["summary", str(tmp_path / "system_profile.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Neuron Explorer event objects" in err
