"""Pairing for Chrome JSON events that come in halves: B/E per thread, async b/e (and n) per (pid, cat, id).

Rows come from `EventColumns` as tuples, in file order with a running index as the tie-breaker:
    begin_end: (ts_us, order, ph, track, name, cat, args)
    asyncs:    (ts_us, order, ph, pid, cat, id, name, args)
Slices out are (ts_us, dur_us, track, name, cat, args); instants (ts_us, track, name, cat, args).
A begin that never ends is closed at `end_us` (the end of the trace: a killed job's open spans stay
visible); an end without a begin is dropped. Both are counted into `warn`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

Row = tuple[Any, ...]


def merge_args(a: Any, b: Any) -> Any:
    """Args of a begin with those of its end (the end's win), as Perfetto merges them."""
    if isinstance(a, dict) and isinstance(b, dict) and b:
        return {**a, **b}
    return a if a else b


def pair_begin_end(rows: list[Row], end_us: float, warn: Counter[str]) -> list[Row]:
    """B/E pairs per track, nested as a stack: each E closes the latest open B of its thread."""
    rows.sort(key=lambda r: (r[3], r[0], r[1]))
    stacks: dict[int, list[Row]] = {}
    out: list[Row] = []
    unmatched = 0
    for r in rows:
        ts, _, ph, track, name, _cat, args = r
        st = stacks.setdefault(track, [])
        if ph == "B":
            st.append(r)
        elif st:
            b = st.pop()
            out.append((b[0], ts - b[0], track, b[4] if b[4] not in (None, "") else name, b[5],
                        merge_args(b[6], args)))
        else:
            unmatched += 1
    still_open = [b for st in stacks.values() for b in st]
    out += [(b[0], max(end_us - b[0], 0.0), b[3], b[4], b[5], b[6]) for b in still_open]
    if unmatched:
        warn["E events without a matching B skipped"] += unmatched
    if still_open:
        warn["B events without an E (closed at the end of the trace)"] += len(still_open)
    return out


def pair_async(rows: list[Row], end_us: float, track: Callable[[Any, Any], int],
               warn: Counter[str]) -> tuple[list[Row], list[Row]]:
    """Async spans on ASYNC tracks (`track(pid, name of the outermost span)`); an e closes the latest open
    b of its (pid, cat, id) with the same name, else the latest; n is an instant on the span's track."""
    rows.sort(key=lambda r: (r[0], r[1]))
    stacks: dict[tuple[Any, ...], list[Row]] = {}
    out: list[Row] = []
    instants: list[Row] = []
    unmatched = 0
    for r in rows:
        ts, _, ph, pid, cat, fid, name, args = r
        st = stacks.setdefault((pid, cat, fid), [])
        if ph == "b":
            st.append(r)
        elif ph == "n":
            instants.append((ts, track(pid, st[0][6] if st else name), name, cat, args))
        else:
            k = next((j for j in range(len(st) - 1, -1, -1) if st[j][6] == name), len(st) - 1)
            if k < 0:
                unmatched += 1
                continue
            b = st.pop(k)
            root = st[0][6] if st else b[6]
            out.append((b[0], ts - b[0], track(pid, root), b[6], b[4], merge_args(b[7], args)))
    still_open = [b for st in stacks.values() for b in st]
    out += [(b[0], max(end_us - b[0], 0.0), track(b[3], b[6]), b[6], b[4], b[7]) for b in still_open]
    if unmatched:
        warn["async end (e) events without a begin skipped"] += unmatched
    if still_open:
        warn["async begin (b) events without an end (closed at the end of the trace)"] += len(still_open)
    return out, instants
