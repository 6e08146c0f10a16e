"""Rule 5 of the call sites (`callsites`): a slice in a backward is charged to the forward op that made its autograd
node, marked with the node; a window of host positions at a time.

Per backward slice the rule reads a key of six numbers: the site it is charged to, the node's name, the forward
op's name, whether the forward op is known, whether the slice is the user's own code (or a node no forward op
makes), and the forward site of a backward() the user wrote. Each distinct key becomes one Site (`make`); a
training trace has millions of backward slices but few distinct keys. The keys are made and reduced to their
distinct rows one window at a time (`unique_rows`) (a code per slice kept in `Context.empty`, a mapped file for a big cached
trace), the Sites are made for the distinct keys in sorted order (the order one `np.unique` over every key gives,
so the site ids are those of a whole-trace pass), and the slices' sites are written after every key was read
(a key reads the sites of the slice's backward root, which may lie in another window).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.backward import NO_FORWARD, NOT_BACKWARD, backward_of
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.model.order import searchsorted, unique_rows
from neuron_prof.model.windows import row_windows

Key = tuple[int, int, int, int, int, int]
"""(site charged, node name id, forward op name id, forward op known, user's own code or no forward op, forward
site of a backward() the user wrote; 0 for none)."""


def charge_backward(ctx: Context, pos: np.ndarray, every: bool, loc: Callable[[np.ndarray], np.ndarray],
                    site: np.ndarray, make: Callable[[Key], int]) -> None:
    """Write rule 5's site into `site` (aligned with host positions `pos`, ascending; `every`: all of them) for
    each backward slice; `loc` maps host positions to indices into `pos`; `make(key)` gives a key's site id."""
    bw = backward_of(ctx)
    m = len(pos)

    def in_backward(a: int, z: int) -> np.ndarray:
        f = bw.forward[a:z] if every else bw.forward[pos[a:z]]
        return np.flatnonzero(f != NOT_BACKWARD) + a

    total = sum(len(in_backward(a, z)) for a, z in row_windows(ctx, m))
    if not total:
        return
    rows = host_nesting(ctx).rows
    last_row = max(len(rows) - 1, 0)
    codes = ctx.empty(total, np.int64)
    distinct: list[np.ndarray] = []
    at = seen = 0
    for a, z in row_windows(ctx, m):  # every key read before any site is written
        inb = in_backward(a, z)
        if not len(inb):
            continue
        g = pos[inb]  # host positions
        fwd = bw.forward[g]
        fpos = searchsorted(rows, np.maximum(fwd, 0))
        fpos = np.where(fwd >= 0, np.minimum(loc(np.minimum(fpos, last_row)), max(m - 1, 0)), inb)
        # the user's own code running in the backward (a custom Function's backward, a hook) has lines of its
        # own, other than those of the backward span around it (the backward() call): it keeps them
        own_code = site[inb] != site[loc(np.maximum(bw.root[g], 0))]
        use_fwd = (fwd >= 0) & ~own_code
        # a node no forward op makes (AccumulateGrad, where DDP's hooks all-reduce): the backward() call
        base = np.where(use_fwd, site[fpos], site[inb])
        fsite = np.where(own_code & (fwd >= 0), site[fpos], 0)  # a backward() the user wrote: its forward
        keys = np.stack([base, bw.node[g], bw.forward_op[g], fwd >= 0, own_code | (fwd == NO_FORWARD), fsite],
                        axis=1)
        uk, _, inv = unique_rows(keys)
        codes[at:at + len(inb)] = inv + seen
        distinct.append(uk)
        at += len(inb)
        seen += len(uk)
    uk, _, back = unique_rows(np.concatenate(distinct))
    new = np.asarray([make(tuple(k)) for k in uk.tolist()], dtype=np.int64)[back]  # type: ignore[arg-type]
    at = 0
    for a, z in row_windows(ctx, m):
        inb = in_backward(a, z)
        site[inb] = new[codes[at:at + len(inb)]]
        at += len(inb)
