"""Call sites in analysis: the one place a finding gets its `call_site`, the user's stack and the module.

The rules for reading a stack are `neuron_prof.model.callsite`'s (shared with capture). An event's Site comes
from what the trace says about it, in this order:

1. a probe event that recorded where it happened (``call_site`` / ``stack`` / ``module`` args: probes that
   run inside the user's call read the live Python stack; probes that join host ops copy the op's site);
2. a host op's ``Call stack`` (exact in neuron-prof captures; in other traces only function entry lines, so
   the call site stays empty and the function is named, see `Site.reason`);
3. a host slice without a stack: the nearest enclosing slice that has one (nested ops inherit the site of
   the op the user's code called);
4. a probe slice that a flow links to the host op that paid for it: that op's site.

    sites = sites_of(ctx)
    sites.of_row(r).call_site          # "train.py:13" or ""
    sites.at(t_ns)                     # whatever the host ran at t
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis._context import Context
from neuron_prof.analysis._host import host_nesting, host_stack_at
from neuron_prof.model import Arg, TrackKind
from neuron_prof.model.callsite import NO_STACK, Site, site_from_stack, stack_is_exact, user_files_of

CALL_STACK = "Call stack"
__all__ = ["NO_STACK", "Site", "Sites", "sites_of"]


def _str_list(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in v) if isinstance(v, (list, tuple)) else ()


class Sites:
    """Site lookups over one trace (cached per row)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        md = ctx.trace.metadata
        self.exact = stack_is_exact(md)
        self.user_files = user_files_of(md)
        self._rows: dict[int, Site] = {}
        self._flow_src: dict[int, int] | None = None

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
        """The Site of slice `row` (rules 1-4 of the module docstring)."""
        got = self._rows.get(row)
        if got is not None:
            return got
        ctx = self.ctx
        site = self.of_args(ctx.slice_args(row))
        if site is None or (not site.call_site and not site.stack):
            src = self._flows().get(row)
            if src is not None and src != row:
                site = self.of_row(src)
            else:
                up = self._enclosing(row)
                if up is not None:
                    site = up
        got = site if site is not None else NO_STACK
        self._rows[row] = got
        return got

    def at(self, t_ns: int) -> Site:
        """The Site of whatever the host was running at `t_ns` (the deepest host stack at that moment)."""
        for r in reversed(host_stack_at(self.ctx, t_ns)):
            s = self.of_row(r)
            if s.call_site or s.stack:
                return s
        return NO_STACK

    # ---- internals --------------------------------------------------------------------------------------
    def _enclosing(self, row: int) -> Site | None:
        """The Site of the nearest enclosing host slice that has one (host threads only)."""
        n = host_nesting(self.ctx)
        i = int(np.searchsorted(n.rows, row))
        if i >= len(n.rows) or n.rows[i] != row:
            return None
        p = int(n.parent[i])
        for _ in range(64):
            if p < 0:
                return None
            s = self.of_args(self.ctx.slice_args(p))
            if s is not None and (s.call_site or s.stack):
                return s
            j = int(np.searchsorted(n.rows, p))
            p = int(n.parent[j]) if j < len(n.rows) and n.rows[j] == p else -1
        return None

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
