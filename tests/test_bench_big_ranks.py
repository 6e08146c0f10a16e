"""`bench big --ranks` (issue 35 item 5): the rank files it writes, and its run of `summary DIR` on Dask reporting
each worker's peak RSS, the client's, the slow rank, and leaving nothing behind. No timings are asserted."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench import bench_big
from bench.big_ranks import write_ranks


def test_rank_files_name_their_rank(tmp_path: Path) -> None:
    paths = write_ranks(3000, 4, tmp_path, slow_rank=3)
    assert [p.name for p in paths] == [f"trace.rank{r}.json" for r in range(4)]
    docs = [json.loads(p.read_bytes()) for p in paths]
    assert [d["distributedInfo"]["rank"] for d in docs] == [0, 1, 2, 3]
    assert {d["distributedInfo"]["world_size"] for d in docs} == {4}
    # the copies are rank 0's events; the slow rank was generated apart (its host work is longer)
    assert docs[1]["traceEvents"] == docs[2]["traceEvents"] == docs[0]["traceEvents"]
    assert len(docs[3]["traceEvents"]) == 3000 and docs[3]["traceEvents"] != docs[0]["traceEvents"]


def test_job_reports_each_worker_and_cleans_up(tmp_path: Path, capsys) -> None:
    rc = bench_big.main(["--ranks", "4", "--gb", "0.005", "--workers", "2", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "ranks ok 4/4" in out
    m = re.search(r"peak RSS per worker process \(VmHWM\) MB: ([\d, ]+) \(target", out)
    assert m, out
    workers = [int(x.replace(",", "")) for x in m.group(1).split(", ")]
    assert len(workers) == 2 and all(w > 0 for w in workers), out
    assert int(re.search(r"client ([\d,]+) MB", out).group(1).replace(",", "")) > 0  # type: ignore[union-attr]
    assert "slow rank 3 named: yes" in out and "step_skew" in out
    assert list(tmp_path.iterdir()) == []  # rank files and column cache removed


def test_only_processes_of_the_clients_program_count_as_workers() -> None:
    # the summary also runs `git` (its history): a child of another program is not a worker
    import subprocess
    import sys

    from bench.big_ranks import Peaks

    script = ("import subprocess, sys, time\n"
              "a = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.5)'])\n"
              "b = subprocess.Popen(['sleep', '1.5'])\n"
              "a.wait(); b.wait()\n")
    p = subprocess.Popen([sys.executable, "-c", script])
    with Peaks(p.pid, every_s=0.05) as peaks:
        p.wait()
    assert len(peaks.peak) == 3, peaks.exe  # the client, its Python child and `sleep` were all seen
    assert len(peaks.workers) == 1 and all(mb > 0 for mb in peaks.workers.values()), peaks.exe
