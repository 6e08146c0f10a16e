"""What a capture left out to stay small (`Meta.CAPTURE_REDUCED`), in the one line `summary` prints."""

from __future__ import annotations

from typing import Any


def reduced_line(info: dict[str, Any] | None) -> str | None:
    """"Capture kept small: ..." naming what went and how to keep it; None when nothing was left out."""
    if not isinstance(info, dict):
        return None
    parts = []
    py = info.get("python") or {}
    if py.get("dropped") or py.get("merged"):
        parts.append(f"{int(py.get('dropped', 0)) + int(py.get('merged', 0)):,} of {int(py.get('python_slices', 0)):,} "
                     "Python calls inside work that launched no op folded into their outermost call "
                     "(--full-python-trace keeps them)")
    if info.get("max_events"):
        cap = [f"under --max-events {int(info['max_events']):,} (from {int(info.get('events_before', 0)):,} events)"]
        if info.get("python_frames_dropped"):
            cap.append(f"{int(info['python_frames_dropped']):,} Python frames deeper than "
                       f"{int(info.get('python_frames_deeper_than', 0))} dropped")
        st = info.get("steps_sampled") or {}
        if st:
            cap.append(f"1 step in {int(st.get('every', 0))} kept ({int(st.get('steps_dropped', 0))} steps, "
                       f"{int(st.get('events_dropped', 0)):,} events dropped)")
        if info.get("events_cut_at_end"):
            cap.append(f"the last {int(info['events_cut_at_end']):,} events cut (the trace ends early)")
        parts.append(": ".join([cap[0], ", ".join(cap[1:])]) if len(cap) > 1 else cap[0])
    steps = _steps_part(info.get("steps_recorded"))
    if steps:
        parts.append(steps)
    return "Capture kept small: " + "; ".join(parts) if parts else None


def _steps_part(st: Any) -> str | None:
    """"steps A-B recorded in full (of N: ...)" for ``profile(steps=...)`` / ``run --steps``; None when every
    step was recorded."""
    if not isinstance(st, dict):
        return None
    before, after = int(st.get("not_recorded_before", 0)), int(st.get("not_recorded_after", 0))
    if not (before or after):
        return None
    rng = st.get("recorded_range") or []
    kept = f"steps {rng[0]}-{rng[1]}" if len(rng) == 2 and rng[0] != rng[1] else \
        f"step {rng[0]}" if rng else "no step"
    gone = [f"{n} {'step' if n == 1 else 'steps'} {where}" for n, where in
            ((before, "before them (warm-up: its compiles are still reported)"), (after, "after them")) if n]
    return f"{kept} recorded in full under --steps (of {int(st.get('steps_total', 0))}; not recorded: " + \
        ", ".join(gone) + ")"
