"""Never lose the trace: a failing exporter, a full disk, a crash mid-write. The user's program is unaffected,
the other format is still written, an older good file is never replaced by half of a new one, no temporary
files are left, and the problem is reported once after the block (or as one line from the CLI)."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

import neuron_prof
from neuron_prof.capture import CaptureWarning
from neuron_prof.cli import main
from tests._builders import json_complete_count, slice_names, tiny_model, train_step
from tests.conftest import pftrace_check

ENOSPC = os.strerror(errno.ENOSPC)


def _disk_full_under(root: Path, real: Any) -> Any:
    """A writer for the real one: under `root` it writes half a file, then the disk is full (ENOSPC)."""

    def writer(trace: Any, path: Any, *a: Any, **k: Any) -> Any:
        p = Path(path)
        if str(p).startswith(str(root)):
            with open(p, "wb") as f:
                f.write(b'{"traceEvents": [{"ph": "X", "na')
            raise OSError(errno.ENOSPC, ENOSPC, str(p))
        return real(trace, path, *a, **k)

    return writer


def _profile(out: Path, **kw: Any) -> tuple[list[float], Any, list[warnings.WarningMessage]]:
    model, opt = tiny_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with neuron_prof.profile(out, quiet=True, with_stack=False, **kw) as prof:
            losses = [train_step(model, opt, i) for i in range(2)]
    return losses, prof, [w for w in caught if issubclass(w.category, CaptureWarning)]


def _ref() -> list[float]:
    model, opt = tiny_model()
    return [train_step(model, opt, i) for i in range(2)]


def _stray(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if ".partial-" in p.name or p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def ref() -> list[float]:
    return _ref()


def test_json_exporter_disk_full_keeps_the_pftrace_and_the_old_json(tmp_path: Path, ref: list[float],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_prof.exporters.chrome_json as cj

    out = tmp_path / "t.json"
    out.write_bytes(b'{"traceEvents": []}')  # last run's trace: a failed write must not cost it
    monkeypatch.setattr(cj, "write_chrome_json", _disk_full_under(tmp_path, cj.write_chrome_json))
    losses, prof, ours = _profile(out)
    assert losses == ref
    assert prof.paths == [tmp_path / "t.pftrace"]
    assert out.read_bytes() == b'{"traceEvents": []}'
    pf = neuron_prof.load(tmp_path / "t.pftrace")
    assert "aten::addmm" in slice_names(pf) and len(pf.slices) == len(prof.trace.slices)
    chk = pftrace_check(tmp_path / "t.pftrace")
    assert chk.returncode == 0, chk.stdout
    assert len(ours) == 1 and f"could not write {out}: {ENOSPC}" in str(ours[0].message)
    assert not _stray(tmp_path)


def test_pftrace_exporter_disk_full_keeps_the_json(tmp_path: Path, ref: list[float],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_prof.exporters.perfetto as pf

    monkeypatch.setattr(pf, "write_pftrace", _disk_full_under(tmp_path, pf.write_pftrace))
    out = tmp_path / "t.json"
    losses, prof, ours = _profile(out)
    assert losses == ref and prof.paths == [out]
    assert json_complete_count(out) == len(prof.trace.slices)  # read with plain json, not our loader
    assert not (tmp_path / "t.pftrace").exists() and not _stray(tmp_path)
    assert len(ours) == 1 and f"could not write {tmp_path / 't.pftrace'}: {ENOSPC}" in str(ours[0].message)


def test_disk_full_where_asked_saves_the_json_in_the_temp_dir(tmp_path: Path, ref: list[float],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_prof.exporters.chrome_json as cj
    import neuron_prof.exporters.perfetto as pf

    monkeypatch.setattr(cj, "write_chrome_json", _disk_full_under(tmp_path, cj.write_chrome_json))
    monkeypatch.setattr(pf, "write_pftrace", _disk_full_under(tmp_path, pf.write_pftrace))
    losses, prof, ours = _profile(tmp_path / "t.json")
    assert losses == ref and len(prof.paths) == 1
    fallback = prof.paths[0]
    try:
        assert not str(fallback).startswith(str(tmp_path))
        assert json_complete_count(fallback) == len(prof.trace.slices)
        msg = str(ours[0].message)
        assert len(ours) == 1 and f"the trace was saved to {fallback} instead" in msg
        assert msg.count(ENOSPC) == 2  # both files named, each once
    finally:
        fallback.unlink()
    assert not _stray(tmp_path)


def test_nothing_writable_anywhere_keeps_the_trace_in_memory(tmp_path: Path, ref: list[float],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import neuron_prof.exporters.chrome_json as cj
    import neuron_prof.exporters.perfetto as pf

    monkeypatch.setattr(cj, "write_chrome_json", _disk_full_under(Path("/"), cj.write_chrome_json))
    monkeypatch.setattr(pf, "write_pftrace", _disk_full_under(Path("/"), pf.write_pftrace))
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning) as rec:
        with neuron_prof.profile(tmp_path / "t.json", with_stack=False) as prof:  # not quiet
            losses = [train_step(model, opt, i) for i in range(2)]
    assert losses == ref and prof.paths == []
    assert prof.trace is not None and "aten::addmm" in slice_names(prof.trace)  # still in memory
    assert len([w for w in rec if w.category is CaptureWarning]) == 1 and str(rec[0].message).count(ENOSPC) == 3
    assert "no trace could be written" in capsys.readouterr().err
    assert not _stray(tmp_path)


@pytest.mark.parametrize("fmt", ["chrome_json", "pftrace"])
def test_a_crash_inside_the_writer_leaves_no_half_file(tmp_path: Path, fmt: str, ref: list[float],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # A bug (not an OSError) in the middle of the real writer, after some bytes went out.
    import neuron_prof.exporters.chrome_json as cj
    import neuron_prof.exporters.perfetto as pf

    if fmt == "chrome_json":
        real = cj._ChromeWriter.blocks

        def blocks(self: Any) -> Any:
            it = real(self)
            yield next(it)
            raise RuntimeError("writer bug")

        monkeypatch.setattr(cj._ChromeWriter, "blocks", blocks)
        kept, lost = tmp_path / "t.pftrace", tmp_path / "t.json"
    else:
        def write(self: Any) -> None:
            self.f.write(b"\x0a\x02half")  # some bytes went out
            raise RuntimeError("writer bug")

        monkeypatch.setattr(pf._Writer, "write", write)
        kept, lost = tmp_path / "t.json", tmp_path / "t.pftrace"
    losses, prof, ours = _profile(tmp_path / "t.json")
    assert losses == ref and prof.paths == [kept]
    assert not lost.exists() and not _stray(tmp_path)
    assert neuron_prof.load(kept).n_events == prof.trace.n_events
    assert len(ours) == 1 and "RuntimeError: writer bug" in str(ours[0].message)


def test_failing_checkpoints_do_not_stop_the_run_or_the_final_trace(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_prof.capture import _outputs

    real = _outputs.write_atomic
    calls: list[str] = []

    def flaky(trace: Any, path: Path) -> None:
        calls.append(path.name)
        if len(calls) <= 2:  # the first checkpoints hit a full disk, the final write succeeds
            raise OSError(errno.ENOSPC, ENOSPC)
        real(trace, path)

    monkeypatch.setattr(_outputs, "write_atomic", flaky)
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning, match=r"checkpoint \(write\)") as rec:
        with neuron_prof.profile(tmp_path / "t.json", active=1, repeat=0, quiet=True, with_stack=False,
                                 pftrace=False) as prof:
            losses = []
            for i in range(4):
                losses.append(train_step(model, opt, i))
                prof.step()
    model2, opt2 = tiny_model()
    assert losses == [train_step(model2, opt2, i) for i in range(4)]
    assert len([w for w in rec if w.category is CaptureWarning]) == 1
    trace = neuron_prof.load(tmp_path / "t.json")
    assert trace.metadata["capture_exit"] == "ok" and trace.metadata["profiler_cycles"] >= 3
    assert {f"ProfilerStep#{i}" for i in range(3)} <= slice_names(trace)
    assert len(calls) >= 3


def test_cli_outputs_on_a_full_disk_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import neuron_prof.exporters.chrome_json as cj
    import neuron_prof.exporters.perfetto as pf
    from tests._bad_inputs import write_kind

    good = write_kind(tmp_path / "in", "overlapping_unsorted")
    real_open = open

    def full_open(file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
        f = real_open(file, mode, *a, **k)
        if "w" in mode and str(file).startswith(str(tmp_path / "out")):
            class Full:
                def __enter__(self) -> Any:
                    return self

                def __exit__(self, *exc: Any) -> None:
                    f.close()

                def write(self, b: bytes) -> int:
                    raise OSError(errno.ENOSPC, ENOSPC)

                def __getattr__(self, name: str) -> Any:
                    return getattr(f, name)

            return Full()
        return f

    (tmp_path / "out").mkdir()
    for mod in (cj, pf):
        monkeypatch.setattr(mod, "open", full_open, raising=False)
    for dst in ("c.pftrace", "c.json", "c.json.gz"):
        out = tmp_path / "out" / dst
        assert main(["convert", str(good), str(out)]) == 2
        _, err = capsys.readouterr()
        assert err.count("\n") == 1 and err.startswith(f"neuron-prof: error: {out}: ") and ENOSPC in err, err
    assert not list((tmp_path / "out").iterdir())  # nothing half-written left
