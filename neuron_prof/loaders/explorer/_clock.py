"""Device-profile times onto the host clock, through the executions both profiles saw.

Sources: aws-neuron-sdk tools/neuron-explorer glossary.rst (the device profile uses the device clock, the system
profile the host clock) and profile-schema-reference.rst, schema 7.4.0: ``ExecutionInfo.execution_start_ts`` /
``execution_end_ts`` are relative to the start of the profile, ``Metadata.first_hw_timestamp`` is the first
timestamp of the (device) trace, ``Metadata.first_ts`` the same instant in Unix time format
(``1970-01-01 00:00:00+00:00``); ``nc_exec_running`` in ``SystemProfileEvents`` is a NEFF execution on a core,
host clock (Unix ns).

Anchors, best first:

1. **executions**: execution k of ExecutionInfo (device clock ``first_hw_timestamp + execution_*_ts``) is one
   ``nc_exec_running`` of the same process and logical core. A device profile covers a run of consecutive
   executions (a window): the run is found by comparing durations and the gaps between executions
   (`pair`). Times map piecewise linearly through the paired (start, end) knots: a row inside an execution
   stays inside it whatever the offset between the clocks and their drift.
2. **first_ts**: no execution pairs: ``first_hw_timestamp`` is ``Metadata.first_ts`` (one offset, no drift).
3. **unix**: the device times already read as Unix ns (a tool that aligned them): kept.
4. none: kept as they are; the caller warns and the device rows are not placed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from neuron_prof.model.order import searchsorted

UNIX_NS_MIN = 1_000_000_000_000_000_000
"""Times above this many ns (2001-09-09) are Unix ns."""
MAX_PAIR_WORK = 50_000_000
"""Offsets x executions compared at most when looking for the window (beyond: the durations are sampled)."""


@dataclass(frozen=True)
class DeviceClock:
    """Device ns -> host (Unix) ns."""

    how: str
    """"executions", "first_ts", "unix" or "none"."""
    knots_dev: np.ndarray
    knots_host: np.ndarray
    offset: int = 0
    paired: int = 0
    """Executions paired (how == "executions")."""
    note: str = ""
    """A warning about the pairing (ambiguous window, durations that disagree), or ''."""
    pair_offset: int = 0
    """Device execution i is host execution i + pair_offset (how == "executions")."""

    def to_host(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        if self.how != "executions":
            return t + self.offset
        x, y = self.knots_dev, self.knots_host
        # piecewise linear through the knots, in integer differences (Unix ns do not fit a float's 53 bits)
        i = np.clip(searchsorted(x, t, "right") - 1, 0, len(x) - 2) if len(x) > 1 else np.zeros(len(t), int)
        j = np.minimum(i + 1, len(x) - 1)
        dx, dy = x[j] - x[i], y[j] - y[i]
        frac = np.clip((t - x[i]).astype(np.float64) / np.maximum(dx, 1), 0.0, 1.0)
        out = y[i] + np.rint(frac * dy).astype(np.int64)
        # beyond the first / last paired execution: one clock offset (slope 1) from the nearest knot
        lo, hi = t < x[0], t > x[-1]
        out[lo] = y[0] + (t[lo] - x[0])
        out[hi] = y[-1] + (t[hi] - x[-1])
        return out

    def span(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(host start, host duration) of device intervals."""
        a, z = self.to_host(start), self.to_host(np.maximum(end, start))
        return a, np.maximum(z - a, 0)

    @property
    def placed(self) -> bool:
        return self.how != "none"


