"""The Neuron runtime's capture in a session, on Trainium's documented API: the system profile by default
(``NeuronConfig(modes=[RUNTIME], profile_output_dir=RUN_DIR, neff_cache_dir=<the job's NEFF cache>)``), the device
profile in its own cycle for a window of steps (after 3 warm-up steps, or NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP),
the run directory processed once by neuron-explorer (or the command printed), and no second capture when the user
set ``NEURON_RT_INSPECT_ENABLE=1``. torch_neuronx.profiling and neuron-explorer are fakes with the documented shapes
(tests/fakes); the documents: docs/trainium.md, "Capture"."""

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
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Meta


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> fk.FakeNeuronx:
    f = fk.FakeNeuronx()
    fnp.install(f.module)
    fnp.NeuronProfiler.exports.clear()
    fnp.NeuronProfiler.configs.clear()
    fnp.NeuronProfiler.with_modules.clear()
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR", raising=False)
    monkeypatch.setitem(sys.modules, "torch_neuronx", f.module)
    for k in [k for k in os.environ if k.startswith("NEURON_RT_INSPECT_")]:
        monkeypatch.delenv(k)
    return f


def _run(out: Path, steps: int = 3, **kw: object) -> neuron_prof.Session:
    x = torch.randn(32, 32)
    with neuron_prof.profile(out / "trace.json", backend="neuron", quiet=True, **kw) as s:
        for _ in range(steps):
            x @ x
            s.step()
    return s


def _mm_links(tr) -> tuple[list[int], list[int]]:
    mm = [int(r) for r in tr.slices_on("thread") if tr.slice_name(int(r)) == "aten::mm"]  # host ops (not the
    # fallback probe's slice for the mm whose work copied to the host: the fake profile's dmem_buf_copyout)
    src = sorted(int(a) for a, z in zip(tr.flows.src, tr.flows.dst) if tr.slice_name(int(z)) == "nrt_execute")
    return mm, src


def test_the_system_profile_is_captured_and_processed_by_default(tmp_path: Path, fake: fk.FakeNeuronx,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fnp.write_explorer(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    s = _run(tmp_path, profile_dir=tmp_path / "np")  # no option but where it goes
    (cfg,) = fnp.NeuronProfiler.configs
    assert cfg.modes == [fnp.ProfileMode.RUNTIME] and cfg.profile_output_dir == str(tmp_path / "np")
    assert cfg.neff_cache_dir == "/tmp/neff_cache"  # the compiler's cache, TORCH_NEURONX_NEFF_CACHE_DIR's default
    assert fnp.NeuronProfiler.with_modules == [False]  # not a documented argument with NeuronConfig
    (cap,) = fnp.NeuronProfiler.exports
    assert (cap / "ntrace.pb").exists() and not list(cap.glob("*.ntff"))  # no device profile, no HBM reserved
    # one neuron-explorer call for the whole run directory: Parquet only (the programmatic output; 2.34 no longer
    # maintains the JSON one), and no device profile processed, as none was asked for ("Skip device profiles
    # (faster, system-only view)": how-to-profile-workload.rst)
    calls = (tmp_path / fnp.CALLS).read_text().splitlines()
    assert calls == [f"view -d {tmp_path / 'np'} --output-format parquet --output-file {tmp_path / 'np' / 'parquet'} "
                     "--ignore-device-profile"]
    tr = s.trace
    mm, src = _mm_links(tr)
    assert len(mm) == 3 and src == mm  # the host ops once, each linked to its runtime execution
    md = tr.metadata
    assert md["runtime_profile"]["processed"] is True and md["runtime_profile"]["cycle_modes"] == [["RUNTIME"]]
    assert md[EXPLORER_KEY]["framework_join"]["joined"] == 3
    assert any("1001 trace events were dropped" in w for w in md[Meta.WARNINGS])  # neuron-explorer said so
    assert not md[Meta.PROBE_ERRORS] and (tmp_path / "trace.pftrace").exists()
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "np")]) == 0  # the run directory loads later


