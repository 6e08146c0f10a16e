"""Bad input through the command line: every kind of damaged or hostile trace file gives either a one-line
`neuron-prof: error: <file>: <problem>` with exit code 2 and no traceback, or a best-effort result (exit 0)
with each problem as a `neuron-prof: warning: <file>: ...` line on stderr.

The loader's own behaviour per kind is in test_kineto_bad_input.py / test_pftrace_load.py; here each kind goes
through `main([...])` (and some through a real process), plus the kinds those files do not cover.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_prof.cli import main
from neuron_prof.errors import TraceLoadError
from neuron_prof.loaders import load
from tests._bad_inputs import KINDS, write_kind
from tests._builders import foreign_trace, kineto_seed_bytes

REPO = Path(__file__).resolve().parents[1]


def check_cli_result(path: Path, expect: str, words: str, rc: int, out: str, err: str) -> None:
    """The rules for one bad file: asserted the same way for main() and a real process."""
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    if expect == "error":
        assert rc == 2, (rc, err)
        assert len(lines) == 1, err  # one line
        assert lines[0].startswith(f"neuron-prof: error: {path}: "), lines[0]
        assert words in lines[0]
        assert out == ""
    else:
        assert rc == 0, (rc, err)
        assert all(ln.startswith(f"neuron-prof: warning: {path}: ") for ln in lines), err
        assert not [ln for ln in lines if ln.startswith(f"neuron-prof: warning: {path}: 0 ")], err  # no "0 events"
        assert (words in err) if words else not lines, err
        if out.startswith("PARTIAL TRACE"):  # events were lost: said first, the summary follows
            assert f"\nneuron-prof summary: {path}\n" in out and load(path).metadata.get("partial")
        else:
            assert out.startswith(f"neuron-prof summary: {path}\n")
            assert not load(path).metadata.get("partial")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_summary_on_bad_input(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_kind(tmp_path, kind)
    _, _, expect, words = KINDS[kind]
    rc = main(["summary", str(path)])
    out, err = capsys.readouterr()
    check_cli_result(path, expect, words, rc, out, err)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_load_on_bad_input(kind: str, tmp_path: Path) -> None:
    """The API agrees with the CLI: a TraceLoadError with one line, or a Trace with load_warnings."""
    path = write_kind(tmp_path, kind)
    _, _, expect, words = KINDS[kind]
    if expect == "error":
        with pytest.raises(TraceLoadError) as e:
            load(path)
        assert "\n" not in str(e.value) and str(e.value).startswith(f"{path}: ") and words in str(e.value)
        assert e.value.exit_code == 2
    else:
        tr = load(path)
        w = "\n".join(tr.metadata.get("load_warnings") or [])
        assert (words in w) if words else not w


def test_summary_json_stays_clean_on_a_damaged_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_kind(tmp_path, "truncated_json")
    assert main(["summary", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)  # warnings never mixed into the JSON on stdout
    # the 40 events before the cut (op0..op39, 5 us each) are summarised, and the cut is a warning on stderr
    assert doc["totals"]["events"]["slices"] == 40 and doc["totals"]["host_busy_ns"] == 40 * 5_000
    top = doc["totals"]["top_ops"]
    assert top and {o["name"] for o in top} <= {f"op{i}" for i in range(40)}
    assert all((o["count"], o["total_ns"]) == (1, 5_000) for o in top)
    assert "truncated" in err


def test_what_the_loader_kept_from_the_kinds_without_a_loader_test(tmp_path: Path) -> None:
    # a JSON trace named .pftrace: read by content, not by name
    tr = load(write_kind(tmp_path, "json_named_pftrace"))
    assert [tr.slice_name(i) for i in range(len(tr.slices))] == [f"op{i}" for i in range(60)]
    # a uint64 timestamp past int64 in a .pftrace: read (wrapped), with a warning, not an OverflowError
    tr = load(write_kind(tmp_path, "pftrace_ts_beyond_int64"))
    assert len(tr.slices) == 1 and tr.slice_name(0) == "late"
    assert (int(tr.slices.ts_ns[0]), int(tr.slices.dur_ns[0])) == (-5_000, 4_000)
    # a string that is not UTF-8 in a .pftrace (protobuf hands it over as bytes): text with U+FFFD
    tr = load(write_kind(tmp_path, "invalid_utf8_pftrace"))
    cats = {tr.s(int(c)) for c in tr.slices.cat}
    assert "\ufffdpu_op" in cats and all(isinstance(s, str) for s in tr.strings.as_list())


def test_directory_missing_and_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [(tmp_path, "is a directory"), (tmp_path / "nope.json", "no such file"),
             (tmp_path / "nope.pftrace", "no such file"), (tmp_path / "sub" / "x.json.gz", "no such file")]
    for path, words in cases:
        assert main(["summary", str(path)]) == 2
        out, err = capsys.readouterr()
        assert err == f"neuron-prof: error: {path}: {err.split(': ', 3)[-1]}" and words in err and not out
        assert err.count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway: permission denial cannot happen")
def test_permission_denied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_kind(tmp_path, "overlapping_unsorted")
    path.chmod(0)
    try:
        assert main(["summary", str(path)]) == 2
        assert "permission denied" in capsys.readouterr().err
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("argv", [
    ["check", "{bad}"], ["diff", "{bad}", "{good}"], ["diff", "{good}", "{bad}"], ["report", "{bad}", "-o", "{tmp}/r.html"],
    ["export", "{bad}", "-o", "{tmp}/x.parquet"], ["convert", "{bad}", "{tmp}/c.json"], ["merge", "{bad}", "{good}",
                                                                                         "-o", "{tmp}/m.json"],
    ["tui", "{bad}"],
])
def test_every_command_gives_the_same_one_line_error(argv: list[str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_kind(tmp_path, "garbage_pftrace")
    good = write_kind(tmp_path, "overlapping_unsorted")
    rc = main([a.format(bad=bad, good=good, tmp=tmp_path) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err == f"neuron-prof: error: {bad}: not a Perfetto trace (protobuf decoding failed)\n"
    assert not list(tmp_path.glob("*.html")) + list(tmp_path.glob("*.parquet")) + list(tmp_path.glob("?.json"))


def test_unwritable_outputs_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    good = write_kind(tmp_path, "overlapping_unsorted")
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    for argv in (["summary", str(good), "-o", str(blocker / "s.txt")],
                 ["report", str(good), "-o", str(blocker / "r.html")],
                 ["convert", str(good), str(blocker / "c.pftrace")]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert err.startswith(f"neuron-prof: error: {blocker}/") and err.count("\n") == 1, err
    # a full disk, as the OS reports it, while the summary is written
    import errno

    def enospc(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", enospc)
    assert main(["summary", str(good), "-o", str(tmp_path / "s.txt")]) == 2
    assert capsys.readouterr().err == f"neuron-prof: error: {tmp_path / 's.txt'}: cannot write: No space left on device\n"


def test_report_into_a_device_writes_into_it_not_over_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `-o /dev/stdout`-style outputs: the report is written into the special file; a rename would have
    # replaced the device node itself (as root, /dev/null would become an HTML file).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    good = write_kind(tmp_path, "overlapping_unsorted")
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        assert main(["report", str(good), "-o", str(fifo)]) == 0
    finally:
        reader.join(timeout=30)
    assert fifo.is_fifo()  # still the FIFO
    assert got and got[0].lstrip().lower().startswith(b"<!doctype html")


def test_real_process_bad_inputs(tmp_path: Path) -> None:
    """Through the installed entry point: exit code, one stderr line, no traceback."""
    for kind in ("garbage_pftrace", "deeply_nested_document", "truncated_gzip"):
        path = write_kind(tmp_path, kind)
        _, _, expect, words = KINDS[kind]
        p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(path)], capture_output=True,
                           text=True, timeout=60, cwd=REPO)
        check_cli_result(path, expect, words, p.returncode, p.stdout, p.stderr)
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(tmp_path / "missing.json")],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"neuron-prof: error: {tmp_path / 'missing.json'}: no such file\n"


# ---- fuzz: mutated .pftrace files (ours and a foreign one) load or raise TraceLoadError, and what loads can be
# summarised and written back ----------------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _pftrace_seeds() -> list[bytes]:
    import tempfile

    from neuron_prof.exporters import write_trace
    from tests.conftest import KINETO_DIR
    seeds = [foreign_trace()]
    src = KINETO_DIR / "triton_example_triton_example.json.gz"
    with tempfile.TemporaryDirectory() as d:
        tr = load(src) if src.is_file() else load(write_kind(Path(d), "unmatched_begin_end"))
        out = Path(d) / "own.pftrace"
        write_trace(tr, out)
        seeds.append(out.read_bytes())
    return seeds


_PF_SEEDS = _pftrace_seeds()


@st.composite
def _mutated_pftrace(draw: st.DrawFn) -> bytes:
    data = bytearray(_PF_SEEDS[draw(st.integers(0, len(_PF_SEEDS) - 1))])
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":  # varints at their limits, lengths that overrun, field tags
            data[i:i] = draw(st.sampled_from([b"\xff" * 9 + b"\x01", b"\x80" * 10, b"\x0a\xff\xff\xff\xff\x0f",
                                              b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x00", b"\x12\x00"]))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 40))]
        elif op == "truncate":
            del data[i:]
        elif op == "dup":
            data[i:i] = data[max(0, i - 64):i]
    return bytes(data)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(blob=_mutated_pftrace())
def test_fuzz_mutated_pftrace(tmp_path: Path, blob: bytes) -> None:
    from neuron_prof.analysis import report
    from neuron_prof.exporters import write_trace

    p = tmp_path / "f.pftrace"
    p.write_bytes(blob)
    try:
        tr = load(p)
    except TraceLoadError as e:
        assert "\n" not in str(e) and str(e).startswith(f"{p}: ")
        return
    report(tr)  # what loads can be analysed
    write_trace(tr, tmp_path / "back.json")  # and written back





_JSON_SEED = kineto_seed_bytes()


@st.composite
def _mutated_json(draw: st.DrawFn) -> bytes:
    data = bytearray(_JSON_SEED)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "dup", "value"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.sampled_from([b"},{", b"]", b'"', b"NaN", b"\xff", b"-1e300", b"1e999", b"null",
                                              b"-", b"9" * 30, b'"\\u0000"', b"[[[[", b"true"]))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 40))]
        elif op == "dup":
            data[i:i] = data[max(0, i - 120):i]
        elif op == "value":  # replace a number after a key with a hostile one
            j = data.find(b'": ', i)
            if j >= 0:
                data[j + 3:j + 3] = draw(st.sampled_from([b"-", b"1e30", b"-9e18", b'"x"', b"[]", b"{}", b"null"]))
    return bytes(data)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(blob=_mutated_json())
def test_fuzz_mutated_json_through_analysis_views_and_exporters(tmp_path: Path, blob: bytes) -> None:
    """What the JSON loader accepts, best-effort, must also survive the analysis, the text views and both
    exporters (a damaged file that loads but then crashes `summary` would be a traceback for the user)."""
    from neuron_prof.analysis import report
    from neuron_prof.exporters import write_trace
    from neuron_prof.exporters.summary import summary_markdown, summary_text

    p = tmp_path / "f.json"
    p.write_bytes(blob)
    try:
        tr = load(p)
    except TraceLoadError:
        return
    rep = report(tr)
    summary_text(rep)
    summary_markdown(rep)
    write_trace(tr, tmp_path / "back.pftrace")
    write_trace(tr, tmp_path / "back.json")
    assert load(tmp_path / "back.pftrace").n_events <= tr.n_events + len(tr.findings) + 1
