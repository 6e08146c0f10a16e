"""Missing and stopped ranks of a job, from the ranks' first-pass infos alone.

    findings = rank_coverage(infos)        # [] when every rank of the world is there and all ran to the end

The world size comes from each trace's metadata (torch.profiler's distributedInfo, or neuron-prof's own): a
rank of the world with no trace is `missing_rank`; a rank whose trace ends early (fewer steps than the
others, or collectives the others reached and it never did) is `stopped_rank`. Each names the rank, its last
step and its last collective, and what the other ranks reached next.
"""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis import Finding, Kind, RankCollectives, pick_source
from neuron_prof.merge._plan import RankInfo
from neuron_prof.model import Meta


def world_size(infos: list[RankInfo]) -> int | None:
    """The job's world size as its traces record it (the largest any rank records), None if none does."""
    sizes = [int(w) for i in infos if isinstance(w := i.metadata.get(Meta.WORLD_SIZE), int) and w > 0]
    return max(sizes) if sizes else None


def _collectives(infos: list[RankInfo]) -> tuple[dict[int, RankCollectives], set[int]]:
    """The ranks' collectives from one source, and the ranks they compare: the device's own view (Neuron
    Explorer's CcOp) exists only where a device profile was taken, so a rank without one is not short of
    collectives for that."""
    found: dict[str, dict[int, RankCollectives]] = {}
    for info in infos:
        for source, per in info.collectives.items():
            found.setdefault(source, {}).update(per)
    per = pick_source(found, len(infos))
    partial_device_view = per is found.get("device_collective") and len(per) < len(infos)
    return per, set(per) if partial_device_view else {i.rank for i in infos}


def _coll_name(c: RankCollectives | None, k: int) -> str:
    """Collective number k (0-based) of a rank as people read it: "all_reduce (group 0) #12"."""
    if c is None or not (0 <= k < len(c)):
        return "none"
    group, _, op = c.key[k].rpartition("/")
    return f"{op or c.key[k]}{f' (group {group})' if group else ''} #{k + 1}"


def rank_coverage(infos: list[RankInfo]) -> list[Finding]:
    """`missing_rank` and `stopped_rank` findings of a job (see the module docstring)."""
    if not infos:
        return []
    present = sorted(i.rank for i in infos)
    world = world_size(infos)
    colls, compared = _collectives(infos)
    by_rank = {i.rank: i for i in infos}
    n_coll = {r: len(colls[r]) if r in colls else 0 for r in present}
    most_coll = max(n_coll.values(), default=0)
    ref = max(present, key=lambda r: (n_coll[r], by_rank[r].steps[0]))
    max_steps = max(i.steps[0] for i in infos)
    max_last = max((s for i in infos if (s := i.steps[1]) is not None), default=None)
    out: list[Finding] = []
    if world is not None:
        missing = [r for r in range(world) if r not in by_rank]
        if missing:
            reached = (f"the other ranks reached step {max_last}" if max_last is not None else "the other ranks")
            reached += f" and {_coll_name(colls.get(ref), most_coll - 1)}" if most_coll else ""
            out.append(Finding(
                kind=Kind.MISSING_RANK, severity="critical",
                title=(f"{len(missing)} of {world} ranks have no trace: rank{'s' if len(missing) > 1 else ''} "
                       f"{', '.join(map(str, missing[:16]))}{', ...' if len(missing) > 16 else ''} (last step and "
                       f"last collective unknown; {reached})"),
                cost_ns=0, share=0.0, count=len(missing),
                advice=("A rank that wrote no trace hung or died before its profiler saved (look at its log and "
                        "exit code; `neuron-prof run` writes the trace when the script ends, on an exception and "
                        "on SIGTERM), or its file was not passed: pass every rank's trace (a folder or a glob). "
                        "Everything else in this summary covers only the ranks that are here."),
                evidence={"world_size": world, "missing": missing, "present": present,
                          "reached_step": max_last, "reached_collective": _coll_name(colls.get(ref), most_coll - 1)
                          if most_coll else None},
            ))
    for r in present:
        info = by_rank[r]
        steps, last = info.steps
        short_steps = steps < max_steps
        short_coll = r in compared and n_coll[r] < most_coll
        if not (short_steps or short_coll):
            continue
        mine = colls.get(r)
        last_coll = _coll_name(mine, n_coll[r] - 1)
        never = _coll_name(colls.get(ref), n_coll[r]) if short_coll else None
        ended = info.metadata.get("capture_exit")
        bits = [f"last step {last if last is not None else 'none'}"
                + (f" ({steps} steps; others {max_steps})" if short_steps else ""),
                f"last collective {last_coll}"]
        if never:
            bits.append(f"never reached {never} (rank {ref} did)")
        ev: dict[str, Any] = {"steps": steps, "last_step": last, "max_steps": max_steps,
                              "collectives": n_coll[r], "max_collectives": most_coll,
                              "last_collective": last_coll, "never_reached": never, "reference_rank": ref}
        site = str(info.metadata.get(Meta.EXIT_SITE) or "")
        if ended:
            ev["capture_exit"] = ended
            bits.append(f"its profile ended with {ended}" + (f" at {site}" if site else ""))
        if mine is not None and n_coll[r]:
            ev["last_collective_end_ns"] = int(mine.end_ns[n_coll[r] - 1])  # the rank's own clock
        out.append(Finding(
            kind=Kind.STOPPED_RANK, severity="critical",
            title=f"Rank {r} stopped early: {'; '.join(bits)}",
            cost_ns=0, share=0.0, count=max(max_steps - steps, most_coll - n_coll[r], 1),
            advice=("This rank's trace ends before the others': it hung (in the collective it never left, or "
                    "waiting for one the others had moved past), crashed, or was killed. Look at its log and exit "
                    "code; `neuron-prof merge --ranks` on it and a rank that finished shows where it stopped."),
            evidence=ev, rank=r, call_site=site,
        ))
    return out
