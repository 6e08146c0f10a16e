"""Running a command in a real terminal (a pty) in tests, typing keys as its output asks."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>78]")


def pty_run(
    argv: list[str], on_output: Callable[[bytes, int], bytes | None], timeout: float
) -> tuple[int, float]:
    """Run argv in a pty; `on_output(seen, fd)` may return bytes to type. Returns (exit code, seconds)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    seen = bytearray()
    try:
        while time.monotonic() - t0 < timeout:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += ANSI.sub(b"", chunk)
            keys = on_output(bytes(seen), fd)
            if keys:
                os.write(fd, keys)
        else:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), time.monotonic() - t0