def test_the_device_profile_is_its_own_cycle_in_the_window(tmp_path: Path, fake: fk.FakeNeuronx,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fnp.write_explorer(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    s = _run(tmp_path, steps=6, device_profile=(2, 4), profile_dir=tmp_path / "np")
    modes = [[m.name for m in c.modes] for c in fnp.NeuronProfiler.configs]
    assert modes == [["RUNTIME"], ["DEVICE", "RUNTIME"], ["RUNTIME"]]  # steps 0-1, 2-3 (window), 4-5
    assert [len(list(c.glob("*.ntff"))) for c in fnp.NeuronProfiler.exports] == [0, 1, 0]
    (call,) = (tmp_path / fnp.CALLS).read_text().splitlines()  # still processed once, the device profile too
    assert "--output-format parquet" in call and "--ignore-" not in call
    assert s.trace is not None and s.trace.metadata["runtime_profile"]["device_profile_steps"] == [2, 4]
    assert len(_mm_links(s.trace)[0]) == 6  # every cycle's host ops are in the trace


def test_device_profile_true_opens_after_the_warm_up_steps(tmp_path: Path, fake: fk.FakeNeuronx,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiling how-to: warm up 3 or more iterations before the device profile; SDK 2.33's
    NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP sets the count (and alone starts no capture of the runtime's)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    _run(tmp_path, steps=4, device_profile=True, profile_dir=tmp_path / "np")
    modes = [[m.name for m in c.modes] for c in fnp.NeuronProfiler.configs]
    assert modes == [["RUNTIME"], ["DEVICE", "RUNTIME"]]
    n = [len(_mm_links(neuron_prof.load(c / "trace.json"))[0]) for c in fnp.NeuronProfiler.exports]
    assert n == [3, 1]  # three warm-up steps before the window
    fnp.NeuronProfiler.configs.clear()
    fnp.NeuronProfiler.exports.clear()
    monkeypatch.setenv("NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP", "5")
    _run(tmp_path, steps=7, device_profile=True, profile_dir=tmp_path / "np5")
    n = [len(_mm_links(neuron_prof.load(c / "trace.json"))[0]) for c in fnp.NeuronProfiler.exports]
    assert n == [5, 2]


def test_the_neff_cache_given_is_the_one_the_job_uses(tmp_path: Path, fake: fk.FakeNeuronx,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """NeuronConfig's neff_cache_dir: "cached NEFFs are copied into the profile artifact directory on stop";
    the compiler's cache is TORCH_NEURONX_NEFF_CACHE_DIR (default /tmp/neff_cache): never a new empty folder."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "jobcache"))
    s = _run(tmp_path, device_profile=(0, None), profile_dir=tmp_path / "np")
    assert [c.neff_cache_dir for c in fnp.NeuronProfiler.configs] == [str(tmp_path / "jobcache")]
    assert s.trace.metadata["runtime_profile"]["neff_cache_dir"] == str(tmp_path / "jobcache")
    assert not (tmp_path / "np" / "neff_cache").exists()


def test_without_neuron_explorer_the_command_is_printed(tmp_path: Path, fake: fk.FakeNeuronx,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("NEURON_PROF_CACHE_DIR", str(tmp_path / "cache"))
    s = _run(tmp_path, probes=["compile"])  # a probe selection keeps the runtime's capture
    err = capfd.readouterr().err
    (run,) = list((tmp_path / "cache" / "neuron-runs").iterdir())  # in the cache by default
    cmd = f"neuron-explorer view -d {run} --output-format parquet --output-file {run}/parquet --ignore-device-profile"
    assert "neuron-explorer is not on PATH" in err and cmd in err
    assert s.trace.metadata["runtime_profile"]["to_run"] == [cmd]
    assert fnp.explorer_main(cmd.split()[1:]) == 0  # the user runs it, then loads the run directory
    mm, src = _mm_links(load(run))
    assert len(mm) == 3 and src == mm


def test_privateuse1_and_the_config_on_the_docs_api(tmp_path: Path, fake: fk.FakeNeuronx,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On hardware the PrivateUse1 activity starts the runtime's capture: asked for with its config."""
    monkeypatch.setattr(torch.profiler, "supported_activities",
                        lambda: {ProfilerActivity.CPU, ProfilerActivity.PrivateUse1})
    assert NeuronBackend(fake.module).profiler_options() == {"activities": [ProfilerActivity.CPU]}
    be = NeuronBackend(fake.module)
    be.enable_runtime_profile(tmp_path / "np")
    opts = be.profiler_options()
    assert opts["activities"] == [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    cfg = opts["experimental_config"]
    assert isinstance(cfg, fnp.NeuronConfig) and cfg.profile_output_dir == str(tmp_path / "np")
    assert cfg.modes == [fnp.ProfileMode.RUNTIME]


def test_the_april_api_shape_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The April source's NeuronProfiler context manager (no NeuronConfig) needs torch ~=2.10 and Python < 3.11:
    it cannot be installed beside neuron-prof, so the adapter knows only the documented API."""
    import types

    f = fk.FakeNeuronx()
    prof = types.ModuleType("torch_neuronx.profiling")

    class AprilNeuronProfiler:  # the April shape: a context manager, no NeuronConfig, no export_trace
        def __enter__(self) -> AprilNeuronProfiler:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    prof.NeuronProfiler = AprilNeuronProfiler  # type: ignore[attr-defined]
    f.module.profiling = prof  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_neuronx", f.module)
    be = NeuronBackend(f.module)
    be.enable_runtime_profile(tmp_path / "np", (2, None))
    assert "experimental_config" not in be.profiler_options() and be.cycle_boundaries() == []
    with pytest.warns(CaptureWarning, match="no profiling API"):
        s = _run(tmp_path, device_profile=True, profile_dir=tmp_path / "np2")
    assert s.trace is not None and s.trace.metadata["runtime_profile"]["api"] is None


def test_neuron_rt_inspect_set_means_no_second_capture(tmp_path: Path, fake: fk.FakeNeuronx,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK docs: do not set NEURON_RT_INSPECT_ENABLE=1 while using torch.profiler; the other
    NEURON_RT_INSPECT_* variables have no effect without it."""
    monkeypatch.setenv("NEURON_RT_INSPECT_ENABLE", "1")
    monkeypatch.setenv("NEURON_RT_INSPECT_OUTPUT_DIR", str(tmp_path / "theirs"))
    with pytest.warns(CaptureWarning, match="NEURON_RT_INSPECT_ENABLE=1.*no second capture"):
        s = _run(tmp_path, device_profile=True, profile_dir=tmp_path / "np")
    assert fnp.NeuronProfiler.configs == [] and not (tmp_path / "np").exists()
    md = s.trace.metadata["runtime_profile"]
    assert md["NEURON_RT_INSPECT"]["NEURON_RT_INSPECT_ENABLE"] == "1" and md["captures"] == []
    assert len(_mm_links(s.trace)[0]) == 3  # the host trace is all there
    monkeypatch.setenv("NEURON_RT_INSPECT_ENABLE", "0")  # switched off: not a conflict
    fnp.NeuronProfiler.configs.clear()
    _run(tmp_path, profile_dir=tmp_path / "np")
    assert len(fnp.NeuronProfiler.configs) == 1
    # the other NEURON_RT_INSPECT_* variables have no effect without NEURON_RT_INSPECT_ENABLE=1: no conflict
    monkeypatch.delenv("NEURON_RT_INSPECT_ENABLE")
    monkeypatch.setenv("NEURON_RT_INSPECT_DEVICE_PROFILE", "session")
    fnp.NeuronProfiler.configs.clear()
    s = _run(tmp_path, profile_dir=tmp_path / "np3")
    assert len(fnp.NeuronProfiler.configs) == 1 and s.trace.metadata["runtime_profile"]["NEURON_RT_INSPECT"] is None


def test_device_profile_on_another_backend_is_a_warning_not_an_error(tmp_path: Path) -> None:
    with pytest.warns(CaptureWarning, match="device_profile needs the neuron backend"):
        with neuron_prof.profile(tmp_path / "t.json", backend="cpu", device_profile=True, quiet=True) as s:
            torch.ones(4).sum()
    assert s.trace is not None and not (tmp_path / "neuron_profile").exists()


def test_a_torch_neuronx_without_the_profiling_api_records_why(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    f = fk.FakeNeuronx()  # no profiling submodule: an older release
    monkeypatch.setitem(sys.modules, "torch_neuronx", f.module)
    s = _run(tmp_path, profile_dir=tmp_path / "np")  # by default: a load warning, no CaptureWarning
    assert any("no profiling API" in w for w in s.trace.metadata[Meta.WARNINGS])
    with pytest.warns(CaptureWarning, match="no profiling API"):  # asked for by name: said at once
        s = _run(tmp_path, device_profile=True, profile_dir=tmp_path / "np")
    assert s.trace is not None and len(_mm_links(s.trace)[0]) == 3  # the host trace is still there


def test_another_ranks_capture_beside_ours_is_not_taken(tmp_path: Path, fake: fk.FakeNeuronx) -> None:
    """Ranks may share a profile_dir: a trace.json another process wrote at the same moment is not ours."""
    from neuron_prof.backends.probes.runtime_profile import RuntimeProfileProbe

    other = tmp_path / "np" / f"{fnp.INSTANCE}_pid_1" / "t" / "trace.json"

    class Prof:
        def export_chrome_trace(self, path: str) -> None:
            Path(path).write_text("{}")
            other.parent.mkdir(parents=True, exist_ok=True)
            other.write_text("{}")  # rank 1 writes its own just after
            os.utime(other, (Path(path).stat().st_mtime + 0.5,) * 2)

    probe = RuntimeProfileProbe(tmp_path / "np", fake.module)
    assert probe.experimental_config() is not None
    got = probe.export_cycle(Prof())
    assert got is not None and got.parent.parent.name.endswith(f"_pid_{os.getpid()}")


def test_get_dynamo_metrics_is_read_only_after_the_profiled_region(tmp_path: Path, fake: fk.FakeNeuronx,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """get_dynamo_metrics() synchronizes the device (issue 21): never called inside the profiled steps."""
    import time

    calls: list[int] = []
    inner = fake.module.get_dynamo_metrics
    monkeypatch.setattr(fake.module, "get_dynamo_metrics", lambda: calls.append(time.time_ns()) or inner())
    monkeypatch.setenv("PATH", str(tmp_path))
    s = _run(tmp_path, profile_dir=tmp_path / "np")
    start, end = s.trace.metadata[Meta.WALL]
    assert calls and all(t >= end for t in calls), (start, end, calls)
