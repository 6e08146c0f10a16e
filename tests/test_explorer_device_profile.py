"""``profile(device_profile=...)`` on Trainium: NeuronConfig as experimental_config, export through
NeuronProfiler, neuron-explorer after the block (or the command to run), the device timeline joined into the
session's trace. torch_neuronx.profiling and neuron-explorer are fakes with the documented shapes
(tests/fakes)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity

import neuron_prof
import tests.fakes.fake_neuron_profiling as fnp
import tests.fakes.fake_neuronx as fk
from neuron_prof.backends.neuron import NeuronBackend
from neuron_prof.capture import CaptureWarning
from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer import EXPLORER_KEY
from neuron_prof.model import Meta, TrackKind


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> fk.FakeNeuronx:
    f = fk.FakeNeuronx()
    fnp.install(f.module)
    monkeypatch.setitem(sys.modules, "torch_neuronx", f.module)
    return f


def _run(out: Path, **kw: object) -> neuron_prof.Session:
    x = torch.randn(32, 32)
    with neuron_prof.profile(out / "trace.json", backend="neuron", quiet=True, **kw) as s:
        for _ in range(3):
            x @ x
    return s


def _mm_links(tr) -> tuple[list[int], list[int]]:
    mm = [r for r in range(len(tr.slices)) if tr.slice_name(r) == "aten::mm"]
    src = sorted(int(a) for a, z in zip(tr.flows.src, tr.flows.dst) if tr.slice_name(int(z)) == "nrt_execute")
    return mm, src


def test_captured_processed_and_joined_into_the_session_trace(tmp_path: Path, fake: fk.FakeNeuronx,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    fnp.write_explorer(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    s = _run(tmp_path, device_profile=tmp_path / "np")
    tr = s.trace
    caps = sorted((tmp_path / "np").glob(f"{fnp.INSTANCE}_pid_{os.getpid()}/*/trace.json"))
    assert len(caps) == 1 and (caps[0].parent / "ntrace.pb").exists()  # NeuronProfiler wrote the capture
    mm, src = _mm_links(tr)
    assert len(mm) == 3 and src == mm  # the host ops once, each linked to its runtime execution
    assert "neuron:0 tensor engine" in {tr.tracks[int(i)].name for i in tr.track_ids(TrackKind.DEVICE)}
    md = tr.metadata
    assert md["device_profile"]["processed"] == [str(caps[0].parent)] and not md["device_profile"]["to_run"]
    assert md[EXPLORER_KEY]["framework_join"]["joined"] == 3
    assert any("1001 trace events were dropped" in w for w in md[Meta.WARNINGS])  # neuron-explorer said so
    assert not md[Meta.PROBE_ERRORS] and (tmp_path / "trace.pftrace").exists()  # both files written
    # the folder loads later as the same one trace
    later = load(caps[0].parent.parent)
    assert _mm_links(later)[1] == _mm_links(later)[0] and len(_mm_links(later)[0]) == 3
    # and the output folder is a job of one rank per pid folder for the job summary
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "np"), "--workers", "0"]) == 0
    assert "1 rank(s)" in capsys.readouterr().out


def test_without_neuron_explorer_the_command_is_printed(tmp_path: Path, fake: fk.FakeNeuronx,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    s = _run(tmp_path, device_profile=True, probes=["compile"])  # a probe selection keeps the device profile
    err = capfd.readouterr().err
    cap = next((tmp_path / "neuron_profile").glob("*_pid_*/*/"))
    cmd = f"neuron-explorer view -d {cap} --output-format parquet --output-file {cap}/parquet"
    assert "neuron-explorer is not on PATH" in err and cmd in err
    assert f"neuron-prof summary {cap.parent}" in err
    assert s.trace.metadata["device_profile"]["to_run"] == [cmd]
    assert fnp.explorer_main(cmd.split()[1:]) == 0  # the user runs it, then loads the pid folder
    mm, src = _mm_links(load(cap.parent))
    assert len(mm) == 3 and src == mm


def test_privateuse1_is_asked_for_only_with_a_device_profile(tmp_path: Path, fake: fk.FakeNeuronx,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """On hardware the PrivateUse1 activity starts the runtime's capture (files, ~5 GB HBM): opt-in."""
    monkeypatch.setattr(torch.profiler, "supported_activities",
                        lambda: {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1})
    assert NeuronBackend(fake.module).profiler_options() == {"activities": [ProfilerActivity.CPU]}
    be = NeuronBackend(fake.module)
    be.enable_device_profile(tmp_path / "np")
    opts = be.profiler_options()
    assert opts["activities"] == [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    cfg = opts["experimental_config"]
    assert isinstance(cfg, fnp.NeuronConfig) and cfg.profile_output_dir == str(tmp_path / "np")
    assert cfg.modes == [fnp.ProfileMode.DEVICE, fnp.ProfileMode.RUNTIME]


def test_device_profile_on_another_backend_is_a_warning_not_an_error(tmp_path: Path) -> None:
    with pytest.warns(CaptureWarning, match="device_profile needs the neuron backend"):
        with neuron_prof.profile(tmp_path / "t.json", backend="cpu", device_profile=True, quiet=True) as s:
            torch.ones(4).sum()
    assert s.trace is not None and not (tmp_path / "neuron_profile").exists()


def test_a_torch_neuronx_without_the_profiling_api_records_why(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    f = fk.FakeNeuronx()  # no profiling submodule: an older release
    monkeypatch.setitem(sys.modules, "torch_neuronx", f.module)
    with pytest.warns(CaptureWarning, match="no profiling.NeuronConfig"):
        s = _run(tmp_path, device_profile=True)
    assert s.trace is not None and len(_mm_links(s.trace)[0]) == 3  # the host trace is still there


def test_another_ranks_capture_beside_ours_is_not_taken(tmp_path: Path, fake: fk.FakeNeuronx) -> None:
    """Ranks share the output folder: a trace.json another process wrote at the same moment is not ours."""
    from neuron_prof.backends.probes.device_profile import DeviceProfileProbe

    other = tmp_path / "np" / f"{fnp.INSTANCE}_pid_1" / "t" / "trace.json"

    def export(prof: object) -> None:  # NeuronProfiler of this process, while rank 1 writes its own after
        mine = tmp_path / "np" / f"{fnp.INSTANCE}_pid_{os.getpid()}" / "t" / "trace.json"
        mine.parent.mkdir(parents=True)
        mine.write_text("{}")
        other.parent.mkdir(parents=True)
        other.write_text("{}")
        os.utime(other, (mine.stat().st_mtime + 0.5, mine.stat().st_mtime + 0.5))  # the newest file

    probe = DeviceProfileProbe(tmp_path / "np", export)
    got = probe.export_cycle(object())
    assert got is not None and got.parent.parent.name.endswith(f"_pid_{os.getpid()}")
