"""Facts about the process a capture runs in: rank, world size, process group, host, versions."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import Any

KINETO_LOG_ENV = "KINETO_LOG_LEVEL"
KINETO_QUIET = "6"
"""Kineto prints `USDT: ... profiler_start` / `profiler_stop` on stderr at level 5 (USDT), above ERROR (4):
only a level past both keeps the script's terminal to the script's own output."""


def quiet_kineto() -> None:
    """Keep Kineto's `USDT:` lines off the terminal, unless the user set KINETO_LOG_LEVEL themselves.

    libkineto reads the variable once, when torch first starts a profiler in the process: a profiler
    started before this (outside neuron-prof) keeps the level it read then."""
    os.environ.setdefault(KINETO_LOG_ENV, KINETO_QUIET)


def distributed_info() -> dict[str, Any] | None:
    """Rank, world size and process-group facts when torch.distributed is initialised, else None."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        info: dict[str, Any] = {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
    except Exception:  # noqa: BLE001  (a half-initialised process group must not stop the capture)
        return None
    for key, fn in (("backend", lambda: str(dist.get_backend())),
                    ("group_name", lambda: str(dist.group.WORLD.group_name)),  # type: ignore[union-attr]
                    ("group_ranks", lambda: list(dist.get_process_group_ranks(dist.group.WORLD)))):  # type: ignore[arg-type]
        try:
            info[key] = fn()
        except Exception:  # noqa: BLE001
            pass
    for env in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if env in os.environ:
            info[env.lower()] = os.environ[env]
    return info


def env_rank() -> tuple[int | None, int | None]:
    """(rank, world size) from torchrun's environment, for when the process group is not up yet."""
    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None, None
    return rank, world


def host_metadata() -> dict[str, Any]:
    """Host name, pid, Python/torch/neuron-prof versions and the command line."""
    from neuron_prof.version import __version__

    meta: dict[str, Any] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "neuron_prof_version": __version__,
        "argv": list(sys.argv),
    }
    boot_id = _boot_id()
    if boot_id:
        meta["boot_id"] = boot_id
    torch = sys.modules.get("torch")
    if torch is not None:
        meta["torch_version"] = str(getattr(torch, "__version__", "?"))
    return meta


def _boot_id() -> str:
    """This kernel's boot id (Linux), "" elsewhere: the processes that share it share one clock."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""
