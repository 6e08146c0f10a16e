"""Call sites in analysis: the one place a finding gets its `call_site`, the user's stack and the module.

The rules for reading a stack are `neuron_prof.model.callsite`'s (shared with capture). An event's Site comes
from what the trace says about it, in this order:

1. a probe event that recorded where it happened (``call_site`` / ``stack`` / ``module`` args: probes that
   run inside the user's call read the live Python stack; probes that join host ops copy the op's site);
2. a host op's ``Call stack`` (exact in neuron-prof captures; in other traces only function entry lines, so
   the call site stays empty and the function is named, see `Site.reason`);
3. a host slice without a stack: the nearest enclosing slice that has one (nested ops inherit the site of
   the op the user's code called);
4. a probe slice that a flow links to the host op that paid for it: that op's site;
5. **backward**: a host slice in autograd's backward pass (and a probe slice whose flow comes from one) takes
   the site of the forward op that created its autograd node (`_backward`), marked with the node
   (`Site.backward`): its line is the forward line the user wrote, never ``loss.backward()``. When that
   forward op is not in the trace, the site names no line and says why. Code the user wrote that runs in
   the backward (a custom ``autograd.Function.backward``, a hook) keeps its own lines, with its forward's
   line as `Site.forward_site`. A node no forward op makes (``AccumulateGrad``, where DDP's reducer hooks
   launch their all-reduces) is charged to the ``backward()`` call that started the pass;
6. **in time**: a host slice that nothing above places (a library's own thread: gloo's run loop doing DDP's
   collectives) takes the site of what the host was running when it started on the other threads (`at`):
   the user's call it serves (``DDP(model)``, ``loss.backward()``). Only in traces whose stacks are exact.

Host slices get their sites in one vectorised pass (`_solve`: rules 2, 3 and 5): over every host slice for
the lines view (`host_sites`), or over the few rows `of_row` / `of_rows` are asked about and what their sites
are made of (their enclosing slices, in a backward the forward op's), so the first pass (`overview`), whose
findings name a few rows, does not pay for a million; asked about many, they build the whole table.

    sites = sites_of(ctx)
    sites.of_row(r).call_site          # "train.py:13" or ""
    sites.at(t_ns)                     # whatever the host ran at t
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from neuron_prof.analysis.context import ABSENT, PICK_CHUNK, Context
from neuron_prof.analysis.sites.backward import NOT_BACKWARD, backward_of, node_name
from neuron_prof.analysis.sites.backward_charge import Key, charge_backward
from neuron_prof.analysis.sites.host import host_nesting, host_stacks_at
from neuron_prof.model import Arg, KinetoCat, TrackKind
from neuron_prof.model.callsite import (
    NO_STACK,
    NO_USER_FRAME,
    USER,
    Site,
    file_kind,
    parse_frame,
    site_from_stack,
    stack_is_exact,
    user_files_of,
)
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows

CALL_STACK = "Call stack"
__all__ = ["NO_STACK", "HostSites", "Site", "Sites", "sites_of"]
_SITE_KEY_TEXTS = (b'"Call stack"', b'"call_site"', b'"site_unknown"')


@dataclass(frozen=True, eq=False)
class HostSites:
    """Every host slice's Site, columnar: ``sites[site[i]]`` is the Site of host row ``rows[i]``."""

    rows: np.ndarray
    """Host slice rows, ascending (`host_nesting(ctx).rows`)."""
    site: np.ndarray
    """Index into `sites` per row (0: nothing places it: `Sites.none`)."""
    sites: list[Site]

    def of(self, row: int) -> Site | None:
        i = int(searchsorted(self.rows, row))
        return self.sites[int(self.site[i])] if i < len(self.rows) and self.rows[i] == row else None


_LAZY_SHARE = 16
_LAZY_BATCHES = 64
"""`Sites` works out the sites of the host rows it is asked about alone until it has been asked about one host
row in `_LAZY_SHARE`, or `_LAZY_BATCHES` times: then it builds them all (one vectorised pass)."""


