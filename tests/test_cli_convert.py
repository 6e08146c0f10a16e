"""`neuron-prof convert`: JSON <-> .pftrace, counts checked with plain json and the perfetto protos."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.cli import main
from tests._builders import json_complete_count, pftrace_slice_count, tiny_model, train_step
from tests.conftest import pftrace_check


@pytest.fixture(scope="module")
def captured_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv") / "src.json"
    model, opt = tiny_model()
    with neuron_prof.profile(out, pftrace=False, quiet=True) as prof:
        for i in range(2):
            train_step(model, opt, i)
            prof.step()
    return out


def test_json_to_pftrace_and_back(captured_json: Path, tmp_path: Path) -> None:
    n = json_complete_count(captured_json)
    pf = tmp_path / "a.pftrace"
    assert main(["convert", "-q", str(captured_json), str(pf)]) == 0
    assert pftrace_check(pf).returncode == 0
    assert pftrace_slice_count(pf) == n
    back = tmp_path / "b.json.gz"
    assert main(["convert", "-q", str(pf), str(back)]) == 0
    assert json_complete_count(back) == n
    a, b = neuron_prof.load(captured_json), neuron_prof.load(back)
    assert len(a.slices) == len(b.slices) and (a.slices.ts_ns.sum() == b.slices.ts_ns.sum())


def test_convert_errors_exit_2_without_traceback(captured_json: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(tmp_path / "nope.json"), str(tmp_path / "x.pftrace")]) == 2
    assert main(["convert", str(captured_json), str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert "nope.json" in err and "x.txt" in err and "Traceback" not in err
    # promises.md: writing a converted trace somewhere impossible is one line and exit 2 (no folder is made)
    deep = tmp_path / "no-dir" / "deeper" / "x.pftrace"
    assert main(["convert", str(captured_json), str(deep)]) == 2
    err = capsys.readouterr().err
    assert err == f"neuron-prof: error: {deep}: cannot write: No such file or directory\n"
    assert not (tmp_path / "no-dir").exists()


def test_convert_subprocess(captured_json: Path, tmp_path: Path) -> None:
    pf = tmp_path / "s.pftrace"
    res = subprocess.run([sys.executable, "-m", "neuron_prof", "convert", str(captured_json), str(pf)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert pftrace_slice_count(pf) == json_complete_count(captured_json)
    assert "events" in res.stderr
