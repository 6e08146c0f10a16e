"""TUI benchmark: time to first screen, keypress latency and peak memory on a 1M-event trace.

    python -m bench.bench_tui                       # synthetic 1M-event training trace with every probe track
    python -m bench.bench_tui --events 200000
    python -m bench.bench_tui --trace run/trace.json.gz   # a real file (load time included)

Targets (issue 6, issue 24 item 2): first screen <= 3 s, <= 100 ms per key. Headless (`App.run_test`, 160x48).

"first screen" is App start -> the overview painted with its totals and findings (load + the first pass,
`neuron_prof.analysis.overview`, + layout). The other views' tables are built after it in the background;
"view ready" is when each view's tables were there (a switch before that shows "loading…" and fills in).
"key" is measured two ways: `pilot.press(key)` end to end (it includes Pilot's idle polling, ~60 ms
whatever the app does, textual-facts.md) minus the same for a key bound to nothing, and the work the
app itself does: the key's action plus rendering every line of the screen.
"switch to <view>" is the first press of the view's key (1-8), after the app has mounted the views in
the background: press - baseline as for the other keys, the event loop's CPU time during the press less
the unbound key's (the app's work for the switch: it cannot be repeated, a second switch costs less),
and the raw press time.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from neuron_prof.model import Arg, Cat, ProcessKind, Trace, TraceBuilder, TrackKind

T0 = 1_790_000_000_000_000_000
VIEW_ORDER = "overview compile fallback ops timeline memory collectives ranks".split()
"""Views in the order of their keys 1-8."""
OPS = [f"aten::op_{i}" for i in range(300)]


def synthetic(n_events: int, seed: int = 0) -> Trace:
    """A training trace of about `n_events` events: nested host ops, device kernels, compiles,
    fallbacks, syncs, collectives and memory counters (probe args as in neuron_prof.model.schema)."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    host = b.process(1, name="host", rank=0)
    main = b.thread_track(1, 1, "MainThread")
    dev = b.process("neuron0", name="neuron:0", kind=ProcessKind.DEVICE)
    queues = [b.track(dev, f"queue {q}", TrackKind.DEVICE) for q in range(2)]
    comp = b.track(host, "compile", TrackKind.COMPILE)
    fb = b.track(host, "fallback", TrackKind.FALLBACK)
    sync = b.track(host, "sync", TrackKind.SYNC)
    coll = b.track(host, "collectives", TrackKind.COLLECTIVE)
    mem = b.track(dev, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    intern = b.strings.intern
    cpu, kern = intern("cpu_op"), intern(Cat.DEVICE)
    op_ids = [intern(o) for o in OPS]
    kern_ids = [intern(f"neuron_exec:{o}") for o in OPS]
    module_id = intern("nn.Module: Block")
    per_step = 10_000  # events per step: 2,000 module spans x (module + 2 ops + kernel + ...)
    n_steps = max(1, n_events // per_step)
    steps, t = [], T0
    choice = rng.integers(0, len(OPS), size=n_steps * 2000)
    k = 0
    for step in range(n_steps):
        start = t
        b.add_slice(main, t, 0, f"ProfilerStep#{step}", "user_annotation")  # dur fixed below via metadata
        if step == 0:
            for i in range(40):
                b.add_slice(
                    comp,
                    t,
                    5_000_000,
                    OPS[i],
                    Cat.COMPILE,
                    {
                        Arg.COMPILE_KIND: "eager",
                        Arg.SIGNATURE: f"(f32[{i},128])",
                        Arg.CACHE: "miss",
                        Arg.CALL_SITE: f"model.py:{100 + i}",
                    },
                )
                t += 5_000_000
        for _ in range(2000):
            a, c = op_ids[choice[k]], kern_ids[choice[k]]
            k += 1
            b.add_slice_ids(main, t, 20_000, module_id, cpu, -1)
            b.add_slice_ids(main, t + 1_000, 8_000, a, cpu, -1)
            b.add_slice_ids(main, t + 10_000, 8_000, a, cpu, -1)
            b.add_slice_ids(queues[k % 2], t + 5_000, 12_000, c, kern, -1)
            b.add_slice_ids(queues[k % 2], t + 12_000, 6_000, c, kern, -1)
            t += 20_000
        for i in range(20):
            b.add_slice(
                fb,
                t,
                50_000,
                "aten::_unique2",
                Cat.FALLBACK,
                {Arg.CALL_SITE: f"data.py:{10 + i % 3}", Arg.COPY_BYTES: 4096},
            )
            t += 50_000
        b.add_slice(
            sync, t, 100_000, "aten::item", Cat.SYNC, {Arg.SYNC_KIND: "item", Arg.CALL_SITE: "train.py:70"}
        )
        b.add_slice(coll, t + 100_000, 500_000, "all_reduce", Cat.COLLECTIVE, {Arg.BYTES_IN: 1 << 24})
        t += 600_000
        for j in range(1000):  # memory samples fill the rest of the step's events
            b.add_counter(mem, start + j * (t - start) // 1000, float(rng.integers(1, 1 << 30)))
        steps.append([step, start, t])
    b.metadata.update({"steps": steps, "wall_ns": [T0, t], "source": "synthetic"})
    trace = b.build()
    # the ProfilerStep slices were added with dur 0 to keep the loop simple; give them their length
    dur = trace.slices.dur_ns.copy()
    names = np.array([trace.strings[i].startswith("ProfilerStep#") for i in range(len(trace.strings))])
    rows = np.flatnonzero(names[trace.slices.name])
    dur[rows] = [e - s for _, s, e in steps]
    return trace.replace(
        slices=type(trace.slices)(
            trace.slices.ts_ns,
            dur,
            trace.slices.track,
            trace.slices.name,
            trace.slices.cat,
            trace.slices.args,
        )
    )


def _screen_text(app: Any) -> str:
    return "\n".join(s.text for s in app.screen._compositor.render_strips())


async def run(source: Any, keys: list[tuple[str, str]], repeat: int, during_warm: int = 0) -> dict[str, Any]:
    from neuron_prof.tui.app import NeuronProfApp

    out: dict[str, Any] = {}
    t0, cpu0 = time.perf_counter(), _cpu()
    app = NeuronProfApp([source])
    started: list[tuple[float, str]] = []  # (when, table) each background table began: where a lag fell
    anon: list[tuple[str, float]] = []  # (table, anonymous RSS in MB as it began)
    mem = MemSampler()
    out["phases"] = mem.phases

    def before(name: str) -> None:
        started.append((time.perf_counter(), name))
        anon.append((name, _rss_mb("RssAnon")))
        mem.phase(f"table {anon[-2][0]}" if len(anon) > 1 else "first screen .. tables")

    app.before_table = before
    async with app.run_test(size=(160, 48)) as pilot:
        # awaited, not polled: a poll wakes the event loop, which takes the GIL from the loader's thread every
        # time (on 2 busy cores each hand-over can wait for the scheduler)
        while app.loader is None:
            await asyncio.sleep(0.005)
        await app.loader.wait()
        while app.shown_at is None:
            await asyncio.sleep(0.005)
        out["first_screen_s"] = app.shown_at - t0
        out["first_screen_cpu_s"] = _cpu() - cpu0
        out["first_screen_rss_mb"] = _rss_mb()
        mem.phase("first screen")
        await pilot.pause()
        warm = next((w for w in app.workers if w.name == "warm"), None)
        # keys handled while the other views' tables are built in the background (their thread and the event
        # loop take the GIL in turns): wall time of the key's action and a full repaint, and the event loop's
        # lag (a 5 ms sleep's overshoot), up to `during_warm` of each, 0.1 s apart. Not pilot.press: it waits
        # until the whole process is idle (up to 1 s, twice), which a busy background thread never is
        out["during_warm_ms"], out["lag_ms"] = [], []
        while warm is not None and warm.is_running and len(out["during_warm_ms"]) < during_warm:
            key = "down" if len(out["during_warm_ms"]) % 2 == 0 else "up"
            s = time.perf_counter()
            await app.run_action(_action_for(app, key), app.screen.focused or app.screen)
            app.screen._compositor.render_update(full=True)
            out["during_warm_ms"].append(1e3 * (time.perf_counter() - s))
            s = time.perf_counter()
            await asyncio.sleep(0.005)
            out["lag_ms"].append(1e3 * (time.perf_counter() - s - 0.005))
            if out["lag_ms"][-1] > 100:
                out.setdefault("long_lags", []).append(
                    (out["lag_ms"][-1], next((n for t, n in reversed(started) if t <= s), "?")))
            await asyncio.sleep(0.1)
        if warm is not None:
            await warm.wait()
        mem.phase(f"table {anon[-1][0]}" if anon else "tables")
        out["warm_s"] = (app.warmed_at or time.perf_counter()) - app.shown_at
        ready_at = getattr(app, "ready_at", {})  # (an older app, compared in the same run, has none)
        out["ready_s"] = {v: t - app.shown_at for v, t in sorted(ready_at.items(), key=lambda kv: kv[1])}
        # then the views' screens mount in the background (NeuronProfApp._premount)
        while app.premounted_at is None and any(w.name == "premount" for w in app.workers):
            await asyncio.sleep(0.01)
        await pilot.pause()
        mem.phase("views' screens mounted")
        out["premount_s"] = None if app.premounted_at is None else app.premounted_at - app.shown_at
        out["timings"] = dict(app.data.timings)
        out["anon_mb"] = [*anon, ("(all built)", _rss_mb("RssAnon"))]
        base, base_cpu = [], []
        for _ in range(repeat):
            s, cpu = time.perf_counter(), time.thread_time()
            await pilot.press("f19")  # bound to nothing: Pilot's own cost
            base.append(time.perf_counter() - s)
            base_cpu.append(time.thread_time() - cpu)
        out["press_baseline_ms"] = 1e3 * statistics.median(base)
        rows = []
        for view, key in keys:
            if view and app.current_mode != view:
                key_of_view = "12345678"[VIEW_ORDER.index(view)]
                s, cpu = time.perf_counter(), time.thread_time()
                await pilot.press(key_of_view)
                switch, switch_cpu = time.perf_counter() - s, time.thread_time() - cpu
                # like the other keys: less Pilot's idle wait; the raw press and the event loop's CPU time
                # (the app's work plus Pilot's polling, less the same for the unbound key) stay visible
                rows.append(
                    (
                        f"switch to {view}",
                        1e3 * (switch - statistics.median(base)),
                        1e3 * (switch_cpu - statistics.median(base_cpu)),
                        1e3 * switch,
                    )
                )
            press, work = [], []
            for _ in range(repeat):
                s = time.perf_counter()
                await pilot.press(key)
                press.append(time.perf_counter() - s)
                # the app's own work for one more such key: action + repaint of every line
                s = time.perf_counter()
                await pilot.app.run_action(_action_for(app, key), app.screen.focused or app.screen)
                app.screen._compositor.render_update(full=True)
                work.append(time.perf_counter() - s)
            rows.append(
                (
                    f"{view}: {key}",
                    1e3 * (statistics.median(press) - statistics.median(base)),
                    1e3 * statistics.median(work),
                    float("nan"),
                )
            )
        out["keys"] = rows
        mem.phase("keys")
        for view in app.views:  # every view, its tab or key: what showing it holds
            await pilot.press(view.hotkey)
            await pilot.pause()
            mem.phase(f"visit {view.key}")
        await pilot.press("q")
    mem.stop()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


class MemSampler:
    """Peak RSS, its anonymous and mapped-file parts apart, per phase of the run: a thread reads
    /proc/self/status every 10 ms; `phase(name)` closes the phase so far under `name`. Each entry of `phases`:
    (name, peak VmRSS, peak RssAnon, peak RssFile, the process's peak RSS so far (ru_maxrss)), MB."""

    def __init__(self, every_s: float = 0.01) -> None:
        self.phases: list[tuple[str, float, float, float, float]] = []
        self._peak = [0.0, 0.0, 0.0]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._every = every_s
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        now = [_rss_mb("VmRSS"), _rss_mb("RssAnon"), _rss_mb("RssFile")]
        with self._lock:
            self._peak = [max(a, b) for a, b in zip(self._peak, now, strict=True)]

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._sample()

    def phase(self, name: str) -> None:
        self._sample()
        with self._lock:
            rss, anon, file = self._peak
            self._peak = [0.0, 0.0, 0.0]
        self.phases.append((name, rss, anon, file, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory now, or one of its parts (`RssAnon`: not the mapped files' pages), in
    MB from /proc/self/status (0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu() -> float:
    """CPU seconds of this process and its finished children (a parallel parse's workers): what load does not
    inflate much, beside the wall time it does."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _action_for(app: Any, key: str) -> str:
    """The action a key is bound to on the focused widget, its screen or the app."""
    for node in (app.screen.focused, app.screen, app):
        if node is None:
            continue
        for b in node._bindings.key_to_bindings.get(key, []):
            return b.action if "." in b.action or node is app else b.action
    return "bell"


KEYS = [
    ("overview", "down"),
    ("ops", "down"),
    ("ops", "pagedown"),
    ("ops", "end"),
    ("ops", "s"),
    ("timeline", "right"),
    ("timeline", "plus"),
    ("timeline", "minus"),
    ("timeline", "shift+right"),
    ("timeline", "down"),
    ("fallback", "down"),
    ("memory", "down"),
    # the other views, for their first switch (target: every view)
    ("compile", "down"),
    ("collectives", "down"),
    ("ranks", "down"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--trace", type=Path, help="a trace file to open instead of the synthetic trace")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--during-warm", type=int, default=0, metavar="N",
                    help="also press N keys on the overview while the other views' tables are built")
    a = ap.parse_args(argv)
    if a.trace:
        source: Any = a.trace
        desc = str(a.trace)
    else:
        s = time.perf_counter()
        source = synthetic(a.events)
        desc = (
            f"synthetic, {source.n_events:,} events ({len(source.slices):,} slices), built in "
            f"{time.perf_counter() - s:.1f} s (not counted)"
        )
    r = asyncio.run(run(source, KEYS, a.repeat, a.during_warm))
    print(f"trace: {desc}")
    print(
        f"time to first screen: {r['first_screen_s']:.2f} s  (target <= 3 s; CPU {r['first_screen_cpu_s']:.2f} s, "
        "workers' included)   "
        + "  ".join(f"{k} {v:.2f} s" for k, v in r["timings"].items() if not k.startswith("table "))
    )
    tables = {k[6:]: v for k, v in r["timings"].items() if k.startswith("table ")}
    if tables:
        print("tables built after the first screen: " + "  ".join(f"{k} {v:.2f} s" for k, v in tables.items()))
    print(f"views warmed in the background {r['warm_s']:.2f} s after the first screen")
    if r.get("ready_s"):
        print("view ready after the first screen: " + "  ".join(f"{v} +{t:.2f} s" for v, t in r["ready_s"].items()))
    if r["premount_s"] is not None:
        print(f"views' screens mounted in the background {r['premount_s']:.2f} s after the first screen")
    print(f"pilot.press baseline (unbound key): {r['press_baseline_ms']:.0f} ms")
    if d := r["during_warm_ms"]:
        lag = r["lag_ms"]
        print(f"{len(d)} keys during the background build: action + full repaint median {np.median(d):.1f} ms, "
              f"max {max(d):.1f} ms; event loop lag median {np.median(lag):.1f} ms, max {max(lag):.1f} ms")
        if r.get("long_lags"):
            print("  lags over 100 ms, with the table being built: "
                  + ", ".join(f"{ms:.0f} ms ({name})" for ms, name in r["long_lags"]))
    head = f"{'key':<28}{'press - baseline':>18}{'action + full repaint':>24}{'raw press':>12}"
    print(f"{head}   (target <= 100 ms)")
    for name, press, work, raw in r["keys"]:
        w = "" if np.isnan(work) else f"{work:.1f} ms" + (" (cpu)" if not np.isnan(raw) else "")
        rw = "" if np.isnan(raw) else f"{raw:.1f} ms"
        print(f"{name:<28}{press:>15.1f} ms{w:>24}{rw:>12}")
    print("switch rows: the action column is the event loop's CPU time in the press less the unbound key's")
    if len(r["anon_mb"]) > 1:
        a = r["anon_mb"]
        print("anonymous RSS each background table added: "
              + "  ".join(f"{n} {a[i + 1][1] - v:+.0f} MB" for i, (n, v) in enumerate(a[:-1]))
              + f"  (at the end {a[-1][1]:.0f} MB)")
    print(f"RSS at the first screen: {r['first_screen_rss_mb']:.0f} MB; peak RSS: {r['peak_rss_mb']:.0f} MB")
    if r.get("phases"):
        print(f"{'phase (peak within it, MB)':<36}{'RSS':>8}{'anon':>8}{'file':>8}{'peak so far':>13}")
        for name, rss, anon, file, so_far in r["phases"]:
            print(f"{name:<36}{rss:>8.0f}{anon:>8.0f}{file:>8.0f}{so_far:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