def pair(dev_start: np.ndarray, dev_end: np.ndarray, host_start: np.ndarray, host_end: np.ndarray
         ) -> tuple[int, int, bool]:
    """Offset `o` (device execution i is host execution i + o), the number paired, and whether another offset
    fits as well (the window is ambiguous). Durations and the gaps between executions are compared as relative
    differences; the shorter sequence slides along the longer."""
    n, m = len(dev_start), len(host_start)
    if not n or not m:
        return 0, 0, False
    sig_d = _signature(dev_start, dev_end)
    sig_h = _signature(host_start, host_end)
    short, long_, sign = (sig_d, sig_h, 1) if n <= m else (sig_h, sig_d, -1)
    k = len(short)
    span = len(long_) - k + 1
    step = max(1, (span * k) // MAX_PAIR_WORK)
    cols = np.arange(0, k, step)
    win = np.lib.stride_tricks.sliding_window_view(long_, k, axis=0)  # (span, 2, k)
    diff = np.abs(win[:, :, cols] - short.T[None, :, cols])
    diff[:, 1, -1] = 0  # the gap after the last execution of the window is no part of it
    cost = diff.mean(axis=(1, 2))
    best = int(np.argmin(cost))
    tied = int((cost <= cost[best] + 1e-9).sum()) > 1
    return sign * best, min(n, m), tied


def _signature(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(n, 2): log duration of each execution and log gap to the next (the last gap 0)."""
    d = np.log1p(np.maximum(end - start, 0).astype(np.float64))
    g = np.zeros(len(start))
    g[:-1] = np.log1p(np.maximum(start[1:] - end[:-1], 0).astype(np.float64))
    return np.column_stack([d, g])


def from_executions(dev_start: np.ndarray, dev_end: np.ndarray, host_start: np.ndarray, host_end: np.ndarray
                    ) -> DeviceClock | None:
    """The clock through paired executions (device and host starts sorted); None when none pair."""
    o, n, tied = pair(dev_start, dev_end, host_start, host_end)
    if not n:
        return None
    d = np.arange(len(dev_start))
    h = d + o
    ok = (h >= 0) & (h < len(host_start))
    d, h = d[ok], h[ok]
    if not len(d):
        return None
    kd = np.column_stack([dev_start[d], np.maximum(dev_end[d], dev_start[d])]).ravel()
    kh = np.column_stack([host_start[h], np.maximum(host_end[h], host_start[h])]).ravel()
    kh = np.maximum.accumulate(kh)  # knots must not go back (overlapping host events)
    note = ""
    rel = np.abs((host_end[h] - host_start[h]) - (dev_end[d] - dev_start[d])) / np.maximum(dev_end[d] - dev_start[d], 1)
    if tied and len(host_start) != len(dev_start):
        note = (f"the device profile's {len(dev_start)} executions fit more than one run of the system profile's "
                f"{len(host_start)} nc_exec_running events equally well: the first is taken")
    elif len(rel) and float(np.median(rel)) > 0.25:
        note = (f"the device profile's executions last {float(np.median(rel)):.0%} longer or shorter than the "
                f"nc_exec_running events they are paired with: device rows may be misplaced")
    return DeviceClock("executions", kd, kh, 0, int(len(d)), note, o)


def parse_first_ts(text: object) -> int | None:
    """``Metadata.first_ts`` (``2025-12-18 15:35:56.592459482 +0000 UTC``, ``1970-01-01 00:00:00+00:00``, or
    digits) as Unix ns; None when it does not read."""
    s = str(text or "").strip()
    if not s:
        return None
    if s.isdigit():
        return int(s)
    m = re.match(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?\s*([+-]\d\d:?\d\d|Z)?", s)
    if m is None:
        return None
    tz = (m.group(3) or "+00:00").replace("Z", "+00:00")
    if ":" not in tz:
        tz = tz[:3] + ":" + tz[3:]
    try:
        base = datetime.fromisoformat(m.group(1).replace(" ", "T") + tz)
    except ValueError:
        return None
    frac = (m.group(2) or "").ljust(9, "0")
    return int(base.timestamp()) * 1_000_000_000 + int(frac or 0)


def fallback(first_hw: int | None, first_ts: object, sample: np.ndarray) -> DeviceClock:
    """Without paired executions: ``first_ts`` for ``first_hw_timestamp``, else Unix-looking times kept."""
    empty = np.zeros(0, dtype=np.int64)
    unix = parse_first_ts(first_ts)
    if first_hw is not None and unix is not None and unix >= UNIX_NS_MIN:
        return DeviceClock("first_ts", empty, empty, unix - int(first_hw))
    if len(sample) and int(np.min(sample)) >= UNIX_NS_MIN:
        return DeviceClock("unix", empty, empty, 0)
    return DeviceClock("none", empty, empty, 0)
