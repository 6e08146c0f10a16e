"""The longest path through chains of nodes joined by zero-weight cross edges, columnar (numpy).

A chain is a sequence of nodes in time order (a host thread's points, a device queue's slice starts and ends);
the edge from each node to the next of its chain has a weight (working time, 0 for idle or waiting); cross
edges (a launch: host -> device, a synchronisation: device -> host) weigh 0 and go forward in time. Every
node may also start the path (weight 0 from the source) and every chain's last node ends it.

Along one chain the best distance is a prefix scan, ``dist[j] = W[j] + max_{i<=j}(c[i] - W[i])`` with ``W``
the chain's cumulative weight and ``c`` the best arrival by a cross edge (or 0): `np.maximum.accumulate`
over every chain at once. Cross edges into a chain need the other chains' distances first; a sync edge goes
from the device back to the host, so the timeline is cut into epochs at the sync edges' target times, each
epoch's chains are scanned after the earlier epochs', and within an epoch the scan is repeated until no
distance changes (a cross edge between two nodes of the same epoch: usually none, rarely more than two
rounds). A cross edge that goes back in time across an epoch's start (a device slice stamped before the
host call that launched it) is not followed.

    path = longest(time, chain, weight, src, dst, cuts)   # chain-edge start nodes, in time order
"""

from __future__ import annotations

import numpy as np

from neuron_prof.model.order import searchsorted

MAX_ROUNDS = 64
"""Scans of one epoch at most (each adds a cross edge inside the epoch to what the path may take)."""


def longest(time: np.ndarray, chain: np.ndarray, weight: np.ndarray, src: np.ndarray, dst: np.ndarray,
            cuts: np.ndarray) -> np.ndarray:
    """Nodes `m` whose chain edge m -> m+1 is on the longest path (weight > 0 only), in path order.

    Nodes are numbered by chain, each chain's nodes contiguous and in time order (`time`, `chain`);
    `weight[m]` is the weight of the edge m -> m+1 (ignored for a chain's last node); `src`/`dst` the cross
    edges; `cuts` the epoch boundaries (times, sorted).
    """
    n = len(time)
    if not n:
        return np.zeros(0, np.int64)
    time, chain = np.asarray(time, np.int64), np.asarray(chain, np.int64)
    w = np.asarray(weight, np.int64).copy()
    last = np.r_[chain[1:] != chain[:-1], True]
    w[last] = 0
    first = np.r_[True, chain[1:] != chain[:-1]]
    epoch = searchsorted(np.asarray(cuts, np.int64), time, "right")
    order = np.lexsort((np.arange(n), epoch))  # by epoch; chains stay contiguous and in order inside one
    n_ep = int(epoch.max()) + 1
    ep_at = searchsorted(epoch[order], np.arange(n_ep + 1))
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    keep = epoch[src] <= epoch[dst]
    src, dst = src[keep], dst[keep]
    by_ep = np.argsort(epoch[dst], kind="stable")
    src, dst = src[by_ep], dst[by_ep]
    edge_at = searchsorted(epoch[dst], np.arange(n_ep + 1))
    span = int(time.max() - time.min()) + int(w.sum()) + 1
    dist = np.full(n, -1, np.int64)
    entry = np.arange(n, dtype=np.int64)
    loc = np.zeros(n, np.int64)
    for k in range(n_ep):
        ids = order[ep_at[k]:ep_at[k + 1]]
        if not len(ids):
            continue
        _scan(ids, w, first, dist, entry, loc, src[edge_at[k]:edge_at[k + 1]], dst[edge_at[k]:edge_at[k + 1]],
              epoch, k, span)
    tails = np.flatnonzero(last)
    j = int(tails[np.argmax(dist[tails])])
    if dist[j] <= 0:
        return np.zeros(0, np.int64)
    into = np.argsort(dst, kind="stable")
    d_sorted = dst[into]
    parts: list[np.ndarray] = []
    for _ in range(n):  # each step goes back to an earlier node or along a zero-weight edge: n at most
        i = int(entry[j])
        on = np.flatnonzero(w[i:j] > 0) + i
        parts.append(on[::-1])
        c = int(dist[i])
        if c <= 0:
            break
        if not first[i] and dist[i - 1] >= 0 and dist[i - 1] + w[i - 1] == c:
            if w[i - 1] > 0:
                parts.append(np.array([i - 1], np.int64))
            j = i - 1
            continue
        lo, hi = searchsorted(d_sorted, [i, i + 1])
        came = src[into[lo:hi]]
        came = came[dist[came] == c]
        if not len(came):
            break
        j = int(came[0])
    out: np.ndarray = np.concatenate(parts)[::-1] if parts else np.zeros(0, np.int64)
    return out


def _scan(ids: np.ndarray, w: np.ndarray, first: np.ndarray, dist: np.ndarray, entry: np.ndarray,
          loc: np.ndarray, es: np.ndarray, ed: np.ndarray, epoch: np.ndarray, k: int, span: int) -> None:
    """Distances of one epoch's nodes `ids` (chain segments of consecutive ids), in place."""
    m = len(ids)
    seg_first = np.r_[True, ids[1:] != ids[:-1] + 1] | first[ids]
    seg = np.cumsum(seg_first) - 1
    heads = np.flatnonzero(seg_first)
    carry = np.zeros(len(heads), np.int64)
    cont = ~first[ids[heads]]  # the chain goes on from an earlier epoch: its distance carries over
    prev = ids[heads[cont]] - 1
    carry[cont] = np.maximum(dist[prev] + w[prev], 0)
    wi = w[ids]
    excl = np.cumsum(wi) - wi
    big = 4 * span
    if len(heads) * big >= 1 << 62:
        raise OverflowError("too many chains for one scan")
    W = excl - excl[heads][seg]
    off = seg * big
    loc[ids] = np.arange(m)
    inner = epoch[es] == k
    pos = np.arange(m)
    for _ in range(MAX_ROUNDS):
        c = np.zeros(m, np.int64)
        c[heads] = carry
        if len(es):
            np.maximum.at(c, loc[ed], dist[es])
        v = c - W + off
        acc = np.maximum.accumulate(v)
        arg = np.maximum.accumulate(np.where(v == acc, pos, 0))
        new = W + acc - off
        done = bool(np.array_equal(new, dist[ids]))
        dist[ids] = new
        entry[ids] = ids[arg]
        if done or not inner.any():
            return
