"""Never break the job, never lose the trace: exceptions, signals, failing probes and exporters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

import neuron_prof
from neuron_prof.backends import register_backend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.capture import CaptureWarning
from neuron_prof.model import Meta, TraceBuilder
from tests._builders import json_complete_count, slice_names, tiny_model, train_step

REPO = Path(__file__).resolve().parents[1]


class FailingBackend:
    """A backend whose every call fails: the session must record each failure and carry on."""

    name = "failing"

    def profiler_options(self) -> dict[str, Any]:
        raise RuntimeError("options exploded")

    def start(self, ctx: CaptureContext) -> None:
        raise RuntimeError("start exploded")

    def stop(self, ctx: CaptureContext) -> None:
        raise OSError(28, "No space left on device")

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext) -> None:
        builder.add_slice(builder.track(builder.process(ctx.host_pid), "half", "other"), ctx.start_ns, 1, "half-done")
        raise KeyError("contribute exploded")


register_backend("failing", f"{__name__}:FailingBackend")


def _run_script(tmp_path: Path, body: str, timeout: float = 120) -> subprocess.Popen[str]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_exception_inside_block_writes_trace_then_reraises(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    model, opt = tiny_model()
    with pytest.raises(ValueError, match="boom at step 1"):
        with neuron_prof.profile(out, quiet=True) as prof:
            for i in range(3):
                train_step(model, opt, i)
                if i == 1:
                    raise ValueError("boom at step 1")
                prof.step()
    trace = neuron_prof.load(out)
    assert trace.metadata["capture_exit"] == "exception: ValueError: boom at step 1"
    # where the user's code raised it: the `raise` line of this file (a job names it for a rank that crashed)
    raise_line = next(i for i, ln in enumerate(Path(__file__).read_text().splitlines(), 1)
                      if 'raise ValueError("boom at step 1")' in ln)
    assert trace.metadata[Meta.EXIT_SITE].endswith(f"test_capture_faults.py:{raise_line}")
    assert "aten::addmm" in slice_names(trace)
    assert (tmp_path / "t.pftrace").exists()


def test_keyboard_interrupt_inside_block_writes_trace(tmp_path: Path) -> None:
    out = tmp_path / "ki.json"
    model, opt = tiny_model()
    with pytest.raises(KeyboardInterrupt):
        with neuron_prof.profile(out, quiet=True):
            train_step(model, opt, 0)
            raise KeyboardInterrupt
    assert neuron_prof.load(out).metadata["capture_exit"] == "KeyboardInterrupt"


def test_failing_backend_is_recorded_not_raised(tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    model, opt = tiny_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with neuron_prof.profile(out, backend="failing", quiet=True) as prof:
            losses = [train_step(model, opt, i) for i in range(2)]
    model2, opt2 = tiny_model()
    assert losses == [train_step(model2, opt2, i) for i in range(2)]  # the program's result is unchanged
    ours = [w for w in caught if issubclass(w.category, CaptureWarning)]
    assert len(ours) == 1  # reported once, after the block
    text = str(ours[0].message)
    assert "start exploded" in text and "No space left" in text and "contribute exploded" in text
    assert ours[0].filename == __file__  # points at the user's `with`, not at neuron-prof internals
    errors = neuron_prof.load(out).metadata["probe_errors"]
    phases = {(e["probe"], e["phase"]) for e in errors}
    assert {("failing", "profiler_options"), ("backend", "start"), ("failing", "stop"),
            ("failing", "contribute")} <= phases
    assert len(errors) == len({(e["probe"], e["phase"], e["error"]) for e in errors})  # each once
    # Kineto's events are all there, and what the backend added before failing is kept.
    trace = prof.trace
    assert "aten::addmm" in slice_names(trace) and "half-done" in slice_names(trace)
    assert json_complete_count(out) == len(trace.slices)


def test_unknown_backend_name_is_recorded(tmp_path: Path) -> None:
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning, match="unknown backend"):
        with neuron_prof.profile(tmp_path / "u.json", backend="nonsense", quiet=True) as prof:
            train_step(model, opt, 0)
    assert prof.trace is not None and "aten::addmm" in slice_names(prof.trace)


def test_unwritable_output_falls_back_to_tempdir(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the output folder should be")
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning) as rec:
        with neuron_prof.profile(blocker / "t.json", quiet=True) as prof:
            result = train_step(model, opt, 0)
    assert isinstance(result, float)
    msg = str(rec[0].message)
    assert f"could not write {blocker / 't.json'}" in msg and "saved to" in msg
    assert len(prof.paths) == 1
    fallback = prof.paths[0]
    try:
        assert fallback.parent != blocker and "aten::addmm" in slice_names(neuron_prof.load(fallback))
        assert str(fallback) in msg
    finally:
        fallback.unlink()


def test_one_failing_file_does_not_stop_the_other(tmp_path: Path) -> None:
    (tmp_path / "t.pftrace").mkdir()  # a directory where the .pftrace should go: that write fails
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning, match=r"could not write .*t\.pftrace"):
        with neuron_prof.profile(tmp_path / "t.json", quiet=True) as prof:
            train_step(model, opt, 0)
    assert prof.paths == [tmp_path / "t.json"]
    assert json_complete_count(tmp_path / "t.json") == len(prof.trace.slices)  # type: ignore[union-attr]
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]  # no half-written files left


def test_sigterm_inside_block_leaves_loadable_trace(tmp_path: Path) -> None:
    proc = _run_script(tmp_path, """
        import sys, torch, neuron_prof
        from torch import nn
        m = nn.Linear(8, 8)
        with neuron_prof.profile("trace.json", quiet=True) as prof:
            i = 0
            while True:
                m(torch.randn(2, 8)).sum().backward()
                prof.step()
                i += 1
                if i == 3:
                    print("ready", flush=True)
        print("not reached")
    """)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err  # the default action still happens
    assert "not reached" not in out
    trace = neuron_prof.load(tmp_path / "trace.json")
    assert trace.metadata["capture_exit"] == "SIGTERM"
    assert len(trace.metadata["steps"]) >= 3, trace.metadata
    assert "aten::addmm" in slice_names(trace), (trace.metadata.get("probe_errors"), err[-2000:])
    assert (tmp_path / "trace.pftrace").exists()


def test_sigterm_inside_the_profilers_step_is_handled_after_it(tmp_path: Path) -> None:
    # A scheduler's SIGTERM may arrive at any instruction. The worst one: inside torch.profiler's step(),
    # after the next ProfilerStep's record_function is made and before its __enter__ sets its record; a
    # stop() there fails ("Expected record to be set") and the trace came out empty. The script makes the
    # signal arrive exactly there, by sending it from a wrapper around that __enter__.
    proc = _run_script(tmp_path, """
        import os, signal, torch, neuron_prof
        from torch import nn
        from torch.autograd import profiler as autograd_profiler
        import threading
        enter = autograd_profiler.record_function.__enter__
        def enter_with_signal(self):
            if self.name == "ProfilerStep#4":  # to this thread: delivered right here, not when another runs
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            return enter(self)
        autograd_profiler.record_function.__enter__ = enter_with_signal
        m = nn.Linear(8, 8)
        with neuron_prof.profile("trace.json", quiet=True) as prof:
            while True:
                m(torch.randn(2, 8)).sum().backward()
                prof.step()
        print("not reached")
    """)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, err
    assert "not reached" not in out
    trace = neuron_prof.load(tmp_path / "trace.json")
    assert trace.metadata["capture_exit"] == "SIGTERM"
    assert len(trace.metadata["steps"]) >= 3, trace.metadata
    assert "aten::addmm" in slice_names(trace), (trace.metadata.get("probe_errors"), err[-2000:])


def test_sigterm_runs_the_users_own_handler_after_saving(tmp_path: Path) -> None:
    proc = _run_script(tmp_path, """
        import os, signal, sys, torch, neuron_prof
        def handler(signum, frame):
            open("handler-ran", "w").write(str(os.path.exists("trace.json")))
            sys.exit(7)
        signal.signal(signal.SIGTERM, handler)
        with neuron_prof.profile("trace.json", quiet=True):
            torch.ones(4, 4).sum()
            os.kill(os.getpid(), signal.SIGTERM)
            torch.ones(2).sum()
        print("after block")
    """)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 7, err
    assert (tmp_path / "handler-ran").read_text() == "True"  # trace saved before the user's handler ran
    assert neuron_prof.load(tmp_path / "trace.json").metadata["capture_exit"] == "SIGTERM"


def test_start_without_stop_is_saved_at_exit(tmp_path: Path) -> None:
    proc = _run_script(tmp_path, """
        import sys, torch, neuron_prof
        neuron_prof.profile("trace.json", quiet=True).start()
        torch.ones(4, 4).sum()
        sys.exit(5)
    """)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    assert neuron_prof.load(tmp_path / "trace.json").metadata["capture_exit"] == "atexit"


def test_disk_full_leaves_exit_code_and_output_unchanged(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes every write past 4 KiB fail with EFBIG, as a full disk fails with ENOSPC.
    proc = _run_script(tmp_path, """
        import resource, signal, sys, torch, neuron_prof
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        with neuron_prof.profile("trace.json", quiet=True):
            total = float(torch.arange(10.).sum())
        print("result", total)
        sys.exit(3)
    """)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert out.strip() == "result 45.0"
    assert "CaptureWarning" in err and "your program was not affected" in err


def test_sigkill_after_some_cycles_keeps_the_checkpoint(tmp_path: Path) -> None:
    # SIGKILL (the OOM killer) runs no handler: only what was written before it survives.
    proc = _run_script(tmp_path, """
        import os, signal, torch, neuron_prof
        m = torch.nn.Linear(8, 8)
        with neuron_prof.profile("trace.json", active=1, repeat=0, quiet=True) as prof:
            for i in range(100):
                m(torch.randn(2, 8)).sum().backward()
                prof.step()
                if i == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
    """)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    trace = neuron_prof.load(tmp_path / "trace.json")
    # Checkpoints are spaced to cost at most ~10% of the run, so the last one may be before cycle 4.
    assert trace.metadata["capture_exit"].startswith("checkpoint after cycle ")
    assert "ProfilerStep#0" in slice_names(trace)
    assert not (tmp_path / "trace.pftrace").exists()  # the .pftrace is written only at the end


def test_exporter_that_raises_is_reported_and_the_other_file_written(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection into our own exporter (not torch): the .pftrace writer crashes mid-way.
    import neuron_prof.exporters.perfetto as pf

    def broken(trace: Any, path: Any) -> None:
        Path(path).write_bytes(b"half")
        raise RuntimeError("pftrace writer crashed")

    monkeypatch.setattr(pf, "write_pftrace", broken)
    model, opt = tiny_model()
    with pytest.warns(CaptureWarning, match="pftrace writer crashed"):
        with neuron_prof.profile(tmp_path / "t.json", quiet=True) as prof:
            result = train_step(model, opt, 0)
    model2, opt2 = tiny_model()
    assert result == train_step(model2, opt2, 0)
    assert prof.paths == [tmp_path / "t.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # no half-written .pftrace left


def test_ctrl_c_while_saving_waits_for_the_save() -> None:
    from neuron_prof.capture._signals import defer_sigint

    def ctrl_c() -> None:
        # to this (the main) thread: delivered before pthread_kill returns. os.kill(getpid()) lets the kernel pick
        # any thread of the process, and on busy cores that thread may run its handler only after the block ended
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    done = []
    with pytest.raises(KeyboardInterrupt):
        with defer_sigint():
            ctrl_c()  # held: the "save" goes on
            done.append("saved")
    assert done == ["saved"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        with defer_sigint():
            ctrl_c()
            ctrl_c()  # the second one abandons the save at once
            done.append("not reached")
    assert done == ["saved"]


class _EmptyExportResult:
    """A profiler result as torch documents it (torch-facts.md: `export_chrome_trace` works once, a second
    call raises "Trace is already saved"), whose one export leaves the file empty (a write that failed)."""

    def __init__(self) -> None:
        self.exports = 0

    def export_chrome_trace(self, path: str) -> None:
        self.exports += 1
        if self.exports > 1:
            raise RuntimeError("Trace is already saved.")


def test_a_cycle_that_cannot_be_read_reports_why_and_exports_once(tmp_path: Path) -> None:
    """A failed load is reported as itself; re-exporting (which torch refuses) would hide it."""
    from neuron_prof.capture._kineto import KinetoCollector

    errors: list[tuple[str, BaseException]] = []
    result = _EmptyExportResult()
    collector = KinetoCollector(TraceBuilder(), "<capture>", lambda probe, e: errors.append((probe, e)),
                                tmpdir=str(tmp_path))
    collector(result)
    assert result.exports == 1
    [(probe, err)] = [(p, e) for p, e in errors if p == "kineto"]
    assert "empty file" in str(err) and "already saved" not in str(err)
    assert collector.cycles == 0 and not list(tmp_path.iterdir())  # no temporary file left behind


def test_a_session_in_a_worker_thread_leaves_the_signal_handlers_alone(tmp_path: Path) -> None:
    """Signals belong to the main thread: profile() in another thread records and saves (no SIGTERM or
    Ctrl-C handling there) and never touches the process's handlers."""
    import threading

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    seen: list[object] = []

    def work() -> None:
        model, opt = tiny_model()
        with neuron_prof.profile(tmp_path / "t.json", quiet=True, with_stack=False, pftrace=False) as prof:
            train_step(model, opt, 0)
            seen.append(signal.getsignal(signal.SIGTERM))
            prof.step()

    t = threading.Thread(target=work)
    t.start()
    t.join(timeout=120)
    assert not t.is_alive() and seen == [before[0]]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert "aten::addmm" in slice_names(neuron_prof.load(tmp_path / "t.json"))


def test_an_unusable_temp_folder_exports_beside_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's JSON goes to the temp folder first; where that is gone (or full), beside the output: the
    Kineto part still arrives, nothing is left behind and no probe error is recorded."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    out = tmp_path / "run" / "t.json"
    out.parent.mkdir()
    model, opt = tiny_model()
    with neuron_prof.profile(out, quiet=True, with_stack=False, pftrace=False) as prof:
        train_step(model, opt, 0)
        prof.step()
    assert [p.name for p in out.parent.iterdir()] == ["t.json"]
    trace = neuron_prof.load(out)
    assert "aten::addmm" in slice_names(trace) and not trace.metadata.get("probe_errors")
