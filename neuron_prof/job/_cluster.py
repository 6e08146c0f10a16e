"""Where the ranks are processed: tasks on a dask.distributed cluster, or one by one in this process.

    with DaskRunner() as run:                          # a LocalCluster sized to this machine
        results = run.map(rank_piece, [(path, i) for i, path in enumerate(paths)], on_done=tick)
    with DaskRunner("tcp://head:8786") as run: ...     # an existing cluster (traces on shared storage)
    InProcessRunner().map(...)                         # no cluster: one rank after another

Each task returns its small result (a rank's piece) and nothing else travels back. A task that raises is
one `TaskResult` with `error` set (one line); the others go on.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from neuron_prof.errors import NeuronProfError, UsageError
from neuron_prof.loaders.json.stream import MEMORY_LIMIT_ENV, memory_limit

_QUIET = (
    "distributed",
    "distributed.scheduler",
    "distributed.worker",
    "distributed.nanny",
    "distributed.core",
    "distributed.http.proxy",
    "distributed.comm",
    "bokeh",
    "tornado",
)


LOCAL_WORKER_CONFIG: dict[str, Any] = {
    # Dask's nanny starts each worker with MALLOC_TRIM_THRESHOLD_=65536 (to hand memory back between tasks).
    # Setting it turns off glibc's dynamic mmap threshold: every array over 128 KiB a rank's load makes is a
    # fresh mmap, zeroed page by page. Measured (bench fleet, 8 ranks of 20k events, one run per setting):
    # 17,055 minor page faults per rank against 329 in one process, task thread CPU 0.275 s against 0.190 s;
    # without it, 3,787 faults and 0.182 s. A user's own MALLOC_TRIM_THRESHOLD_ still wins (Dask keeps it).
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
    # the worker's statistical profiler samples the task thread's stack every 10 ms (a dashboard feature;
    # there is no dashboard here)
    "distributed.worker.profile.enabled": False,
}
"""Dask settings of the LocalCluster a summary starts (an existing cluster keeps its own)."""


def start_method() -> str:
    """How the LocalCluster starts its worker processes: forked from this process on Linux, unless the user
    chose a method for Dask (config or DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD).

    Dask's default, spawn, starts a fresh interpreter per worker that imports distributed, numpy and the
    loaders again (about 1.6 s of CPU each) and re-runs the caller's `__main__`; forked workers have them
    already. Measured (8 ranks, 2 workers, load 4.6-5.1, alternating runs): cluster start 0.82-1.16 s forked
    against 4.16-4.53 s spawned, the whole summary 2.3-4.2 s against 7.9-9.6 s; forkserver 2.4-2.6 s to
    start. Forked only from a caller with no thread of its own: a thread might hold a lock (of stderr, say) that
    a forked worker would then wait on forever; the commands start the cluster before their progress bar, and
    Dask's own threads, started by the cluster after this choice, hold none a worker takes. Not on macOS, where
    forking a process that has loaded system frameworks is unsafe."""
    import dask

    chosen = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    if chosen != "spawn" or "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD" in os.environ:
        return str(chosen)
    alone = threading.active_count() == 1
    return "fork" if alone and sys.platform.startswith("linux") else "spawn"


def worker_memory(workers: int) -> int:
    """The memory each of `workers` local worker processes may take, as the loader sees it (NEURON_PROF_MEMORY_LIMIT):
    the user's own NEURON_PROF_MEMORY_LIMIT, else an equal share of this machine's (Dask's own per-worker memory limit).
    Without it each worker sized its loads against the whole machine's free memory, as if alone: 16 workers
    each loading a 1 GB rank whole (2.9 GB peak each, measured on 2) would need 46 GB of a 24 GB machine."""
    from distributed.system import MEMORY_LIMIT

    return memory_limit() or MEMORY_LIMIT // max(1, workers)


@dataclass(frozen=True)
class TaskResult:
    value: Any = None
    error: str | None = None
    """One line saying why the task failed; None when it succeeded."""


def error_line(e: BaseException) -> str:
    """An exception as the one line a report shows (our own errors read as they are)."""
    if isinstance(e, NeuronProfError):
        return str(e)
    return f"{type(e).__name__}: {e}".splitlines()[0][:300]


class InProcessRunner:
    """Runs every task here, one after another (no cluster: small jobs and the baseline of `bench fleet`)."""

    description = "in this process"
    scheduler: str | None = None

    def __enter__(self) -> InProcessRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(
        self,
        fn: Callable[..., Any],
        args: Sequence[tuple[Any, ...]],
        on_done: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]:
        out = []
        for i, a in enumerate(args):
            try:
                r = TaskResult(fn(*a))
            except Exception as e:  # noqa: BLE001 - one rank's failure is one line of the report
                r = TaskResult(error=error_line(e))
            out.append(r)
            if on_done is not None:
                on_done(i, r)
        return out


@contextmanager
def _quiet_logs() -> Iterator[None]:
    """distributed's INFO/WARNING lines (ports, heartbeats, shutdown) hidden while the runner is open."""
    old = {n: logging.getLogger(n).level for n in _QUIET}
    for n in _QUIET:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, lvl in old.items():
            logging.getLogger(n).setLevel(lvl)


class DaskRunner:
    """Tasks on dask.distributed: `scheduler` ("tcp://host:8786") or a LocalCluster of `workers` processes
    (default: one per CPU, at most one per task), one thread each, quiet logs (a failed task is its one-line
    TaskResult, not a worker traceback), no dashboard."""

    def __init__(
        self, scheduler: str | None = None, workers: int | None = None, tasks: int | None = None
    ) -> None:
        self.scheduler = scheduler
        n = workers or os.cpu_count() or 1
        self.workers = max(1, min(n, tasks)) if tasks and not workers else max(1, n)
        self.description = scheduler or f"a local Dask cluster of {self.workers} worker process(es)"
        self._client: Any = None
        self._cluster: Any = None
        self._quiet = _quiet_logs()

    def __enter__(self) -> DaskRunner:
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - a dependency; only a broken install lacks it
            raise UsageError("the job summary runs on Dask: pip install 'dask[distributed]'") from None
        self._quiet.__enter__()
        try:
            if self.scheduler:
                try:
                    # how long to wait for it: dask's own setting (DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT)
                    self._client = Client(
                        self.scheduler, timeout=dask.config.get("distributed.comm.timeouts.connect")
                    )
                except (OSError, TimeoutError) as e:
                    raise UsageError(
                        f"--scheduler {self.scheduler}: cannot connect ({error_line(e)})"
                    ) from None
                self.workers = len(self._client.scheduler_info().get("workers", {})) or self.workers
                self.description = f"{self.scheduler} ({self.workers} worker(s))"
            else:
                # one rank per worker process and one worker per CPU: the loader parses big JSON files in
                # one process there (NEURON_PROF_JSON_WORKERS=1) rather than start more per rank
                method = start_method()
                self.description = f"a local Dask cluster of {self.workers} worker process(es)" + (
                    ", forked" if method == "fork" else "")
                with dask.config.set({**LOCAL_WORKER_CONFIG, "distributed.worker.multiprocessing-method": method}):
                    self._cluster = LocalCluster(
                        n_workers=self.workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.CRITICAL,
                        env={"NEURON_PROF_JSON_WORKERS": "1", MEMORY_LIMIT_ENV: str(worker_memory(self.workers))},
                    )
                self._client = Client(self._cluster)
        except BaseException:
            self._quiet.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._client is not None:
                self._client.close()
            if self._cluster is not None:
                self._cluster.close()
        finally:
            self._client = self._cluster = None
            self._quiet.__exit__(None, None, None)

    def map(
        self,
        fn: Callable[..., Any],
        args: Sequence[tuple[Any, ...]],
        on_done: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]:
        """One task per argument tuple; results in the order of `args`, each reported as it completes."""
        from dask.distributed import as_completed

        if self._client is None:
            raise RuntimeError("DaskRunner.map outside its `with` block")
        futures = [self._client.submit(fn, *a, pure=False) for a in args]
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[TaskResult] = [TaskResult(error="not run")] * len(futures)
        for fut in as_completed(futures):
            i = index[fut.key]
            if fut.status == "error":
                out[i] = TaskResult(error=error_line(fut.exception()))
            else:
                out[i] = TaskResult(fut.result())
            fut.release()
            if on_done is not None:
                on_done(i, out[i])
        return out