class _Interner:
    """Site -> its id in `sites` (0: `none`, the Site of a row nothing places), each distinct Site once."""

    def __init__(self, none: Site) -> None:
        self.sites: list[Site] = [none]
        self._ids: dict[Site, int] = {none: 0}

    def __call__(self, s: Site) -> int:
        i = self._ids.get(s)
        if i is None:
            i = self._ids[s] = len(self.sites)
            self.sites.append(s)
        return i


_OF_ARGS = (Arg.CALL_SITE, Arg.MODULE, Arg.STACK, CALL_STACK, "site_unknown")
"""The args keys `Sites.of_args` reads."""
SITE_KEYS_HELD = 1 << 16
"""Distinct sets of those keys' texts `Sites` remembers the site of while it reads a column of rows (then it
starts again): a big trace's distinct call stacks need not all stay in memory."""


def _str_list(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in v) if isinstance(v, (list, tuple)) else ()


class Sites:
    """Site lookups over one trace (cached per row)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        md = ctx.trace.metadata
        self.exact = stack_is_exact(md)
        self.none = NO_USER_FRAME if self.exact else NO_STACK
        """The Site of an event nothing places: with stacks recorded, no frame of the user's was on them."""
        self.user_files = user_files_of(md)
        self._rows: dict[int, Site] = {}
        self._flow_src: dict[int, int] | None = None
        self._full: HostSites | None = None
        self._host: dict[int, Site | None] = {}
        """Host sites worked out for some rows only (`_host_of`), before `host_sites` is built."""
        self._asked = [0, 0]
        """Host rows and batches `_host_of` worked out alone so far."""
        self._in_time_of: dict[int, Site] = {}
        """Outermost host slice -> its site by rule 6 (`_in_time`)."""

    def of_args(self, args: dict[str, Any]) -> Site | None:
        """The Site an event's own args give (None when they say nothing)."""
        cs = args.get(Arg.CALL_SITE)
        module = args.get(Arg.MODULE)
        module = module if isinstance(module, str) else ""
        if isinstance(cs, str) and cs:
            stack = _str_list(args.get(Arg.STACK))
            if not stack and isinstance(args.get(Arg.STACK), str):  # a Kineto stack copied by a probe
                stack = site_from_stack(str(args[Arg.STACK]), self.exact, self.user_files).stack
            return Site(call_site=cs, stack=stack, module=module)
        stack_s = args.get(CALL_STACK)
        if isinstance(stack_s, str) and stack_s:
            got = site_from_stack(stack_s, self.exact, self.user_files)
            if module and not got.module:
                got = Site(got.call_site, got.stack, module, got.reason, got.function)
            return got
        reason = args.get("site_unknown")
        if isinstance(reason, str) and reason:
            return Site(module=module, reason=reason)
        return None

    def of_row(self, row: int) -> Site:
        """The Site of slice `row` (rules 1-5 of the module docstring)."""
        got = self._rows.get(row)
        if got is not None:
            return got
        site = self._host_of([row])[0]
        if site is None:  # a probe or device slice
            site = self.of_args(self.ctx.slice_args(row))
            src = self._flows().get(row)
            if src is not None and src != row:
                up = self._host_of([src])[0]
                up = up if up is not None else self.of_row(src)
                if site is None or (not site.call_site and not site.stack) or up.backward:
                    site = up
        got = site if site is not None else self.none
        if got is NO_STACK:
            got = self.none
        if got is self.none and self.exact and self._is_host(row):
            got = self._in_time(row)
        self._rows[row] = got
        return got

    def _is_host(self, row: int) -> bool:
        rows = host_nesting(self.ctx).rows
        i = int(searchsorted(rows, row))
        return i < len(rows) and int(rows[i]) == row

    def _in_time(self, row: int) -> Site:
        """Rule 6: a host slice nothing places takes what the other threads ran when it started (`at`); the
        site of its outermost enclosing slice is worked out once for all the slices inside it."""
        n = host_nesting(self.ctx)
        i = int(searchsorted(n.rows, row))
        while int(n.parent_pos[i]) >= 0:
            i = int(n.parent_pos[i])
        top = int(n.rows[i])
        got = self._in_time_of.get(top)
        if got is None:
            sl = self.ctx.trace.slices
            got = self._in_time_of[top] = self.at(int(sl.ts_ns[top]), besides=int(sl.track[top]))
        return got

    def of_rows(self, rows: Iterable[int]) -> list[Site]:
        """`of_row` of each of `rows`, the host sites they need worked out together (one pass for a column of
        rows, where `of_row` one at a time would work out each alone)."""
        rows = [int(r) for r in rows]
        flows = self._flows()
        self._host_of(rows + [flows[r] for r in rows if r in flows])
        return [self.of_row(r) for r in rows]

    def stack_at(self, t_ns: int, max_len: int = 12, besides: int | None = None) -> list[int]:
        """Host slice rows the host was running at `t_ns`, outermost first: the thread running a backward op
        when one is (the thread that called ``backward()`` only waits for it then), else the deepest stack;
        on any thread but track `besides`."""
        track = self.ctx.trace.slices.track
        stacks = [c for c in host_stacks_at(self.ctx, t_ns) if c and int(track[c[0]]) != besides]
        last = self._host_of([c[-1] for c in stacks])
        bwd = [c for c, s in zip(stacks, last, strict=True) if s is not None and s.backward]
        pick = max(bwd or stacks, key=len, default=[])
        return pick[-max_len:]

    def at(self, t_ns: int, besides: int | None = None) -> Site:
        """The Site of whatever the host was running at `t_ns` (`stack_at`; on any thread but track `besides`)."""
        stack = self.stack_at(t_ns, besides=besides)
        self._host_of(stack)
        for r in reversed(stack):
            s = self.of_row(r)
            if s.call_site or s.stack:
                return s
        return self.none

    def host_sites(self) -> HostSites:
        """Every host slice's Site (rules 2, 3 and 5), computed once."""
        if self._full is None:
            self._full = self.ctx.memo("host_sites", self._build_host)
        return self._full

    # ---- internals --------------------------------------------------------------------------------------
    def _host_of(self, rows: list[int]) -> list[Site | None]:
        """The Site of each of `rows` that is a host slice (None for the others): from `host_sites` once it is
        built, else worked out for these rows alone (`_solve` over what they need), so a first pass that asks
        about a few rows does not pay for every host slice; a column of rows builds them all."""
        if self._full is not None:
            return [self._full.of(r) for r in rows]
        todo = np.asarray([r for r in dict.fromkeys(rows) if r not in self._host], dtype=np.int64)
        if len(todo):
            hrows = host_nesting(self.ctx).rows
            at = np.minimum(searchsorted(hrows, todo), max(len(hrows) - 1, 0))
            ok = hrows[at] == todo if len(hrows) else np.zeros(len(todo), dtype=bool)
            self._host.update(dict.fromkeys(todo[~ok].tolist()))
            pos = at[ok]
            if len(pos):
                self._asked[0] += len(pos)
                self._asked[1] += 1
                if self._asked[0] * _LAZY_SHARE > len(hrows) or self._asked[1] > _LAZY_BATCHES:
                    self.host_sites()
                    return self._host_of(rows)
                pos = self._closure(pos)
                sid = _Interner(self.none)
                site = self._solve(pos, sid)
                for r, i in zip(hrows[pos].tolist(), site.tolist(), strict=True):
                    self._host[r] = sid.sites[i]
        return [self._host[r] for r in rows]

    def _closure(self, pos: np.ndarray) -> np.ndarray:
        """`pos` (host positions) with what their sites are made of: their enclosing slices (rule 3) and, in a
        backward, the forward op and the outermost backward span (rule 5), and theirs in turn; ascending."""
        n = host_nesting(self.ctx)
        bw = backward_of(self.ctx)
        rows = n.rows
        last = max(len(rows) - 1, 0)
        have = np.zeros(len(rows), dtype=bool)
        new = sorted_unique(pos)
        while len(new):
            have[new] = True
            par = n.parent_pos[new]
            up = [par[par >= 0]]
            inb = new[bw.forward[new] != NOT_BACKWARD]
            if len(inb):
                fwd = bw.forward[inb]
                up += [np.minimum(searchsorted(rows, fwd[fwd >= 0]), last), np.maximum(bw.root[inb], 0)]
            cand = sorted_unique(np.concatenate(up))
            new = cand[~have[cand]]
        return np.flatnonzero(have)

    def _build_host(self) -> HostSites:
        rows = host_nesting(self.ctx).rows
        sid = _Interner(self.none)
        site = self._solve(np.arange(len(rows), dtype=rows.dtype), sid)
        return HostSites(rows=rows, site=site, sites=sid.sites)

    def _solve(self, pos: np.ndarray, sid: _Interner) -> np.ndarray:
        """Site ids (`sid`) of host positions `pos` (ascending; with their `_closure`, or all of them)."""
        ctx = self.ctx
        sl = ctx.trace.slices
        n = host_nesting(ctx)
        m = len(pos)
        every = m == len(n.rows)
        rows = n.rows if every else n.rows[pos]  # all of them: the shared arrays read in place, not copied

        def loc(p: np.ndarray) -> np.ndarray:  # host positions (in `pos`) -> indices into `pos`
            return p if every else searchsorted(pos, p)

        own = np.zeros(m, dtype=np.int32)  # site ids: fewer than the host rows, under 2^31 (`row_dtype`)
        strong = np.zeros(m, dtype=bool)
        if every:  # only the documents whose text names a key `of_args` reads
            off = ctx.trace.args.buffers[1]
            # where the keys `of_args` looks for appear: the documents that may give a site (a superset: the
            # text may sit inside a value; each is then read exactly); packed, a window of the blob at a time
            hits = ctx.trace.args.find_all(_SITE_KEY_TEXTS)
            docs = sorted_unique(searchsorted(off, hits, side="right") - 1)
            del hits
            parts = [np.zeros(0, dtype=np.int64)]
            for a, z in row_windows(ctx, m if len(docs) else 0):  # a window of host rows at a time
                d = sl.args[rows[a:z]]
                at = np.minimum(searchsorted(docs, d), len(docs) - 1)  # `docs` ascends: isin by binary search
                parts.append(np.flatnonzero(docs[at] == d) + a)
            sel = np.concatenate(parts)
            del parts
        else:
            sel = np.flatnonzero(sl.args[rows] >= 0)
        if len(sel):
            self._own_sites(rows, sel, own, strong, sid)
        if not self.exact:  # torch.profiler's Python frames ("train.py(12): forward"): the function, no line
            self._frames_as_sites(rows, own, strong, sid)
        # rule 3: the nearest enclosing slice with a site (level by level down the nesting)
        if every:  # positions are host positions: the nesting's own parent positions
            depth, pos_parent = n.depth, n.parent_pos
        else:
            depth, parent = n.depth[pos], n.parent_pos[pos]
            pos_parent = np.full(m, -1, dtype=parent.dtype)
            has = parent >= 0
            pos_parent[has] = loc(parent[has])
        inh = own.copy()  # in place, in `own`'s int32: no int64 column over every row
        inh[~strong] = -1
        del strong
        for level in range(2, int(depth.max(initial=1)) + 1):
            for a, z in row_windows(ctx, m):  # a level's parents are done before it: any window order
                here = np.flatnonzero((depth[a:z] == level) & (inh[a:z] < 0) & (pos_parent[a:z] >= 0)) + a
                if len(here):
                    inh[here] = inh[pos_parent[here]]
        site = inh
        np.copyto(site, own, where=site < 0)
        del own
        # rule 5: backward -> the forward op's site, marked with the autograd node
        charge_backward(ctx, pos, every, loc, site, lambda key: self._backward_site(key, sid))
        return site

    def _backward_site(self, key: Key, sid: _Interner) -> int:
        """The site id of one distinct key of rule 5 (`backward_charge.Key`)."""
        b, nd, fo, known, mine, fs = key
        s = sid.sites[b]
        node = node_name(self.ctx.trace.s(nd))
        if known or mine:
            s = dataclasses.replace(s, backward=node, forward_op=self.ctx.trace.s(fo) if known else "",
                                    forward_site=sid.sites[fs].call_site if fs else "")
        else:
            called = f"; backward() called at {s.call_site}" if s.call_site else ""
            s = Site(stack=(), module=s.module, backward=node, reason=(
                f"ran in the backward of a forward op that is not in the trace ({node}{called})"))
        return sid(s)

    def _own_sites(self, rows: np.ndarray, sel: np.ndarray, own: np.ndarray, strong: np.ndarray,
                   sid: _Interner) -> None:
        """Rule 1 and 2 for host positions `sel` (indices into `rows`): each one's site id and whether it is
        strong (a line or a stack), written into `own` and `strong`. Only the keys `of_args` reads, as their JSON
        text (`pick_columns` raw): the same texts give the same Site (a stack repeats for every call of an op
        from one line), so each distinct set is decoded once (`SITE_KEYS_HELD` remembered); a window of
        `PICK_CHUNK` rows at a time, the codes gathered in an array (no Python object per row kept)."""
        args = self.ctx.trace.slices.args
        seen: dict[tuple[Any, ...], int] = {}
        for k0 in range(0, len(sel), PICK_CHUNK):
            part = sel[k0:k0 + PICK_CHUNK]
            cols = self.ctx.pick_columns(args[rows[part]], _OF_ARGS, raw=True)
            codes = np.empty(len(part), dtype=np.int64)  # 2 * site id + strong; -1: the args say nothing
            for j, key in enumerate(zip(*cols, strict=True)):
                code = seen.get(key)
                if code is None:
                    if len(seen) >= SITE_KEYS_HELD:
                        seen.clear()
                    code = seen[key] = self._code_of_raw(key, sid)
                codes[j] = code
            has = codes >= 0
            own[part[has]] = codes[has] >> 1
            strong[part[has]] = (codes[has] & 1).astype(bool)

    def _code_of_raw(self, key: tuple[Any, ...], sid: _Interner) -> int:
        """`_own_sites`' code of one set of raw values of `_OF_ARGS`."""
        vals = {k: msgspec.json.decode(v) for k, v in zip(_OF_ARGS, key, strict=True) if v is not ABSENT}
        s = self.of_args(vals)
        return -1 if s is None else 2 * sid(s) + bool(s.call_site or s.stack)

    def _frames_as_sites(self, rows: np.ndarray, own: np.ndarray, strong: np.ndarray, sid: _Interner) -> None:
        """Python-frame slices of the user's files without a site of their own name their function (a trace of
        torch.profiler's own, whose frames carry only entry lines): the ops inside them inherit it."""
        tr = self.ctx.trace
        py = tr.strings.get(KinetoCat.PYTHON)
        if py is None:
            return
        sel = np.flatnonzero((tr.slices.cat[rows] == py) & ~strong)
        names = tr.slices.name[rows[sel]]
        for nid in sorted_unique(names).tolist():
            f = parse_frame(tr.s(int(nid)))
            if f is None or not self._user(f[0]):
                continue
            frame = f"{f[0]}:0 {f[2]}"
            site = Site(stack=(frame,), reason="the trace records only function entry lines (torch.profiler "
                        "with_stack)", function=f"{f[0]} {f[2]}")
            hit = sel[names == nid]
            own[hit] = sid(site)
            strong[hit] = True

    def _user(self, path: str) -> bool:
        return path in self.user_files if self.user_files is not None else file_kind(path) == USER

    def _flows(self) -> dict[int, int]:
        """Probe slice -> the host slice a flow links it from (compile/fallback/sync probes draw these)."""
        if self._flow_src is None:
            fl = self.ctx.trace.flows
            probe = np.concatenate([self.ctx.rows(k) for k in (TrackKind.COMPILE, TrackKind.FALLBACK,
                                                               TrackKind.SYNC, TrackKind.COLLECTIVE)])
            m = np.isin(fl.dst, probe)
            self._flow_src = dict(zip(fl.dst[m].tolist(), fl.src[m].tolist(), strict=True))
        return self._flow_src


def sites_of(ctx: Context) -> Sites:
    """The Sites of a context (one per context, shared by every analysis)."""
    return ctx.memo("sites", lambda: Sites(ctx))  # type: ignore[no-any-return]
