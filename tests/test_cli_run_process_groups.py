"""`neuron-prof run` keeps the process groups a script destroys until the script's objects are gone (issue 22),
and changes nothing else about them: a new group after a destroyed one (elastic restarts, tests) can reuse the
old group's store port, as without the profiler."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
import torch
import torch.distributed as dist

url = "tcp://127.0.0.1:" + sys.argv[1]
for attempt in range(2):  # rank 0 hosts the store on the same port both times
    dist.init_process_group("gloo", init_method=url, rank=0, world_size=1)
    t = torch.ones(2)
    dist.all_reduce(t)
    dist.destroy_process_group()
print("reinit ok", flush=True)
"""


def test_a_group_after_a_destroyed_one_reuses_its_port(tmp_path: Path) -> None:
    script = tmp_path / "reinit.py"
    script.write_text(SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--no-pftrace", "-o",
                        str(tmp_path / "t.json"), str(script), port], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "reinit ok\n", p.stderr[-3000:]
