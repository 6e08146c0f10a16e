"""Start a run of a user program (the `profile()` way's driver, _drive.py, or `neuron-prof run` through the CLI's
`main()`; or any script that imports torch, as a test's job ranks) in a process forked from one that has
imported torch already.

Every run of a program is a process of its own, as a user's is, but the ~1 s of CPU each would spend importing
torch and `torch._inductor` (which torch.profiler imports as it starts, ~0.9 s more) is paid once, by a
`multiprocessing` fork server that preloads them; nothing else is imported there (not neuron_prof, not the
emulator), so the run enables the emulator, profiles and ends as a fresh process does; a `torch.compile` user's
process has Inductor imported before the profiler starts too. (That order once lost a custom Function's backward
lines, 3 runs in 16 of custom_autograd_backward.py at 4 at once: the capture did not wait for autograd's device
thread to have its Python thread state; `capture/_autograd_threads.py` waits now, 28 of 28.) The child gets its own
session (so the harness kills it with everything it started), its own environment, working folder and argv,
and its stdout and stderr in the log file (or two); it runs the interpreter's exit handlers before it ends.

The child ends with `os._exit` once its exit handlers ran, without the interpreter's finalization (its garbage
collection, module teardown): a test of how a process ends (a hang at exit, a rank's teardown) must start its
processes from scratch.

`Forked` has the few methods of `subprocess.Popen` the harness uses (poll, returncode, pid, kill, wait); `run` and
`run_many` give `subprocess.run`'s result.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PRELOAD = ["torch", "torch._inductor"]
CLI = "neuron-prof"
"""argv[0] of a run of the CLI (`Forked([CLI, "run", ...], ...)`)."""
_lock = threading.Lock()
_ctx: multiprocessing.context.ForkServerContext | None = None


def _context(omp_threads: str) -> multiprocessing.context.ForkServerContext:
    """The fork server, started once with OMP_NUM_THREADS as the runs set it (OpenMP reads it when torch's
    library loads, which is in the server)."""
    global _ctx
    with _lock:
        if _ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            saved = os.environ.get("OMP_NUM_THREADS")
            os.environ["OMP_NUM_THREADS"] = omp_threads
            try:
                from multiprocessing import forkserver

                forkserver.ensure_running()
            finally:
                if saved is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = saved
            _ctx = ctx
        return _ctx


def _child(argv: list[str], env: dict[str, str], cwd: str, log: str, err: str | None = None) -> None:
    """In the forked process: a session, the environment, folder, argv and output of a fresh run; then the
    script argv[0] as `python SCRIPT ARGS...` runs it, or `neuron_prof.cli.main()` when argv[0] is CLI."""
    import atexit
    import traceback

    os.setsid()
    for path, fds in (((log, (1, 2)),) if err is None else ((log, (1,)), (err, (2,)))):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        for to in fds:
            os.dup2(fd, to)
        os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # type: ignore[union-attr]  # PYTHONUNBUFFERED's effect
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    code = 0
    try:
        if argv[0] == CLI:
            from neuron_prof.cli import main

            code = main(argv[1:])
        else:
            import runpy

            sys.path.insert(0, str(Path(argv[0]).parent))  # as `python SCRIPT` puts the script's folder first
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001  (what the interpreter does with an uncaught exception)
        traceback.print_exc()
        code = 1
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


# The frame of _child sits under the user's program on every stack the profiler records: filed under
# multiprocessing's own module (the frames above it are that module's), it is library code to the profiler, as a
# fresh process's start (the interpreter, runpy, the CLI's click) is, and no part of the user's stacks or files.
_child.__code__ = _child.__code__.replace(co_filename=multiprocessing.process.__file__)


class Forked:
    """One run in a process forked from the server (the `subprocess.Popen` methods the harness
    uses)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path, err: Path | None = None) -> None:
        ctx = _context(env.get("OMP_NUM_THREADS", "1"))
        self._p = ctx.Process(target=_child, args=(argv, env, str(cwd), str(log), None if err is None else str(err)),
                              daemon=False)
        self._p.start()

    @property
    def pid(self) -> int:
        return int(self._p.pid or 0)

    @property
    def returncode(self) -> int | None:
        return self._p.exitcode

    def poll(self) -> int | None:
        return self._p.exitcode

    def kill(self) -> None:
        self._p.kill()

    def wait(self) -> int | None:
        self._p.join()
        return self._p.exitcode


def run(argv: list[str], *, cwd: str | os.PathLike[str], timeout: float, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, capture_output=True, text=True)` of a forked run (argv[0]: a script, or CLI for
    `neuron-prof ARGS...` through `main()`); killed with its session past `timeout` (subprocess.TimeoutExpired)."""
    return run_many([(argv, env)], cwd=cwd, timeout=timeout)[0]


def run_many(runs: list[tuple[list[str], dict[str, str] | None]], *, cwd: str | os.PathLike[str], timeout: float,
             merge: bool = False) -> list[subprocess.CompletedProcess[str]]:
    """`run` of each (argv, env) at once (a job's ranks), waiting for all; past `timeout` every one still running
    is killed with its session (subprocess.TimeoutExpired). `merge`: stderr into stdout, as
    `stderr=subprocess.STDOUT` does."""
    with tempfile.TemporaryDirectory(prefix="forked-") as d:
        procs = []
        for i, (argv, env) in enumerate(runs):
            env = dict(os.environ if env is None else env)
            env.setdefault("OMP_NUM_THREADS", "1")
            out, err = Path(d) / f"{i}.stdout", Path(d) / f"{i}.stderr"
            procs.append((argv, Forked(argv, env, Path(cwd), out, None if merge else err), out, err))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for _, p, _, _ in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        late = [argv for argv, p, _, _ in procs if p.poll() is None]
        for _, p, _, _ in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except OSError:
                    p.kill()
            p.wait()
        if late:
            raise subprocess.TimeoutExpired(late[0], timeout)
        return [subprocess.CompletedProcess(argv, int(p.returncode or 0), out.read_text(errors="replace"),
                                            err.read_text(errors="replace") if err.exists() else "")
                for argv, p, out, err in procs]
