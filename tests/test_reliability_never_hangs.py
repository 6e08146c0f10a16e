"""No input makes neuron-prof hang: every bad-input kind, and files that never end or never open (a FIFO with
no writer, /dev/zero), finish within a bounded time in a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests._bad_inputs import KINDS, write_kind

REPO = Path(__file__).resolve().parents[1]
PER_FILE_S = 20
"""A file that takes longer than this is a hang (the slowest kind, a 9 MB single string, takes well under 1 s)."""

_CHILD = textwrap.dedent("""
    import contextlib, faulthandler, io, json, sys, time
    from neuron_prof.cli import main
    out = {}
    for path in sys.argv[2:]:
        # a stuck file dumps every thread's stack and kills the process: the parent sees which one
        faulthandler.dump_traceback_later(float(sys.argv[1]), exit=True)
        t = time.perf_counter()
        sink = io.TextIOWrapper(io.BytesIO())
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()) as err:
            rc = main(["summary", path])
        faulthandler.cancel_dump_traceback_later()
        out[path] = [rc, time.perf_counter() - t, err.getvalue()]
        print(path, file=sys.stderr, flush=True)
    print(json.dumps(out))
""")


def _run(paths: list[Path], timeout: float) -> dict[str, list[object]]:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(PER_FILE_S), *map(str, paths)], capture_output=True,
                       text=True, timeout=timeout, cwd=REPO)
    assert p.returncode == 0, f"stuck or crashed after: {p.stderr[-3000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_every_bad_input_finishes_in_bounded_time(tmp_path: Path) -> None:
    paths = [write_kind(tmp_path, k) for k in sorted(KINDS)]
    t0 = time.monotonic()
    got = _run(paths, timeout=len(paths) * PER_FILE_S)
    assert sorted(got) == sorted(map(str, paths))
    for path, (rc, secs, err) in got.items():
        assert rc in (0, 2), (path, rc, err)
        assert secs < PER_FILE_S, (path, secs)
    assert time.monotonic() - t0 < 120


def test_pipes_and_endless_devices_are_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)  # nobody ever writes: open() alone would block for ever
    paths = [fifo, Path("/dev/zero"), Path("/dev/urandom")]
    got = _run(paths, timeout=60)
    for path in paths:
        rc, secs, err = got[str(path)]
        assert rc == 2 and secs < 5
        assert err == f"neuron-prof: error: {path}: not a regular file (a pipe, socket or device); save the trace " \
                      "to a file first\n"
