"""Files written through a shared map, with their disk blocks reserved first: a full disk is then an OSError when
the file is made, never a SIGBUS in the middle of a pass (the kernel's answer to a write into a mapped page of
a sparse file that it finds no block for, which kills the process without a word).

    with tempfile.TemporaryFile(dir=folder) as f:
        reserve(f.fileno(), nbytes)                   # OSError (ENOSPC, EDQUOT) here when the disk is full
        m = mmap.mmap(f.fileno(), nbytes)
    a = mapped_zeros(folder / "f_row", n, np.int64)   # the same for a named file, as a writable np.memmap
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a disk (or a quota) with no room left."""


def no_space(e: BaseException) -> bool:
    """Whether `e` says the disk or the user's quota is full."""
    return isinstance(e, OSError) and e.errno in NO_SPACE


def reserve(fd: int, nbytes: int) -> None:
    """Make the open file `fd` `nbytes` long with its blocks allocated (``posix_fallocate``): OSError when the disk
    has no room for them. Where the OS or the file system has no fallocate, only the length is set (a sparse
    file, as before)."""
    if nbytes <= 0:
        return
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, nbytes)
            return
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
    os.ftruncate(fd, nbytes)


def mapped_zeros(path: Path, n: int, dtype: DTypeLike) -> np.memmap:
    """A writable memory-mapped array of `n` zeros (at least one item: a map cannot be empty) in a new file at
    `path`, its blocks reserved (`reserve`)."""
    dt = np.dtype(dtype)
    n = max(n, 1)
    with open(path, "wb") as f:
        reserve(f.fileno(), n * dt.itemsize)
    return np.memmap(path, dtype=dt, mode="r+", shape=(n,))
