"""`neuron-prof run`: a script profiled with no code change; argv, exit code and exceptions pass through."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.cli import main
from tests._builders import json_complete_count, pftrace_slice_count, slice_names

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
    import sys, json, torch
    from torch import nn
    import helper  # from the script's own folder: sys.path[0] is set as python sets it
    m = nn.Linear(8, 4)
    for _ in range(2):
        m(torch.randn(3, 8)).sum().backward()
    json.dump({"argv": sys.argv, "name": __name__}, open(sys.argv[1], "w"))
    sys.exit(int(sys.argv[2]))
"""


def _script(tmp_path: Path, body: str = SCRIPT) -> Path:
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "helper.py").write_text("VALUE = 1\n")
    s = d / "train.py"
    s.write_text(textwrap.dedent(body))
    return s


def test_run_in_process_passes_argv_and_exit_code(tmp_path: Path) -> None:
    script = _script(tmp_path)
    out, seen = tmp_path / "out" / "t.json", tmp_path / "seen.json"
    argv_before = sys.argv[:]
    rc = main(["run", "-q", "-o", str(out), str(script), str(seen), "3"])
    assert rc == 3
    assert sys.argv == argv_before and str(script.parent) not in sys.path[:1]  # restored
    import json

    got = json.loads(seen.read_text())
    assert got == {"argv": [str(script), str(seen), "3"], "name": "__main__"}
    trace = neuron_prof.load(out)
    assert "aten::addmm" in slice_names(trace) and "autograd::engine::evaluate_function: AddmmBackward0" in slice_names(trace)
    assert json_complete_count(out) == pftrace_slice_count(out.with_suffix(".pftrace"))


def test_run_exit_zero_and_no_pftrace(tmp_path: Path) -> None:
    script = _script(tmp_path)
    out = tmp_path / "t.json"
    assert main(["run", "-q", "--no-pftrace", "-o", str(out), str(script), str(tmp_path / "s.json"), "0"]) == 0
    assert out.exists() and not out.with_suffix(".pftrace").exists()


def test_run_exception_is_shown_as_python_shows_it_and_trace_is_written(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # python's own hook: a process group created by an earlier test in this process leaves torch's
    # "[rankN]: " hook installed for good (torch.distributed.init_process_group sets it)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    script = _script(tmp_path, "import torch\ntorch.ones(3).sum()\nraise LookupError('from the script')\n")
    out = tmp_path / "t.json"
    assert main(["run", "-q", "-o", str(out), str(script)]) == 1  # python's exit code for an uncaught error
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "LookupError: from the script" in err
    assert neuron_prof.load(out).metadata["capture_exit"] == "exception: LookupError: from the script"


def test_run_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text("import sys, torch\ntorch.ones(2, 2).mm(torch.ones(2, 2))\n"
                                "sys.exit(0 if sys.argv[1:] == ['x'] and __name__ == '__main__' else 9)\n")
    monkeypatch.chdir(tmp_path)
    # `run -m` runs in this process: another test's `mypkg` (tests/test_docs.py's, same pytest worker) must not
    # answer for this one, and this one must not stay for the next
    for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        assert main(["run", "-q", "-o", "m.json", "-m", "mypkg.job", "x"]) == 0
    finally:
        for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
            del sys.modules[name]
    assert "aten::mm" in slice_names(neuron_prof.load(tmp_path / "m.json"))


def test_run_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert main(["run", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err
    assert "missing.py: no such script" in err and "Traceback" not in err


def test_run_subprocess_exit_code(tmp_path: Path) -> None:
    script = _script(tmp_path)
    out = tmp_path / "sp.json"
    exe = Path(sys.executable).with_name("neuron-prof")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([str(exe), "run", "-o", str(out), str(script), str(tmp_path / "s.json"), "4"],
                         capture_output=True, text=True, timeout=180, env=env)
    assert res.returncode == 4, res.stderr
    assert str(out) in res.stderr  # where the trace went
    assert len(neuron_prof.load(out).slices) > 0


def test_emulator_stays_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_prof.emulator as emu
    from neuron_prof.cli._run import _enable_emulator

    was = emu.is_enabled()
    for value in ("", "0", "no"):
        monkeypatch.setenv("NEURON_PROF_EMULATE", value)
        _enable_emulator(False)
    assert emu.is_enabled() == was


def test_run_on_the_emulated_neuron_device(tmp_path: Path) -> None:
    # A subprocess: the emulator's PrivateUse1 registration cannot be undone in this test process.
    script = _script(tmp_path, """
        import torch
        # Parameters made on the device: `Module.to("neuron")` inside a profiled region fails on the
        # emulator (swap_tensors refuses tensors the profiler's record_shapes holds weak references to).
        w = torch.randn(8, 4, device="neuron", requires_grad=True)
        for _ in range(2):
            (torch.randn(3, 8, device="neuron") @ w).sum().backward()
        assert w.grad.device.type == "neuron"
    """)
    out = tmp_path / "n.json"
    exe = Path(sys.executable).with_name("neuron-prof")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_EMULATE_COMPILE_SCALE": "0"}
    env["NEURON_PROF_EMULATE"] = "1"  # the --emulate-neuron flag takes the same path (_enable_emulator)
    res = subprocess.run([str(exe), "run", "-q", "-o", str(out), str(script)], capture_output=True, text=True,
                         timeout=240, env=env)
    assert res.returncode == 0, res.stderr
    trace = neuron_prof.load(out)
    assert trace.metadata["backend"] == "neuron"
    assert "aten::mm" in slice_names(trace)
