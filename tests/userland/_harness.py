"""Run the user programs of tests/userland and compare neuron-prof's findings with their tags.

One place for the tag grammar, the four ways to run a program and the matching rules (README.md beside this
file); tests/test_userland.py, tests/test_userland_run.py (through _suite.py) and bench/bench_accuracy.py
use it.

    from tests.userland import _harness as h
    prog = h.load_program(h.PROGRAMS_DIR / "module_loop_ranking.py")
    out = h.run_program(prog, "run-neuron", workdir)       # its own process; out.findings: summary --json's
    score = h.score(prog, out)                                 # recall, alarms, exact lines
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._drive import DATA_DEPENDENT
from ._fork import CLI, Forked

PROGRAMS_DIR = Path(__file__).resolve().parent
REPO = PROGRAMS_DIR.parents[1]
DRIVER = PROGRAMS_DIR / "_drive.py"

COMPILE_SCALE = "0.5"
"""NEURON_PROF_EMULATE_COMPILE_SCALE for the runs, unless set in the environment."""

DEVICES = ("neuron", "cpu", "cuda")
WAYS = ("run-neuron", "profile-neuron", "run-cpu", "profile-cpu")
SEVERE = ("warning", "critical")
LOAD_DEPENDENT = ("device_idle", "profiler_overhead")
"""Finding kinds measured in time that the machine's load decides: the emulated device idles while its host runs
the emulator's Python, so on a loaded machine a clean program's idle share can pass 25% of the run and the
profiler's own overhead 20%. Tests do not assert their absence (that would be a timed assertion); `bench
accuracy` counts them as false alarms, and `--load N` measures them under load."""

# `# EXPECT: kind`, `# EXPECT[cpu]: kind`, `# EXPECT[neuron,cpu]: kind`, and the same with ALSO
_TAG = re.compile(r"#\s*(?P<what>EXPECT|ALSO)(?:\[(?P<devs>[A-Za-z0-9_, ]*)\])?:\s*(?P<kind>[a-z_0-9]+)")
_CLEAN = re.compile(r"#\s*CLEAN\b")
_XFAIL = re.compile(r"#\s*XFAIL\[(?P<devs>[A-Za-z0-9_, ]*)\]:\s*(?P<text>.+?)\s*$")
_RANKS = re.compile(r"#\s*RANKS:\s*(?P<n>\d+)")
_FAILS = re.compile(r"#\s*FAILS:\s*(?P<text>.+?)\s*$")
_MAX_RSS = re.compile(r"#\s*MAX-RSS-GB:\s*(?P<gb>[\d.]+)")
_BENCH_ONLY = re.compile(r"#\s*BENCH-ONLY\b:?\s*(?P<why>.*?)\s*$")
OPERATOR_LINES = re.compile(r"#\s*OPERATOR-LINES\b")
"""A program whose tags need the exact lines of operator statements (`profile(operator_lines=True)`)."""
_SITE = re.compile(r"^(?P<path>.*?):(?P<line>\d+)$")
_REGISTERED = re.compile(r"^\w+: (fallthrough )?registered at ")  # the dispatcher's list of kernels

# What the emulator's own log must show at a tagged line (see _drive.py --truth) for the tag to be true.
TRUTH_KINDS: dict[str, tuple[str, ...]] = {
    "cpu_fallback": ("fallback",),
    "sync_point": ("sync", "data_dependent"),
    "dtype_demotion": ("f64",),
    "first_call_compile": ("compile", "graph_compile", "compile_caller"),
}
"""The emulator's log entries that prove a tag; ``compile_caller``: a line of the program on the stack of a compile
made deeper in the program (an evaluation loop's call of a model whose forward the user wrote)."""


# ---------------------------------------------------------------------------------------------- programs


@dataclass(frozen=True)
class Tag:
    kind: str
    line: int
    devices: frozenset[str]
    required: bool
    """EXPECT (must be found at this line) or ALSO (a true site of the problem that may be named instead)."""


@dataclass
class Program:
    path: Path
    tags: list[Tag]
    clean: bool
    xfail: dict[str, str]
    """device -> text: the run on that device is known to fail with this text in its output."""
    ranks: int
    profiles_itself: bool
    max_rss_gb: float | None = None
    """A program's own memory limit (`# MAX-RSS-GB: N  reason`), over the harness default."""
    operator_lines: bool = False
    """`# OPERATOR-LINES  reason`: it is profiled with the operator lines option (``run --operator-lines``; a
    program that profiles itself passes ``operator_lines=True`` in its own call)."""
    fails: str = ""
    """`# FAILS: text`: the program is meant to fail (a rank that crashes): its run must exit non-zero with
    `text` in its output, and every trace must still load whole."""
    bench_only: str = ""
    """`# BENCH-ONLY: reason`: why the program runs only in `bench accuracy`, not in the test suite ("" if it
    runs in both)."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def stem(self) -> str:
        return self.path.stem

    def expected(self, device: str) -> list[tuple[str, int]]:
        """(kind, line) that must be found on `device`, in file order."""
        return [(t.kind, t.line) for t in self.tags if t.required and device in t.devices]

    def lines_for(self, device: str, kind: str) -> set[int]:
        """Lines where `kind` truly happens on `device` (EXPECT and ALSO)."""
        return {t.line for t in self.tags if t.kind == kind and device in t.devices}

    def kinds(self, device: str) -> set[str]:
        """Finding kinds the program's tags explain on `device`."""
        return {t.kind for t in self.tags if device in t.devices}


def _devices(spec: str | None, default: Iterable[str]) -> frozenset[str]:
    if spec is None:
        return frozenset(default)
    devs = frozenset(d.strip() for d in spec.split(",") if d.strip())
    unknown = devs - set(DEVICES)
    if unknown or not devs:
        raise ValueError(f"unknown device in tag: {spec!r} (devices: {', '.join(DEVICES)})")
    return devs


def load_program(path: str | os.PathLike[str]) -> Program:
    """Parse a program's tags (grammar in README.md)."""
    p = Path(path).resolve()
    src = p.read_text().splitlines()
    tags: list[Tag] = []
    xfail: dict[str, str] = {}
    clean = False
    ranks = 1
    max_rss: float | None = None
    fails = ""
    bench_only = ""
    for i, line in enumerate(src, 1):
        for m in _TAG.finditer(line):
            devs = _devices(m.group("devs"), ("neuron",))
            tags.append(Tag(m.group("kind"), i, devs, m.group("what") == "EXPECT"))
        if _CLEAN.search(line):
            clean = True
        m = _XFAIL.search(line)
        if m:
            for d in _devices(m.group("devs"), ()):
                xfail[d] = m.group("text")
        m = _RANKS.search(line)
        if m:
            ranks = int(m.group("n"))
        m = _MAX_RSS.search(line)
        if m:
            max_rss = float(m.group("gb"))
        m = _FAILS.search(line)
        if m:
            fails = m.group("text")
        m = _BENCH_ONLY.search(line)
        if m:
            bench_only = m.group("why")
            if not bench_only:
                raise ValueError(f"{p.name}:{i}: `# BENCH-ONLY: reason` needs its reason")
    if clean and any(t.required for t in tags):
        raise ValueError(f"{p.name}: tagged CLEAN and EXPECT at once")
    text = "\n".join(src)
    return Program(p, tags, clean, xfail, ranks, "neuron_prof.profile(" in text, max_rss,
                   OPERATOR_LINES.search(text) is not None, fails, bench_only)


def programs(pattern: str = "*.py") -> list[Program]:
    """Every program in tests/userland whose name matches `pattern` (not the helpers, which start with _)."""
    return [load_program(p) for p in sorted(PROGRAMS_DIR.glob(pattern)) if not p.name.startswith("_")]


# ---------------------------------------------------------------------------------------------- running


@dataclass
class Outcome:
    program: str
    way: str
    ok: bool
    """The program ran and every summary was read."""
    error: str = ""
    """Why not (exit code and the tail of the output)."""
    output: str = ""
    """The program's stdout and stderr (the last 200 kB of each rank's)."""
    seconds: float = 0.0
    findings: list[dict[str, Any]] = field(default_factory=list)
    """Every rank's `summary --json` findings (each with "rank" set in a multi-rank job)."""
    truth: list[dict[str, Any]] | None = None
    """The emulator's own log by line (profile-neuron runs with truth=True)."""
    lines: list[dict[str, Any]] = field(default_factory=list)
    """The first rank's `summary --json` lines view (the program's costliest lines, most costly first)."""

    @property
    def device(self) -> str:
        return self.way.split("-", 1)[1]


def _neuron_prof() -> list[str]:
    exe = Path(sys.executable).with_name("neuron-prof")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "neuron_prof.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(device: str) -> dict[str, str]:
    env = dict(os.environ)
    # every run starts cold and the same way: no NEFF cache on disk, emulator only where asked for
    for k in ("NEURON_PROF_EMULATE", "NEURON_PROF_EMULATE_CACHE_DIR", "TORCH_NEURONX_NEFF_CACHE_DIR",
              "TRACE_OUT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env["DEVICE"] = device
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")  # two runs at once on two cores
    # half the emulator's default compile costs (still 6 ms and up per op signature, 75 ms per graph: stalls
    # hundreds of times an op's device time) unless the caller chose
    env.setdefault("NEURON_PROF_EMULATE_COMPILE_SCALE", COMPILE_SCALE)
    return env


def command(prog: Program, way: str, out: Path, truth: Path | None = None) -> list[str]:
    """The command line of one way (for one rank; ranks differ only in their environment)."""
    api, device = way.split("-", 1)
    if api == "run":
        emulate = ["--emulate-neuron"] if device == "neuron" else []
        oplines = ["--operator-lines"] if prog.operator_lines else []
        return [*_neuron_prof(), "run", *emulate, *oplines, "-q", "--no-pftrace", "-o", str(out), str(prog.path)]
    cmd = [sys.executable, str(DRIVER), str(out), str(prog.path)]
    if truth is not None and device == "neuron":
        cmd += ["--truth", str(truth)]
    return cmd


def _tail(text: str, n: int = 3000) -> str:
    """The end of a run's output, less Kineto's trace points and the dispatcher's list of registrations."""
    text = "\n".join(ln for ln in text.splitlines()
                     if not ln.startswith("USDT:") and not _REGISTERED.match(ln))
    return text[-n:]


def _rank_file(out: Path, rank: int) -> Path:
    return out.with_name(f"{out.stem}.rank{rank}{out.suffix}")


def longest_first(pairs: Iterable[tuple[Program, str]]) -> list[tuple[Program, str]]:
    """(program, way) pairs in the order to start them: multi-rank jobs, torch.compile (Dynamo under the
    profiler), the emulated device, then the rest, so that a pool of two ends at about the same time."""
    return sorted(pairs, key=lambda k: (-k[0].ranks, "torch.compile(" not in k[0].path.read_text(),
                                        not k[1].endswith("neuron")))


def _session_rss(sid: int) -> int:
    """Resident bytes of every process in session `sid` (a run and the processes it started); 0 off Linux."""
    total = 0
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 of stat (after pid and comm): session id
                total += int(fields[21]) * PAGE  # field 24: rss in pages
        except (OSError, IndexError, ValueError):
            continue
    return total


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


Proc = subprocess.Popen[bytes] | Forked
"""A run's process: started from scratch, or forked (_fork.py)."""


def _kill(procs: list[tuple[int | None, Proc, Path]]) -> None:
    for _, p, _ in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                p.kill()
    for _, p, _ in procs:
        p.wait()


def _wait(procs: list[tuple[int | None, Proc, Path]], t0: float, timeout: float,
          max_rss_bytes: int) -> str:
    """Wait for every process; kill them all past `timeout` or when one's session holds more than
    `max_rss_bytes` resident (the machine is shared). Returns why they were killed, "" if they ended."""
    tick = 0
    failed_at = 0.0
    while any(p.poll() is None for _, p, _ in procs):
        if not failed_at and any(p.poll() not in (None, 0) for _, p, _ in procs):
            failed_at = time.perf_counter()
        if failed_at and time.perf_counter() - failed_at > 30:  # a rank died: the others wait for it forever
            _kill(procs)
            return "killed the other ranks 30 s after one failed"
        if time.perf_counter() - t0 > timeout:
            _kill(procs)
            return f"killed after {timeout:.0f} s (timeout)"
        tick += 1
        if max_rss_bytes and tick % 4 == 0:
            for _, p, _ in procs:
                rss = _session_rss(p.pid) if p.poll() is None else 0
                if rss > max_rss_bytes:
                    _kill(procs)
                    return (f"killed at {time.perf_counter() - t0:.0f} s: {rss / 2**30:.1f} GiB resident, "
                            f"over the harness limit of {max_rss_bytes / 2**30:.1f} GiB")
        time.sleep(0.1)
    return ""


MAX_RSS_BYTES = int(float(os.environ.get("USERLAND_MAX_RSS_GB", "2")) * 2**30)
"""A run holding more than this is killed (and fails): issue 14's limit for a tiny model is 2 GB."""


def summary(trace: Path) -> tuple[dict[str, Any], list[str]]:
    """`neuron-prof summary TRACE --json`'s document and the load's warnings (what it prints on stderr), computed
    here as the command does (load, report, summary_json) without a process of its own."""
    from neuron_prof.analysis import report
    from neuron_prof.exporters.summary import summary_json
    from neuron_prof.loaders import load

    t = load(trace)
    return json.loads(summary_json(report(t))), [str(w) for w in t.metadata.get("load_warnings") or []]


def run_program(prog: Program, way: str, workdir: str | os.PathLike[str], *, timeout: float = 300,
                truth: bool = False, max_rss_bytes: int = MAX_RSS_BYTES, fork: bool = False) -> Outcome:
    """Run `prog` one way in a fresh folder under `workdir`; then `neuron-prof summary --json`'s document per
    trace (`summary`) and, for a job, the job's.
    `fork`: the run's process is forked from one that imported torch already (_fork.py: the test suite's ~1 s
    of CPU less per process), not started from scratch as a user's is (`bench accuracy`'s way)."""
    if way not in WAYS:
        raise ValueError(f"unknown way {way!r} (ways: {', '.join(WAYS)})")
    device = way.split("-", 1)[1]
    wd = Path(workdir) / f"{prog.stem}.{way}"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    out = wd / "trace.json"
    truth_path = wd / "truth.json" if truth and way == "profile-neuron" else None
    cmd = command(prog, way, out, truth_path)
    env = _env(device)
    if prog.profiles_itself and way.startswith("run"):
        env["TRACE_OUT"] = str(wd / "own_trace.json")  # the program's own profile() output; we read run's -o
    if prog.max_rss_gb is not None and max_rss_bytes:
        max_rss_bytes = max(max_rss_bytes, int(prog.max_rss_gb * 2**30))
    t0 = time.perf_counter()
    procs: list[tuple[int | None, Proc, Path]] = []
    envs = [(None, env)] if prog.ranks <= 1 else []
    if prog.ranks > 1:
        port = str(_free_port())
        envs = [(r, {**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(prog.ranks),
                     "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}) for r in range(prog.ranks)]
    for r, e in envs:
        log = wd / ("output.txt" if r is None else f"output.rank{r}.txt")
        if fork:  # forked from a process that imported torch (_fork.py): the driver, or the CLI's main()
            log.write_bytes(b"")
            argv = [CLI, *cmd[len(_neuron_prof()):]] if way.startswith("run") else cmd[1:]
            procs.append((r, Forked(argv, e, wd, log), log))
            continue
        with log.open("wb") as fh:  # each process (and its children) in a session of its own: killed as one
            procs.append((r, subprocess.Popen(cmd, cwd=wd, env=e, stdout=fh, stderr=subprocess.STDOUT,
                                              start_new_session=True), log))
    killed = _wait(procs, t0, timeout, max_rss_bytes)
    outputs = [log.read_text(errors="replace")[-200_000:] for _, _, log in procs]
    failed = [f"{'rank ' + str(r) + ' ' if r is not None else ''}exit {p.returncode}" for r, p, _ in procs
              if p.returncode != 0]
    output = _tail("\n".join(outputs))
    if prog.fails and not killed:  # meant to fail: with its own error, then read like any other run
        failed = [] if failed and prog.fails in "\n".join(outputs) else [
            f"meant to fail with {prog.fails!r} ({', '.join(failed) or 'every process exited 0'})"]
    if killed:
        failed.append(killed)
    res = Outcome(prog.name, way, ok=False, output="\n".join(outputs))
    if failed:
        res.error = f"{prog.name} ({way}): {', '.join(failed)}\n{output}"
        res.seconds = time.perf_counter() - t0
        return res
    findings: list[dict[str, Any]] = []
    for r, _, _ in procs:
        trace = out if r is None else _rank_file(out, r)
        if not trace.is_file():
            res.error = f"{prog.name} ({way}): no trace at {trace}\n{output}"
            res.seconds = time.perf_counter() - t0
            return res
        try:
            doc, warnings = summary(trace)
        except Exception as e:  # noqa: BLE001  (the run's failure, said with the program's name)
            res.error = f"{prog.name} ({way}): summary of {trace.name} failed: {type(e).__name__}: {e}"
            res.seconds = time.perf_counter() - t0
            return res
        if any("damaged" in w for w in warnings):
            res.error = f"{prog.name} ({way}): {trace.name} is damaged\n" + "\n".join(warnings[:5])
            res.seconds = time.perf_counter() - t0
            return res
        if not res.lines:
            res.lines = list(doc.get("lines") or [])
        for f in doc["findings"]:
            if r is not None:
                f.setdefault("rank", r)
                f["rank"] = r if f["rank"] is None else f["rank"]
            findings.append(f)
    if prog.ranks > 1:  # the job's own findings (stopped and missing ranks, stragglers, step skew...)
        s = subprocess.run([*_neuron_prof(), "summary", str(_rank_file(out, 0)).replace(".rank0.", ".rank*."),
                            "--json", "--workers", "0"], capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=wd)
        if s.returncode != 0:
            res.error = f"{prog.name} ({way}): the job summary failed (exit {s.returncode})\n{_tail(s.stderr)}"
            res.seconds = time.perf_counter() - t0
            return res
        findings += [{**f, "job": True} for f in json.loads(s.stdout)["findings"]]
    if truth_path is not None:
        rows: list[dict[str, Any]] = []
        for r, _, _ in procs:
            tp = truth_path if r is None else truth_path.with_name(f"{truth_path.name}.rank{r}")
            if tp.is_file():
                rows += json.loads(tp.read_text())
        res.truth = rows
    res.ok = True
    res.findings = findings
    res.seconds = time.perf_counter() - t0
    return res


# ---------------------------------------------------------------------------------------------- matching


def site_line(site: str, prog: Program) -> int | None:
    """The line a call site names in `prog`'s file (any shortening of its path), None for another file."""
    m = _SITE.match(site.strip()) if isinstance(site, str) else None
    if not m:
        return None
    path = m.group("path").replace("\\", "/").strip()
    for prefix in ("…", "..."):
        if path.startswith(prefix):
            path = path[len(prefix):]
    path = path.lstrip("./") if not path.startswith("/") else path
    if not path:
        return None
    full = prog.path.as_posix()
    if path.startswith("/"):
        same = os.path.realpath(path) == os.path.realpath(full)
    else:
        same = full == path or full.endswith("/" + path)
    return int(m.group("line")) if same else None


def evidence_sites(evidence: Any) -> list[str]:
    """Per-site call sites a finding lists in its evidence: `sites` (strings or {"call_site": ...}) and every
    "call_site" value at any depth (e.g. evidence.ops[*].call_site), never frames of a stack."""
    out: list[str] = []

    def walk(x: Any, key: str = "") -> None:
        if "stack" in key.lower():
            return
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "call_site" and isinstance(v, str):
                    out.append(v)
                else:
                    walk(v, str(k))
        elif isinstance(x, list):
            for v in x:
                if isinstance(v, str) and key == "sites":
                    out.append(v)
                else:
                    walk(v, key)

    walk(evidence)
    return out


def finding_lines(f: dict[str, Any], prog: Program) -> set[int]:
    """Lines of `prog` a finding names: its call_site or any per-site evidence."""
    sites = [f.get("call_site") or "", *evidence_sites(f.get("evidence") or {})]
    return {ln for s in sites if s for ln in [site_line(s, prog)] if ln is not None}


@dataclass
class Score:
    """One run of one program, compared with its tags."""

    program: str
    way: str
    expected: list[tuple[str, int, bool]] = field(default_factory=list)
    """(kind, line, found at that exact line)."""
    alarms: int = 0
    """warning/critical findings after warm-up (what `check` fails on by default)."""
    unexplained: list[str] = field(default_factory=list)
    """warning/critical findings of a kind no tag on this device explains: "kind@site (severity)"."""
    in_file: int = 0
    """Findings of a tagged kind whose call_site names a line of the program."""
    exact: int = 0
    """... of which the line is tagged (EXPECT or ALSO) for that kind."""
    off_line: list[str] = field(default_factory=list)
    """The others (in_file but not exact): "kind@line", so a low exact-line rate can be read per program."""
    clean: bool = False
    clean_alarms: list[str] = field(default_factory=list)
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per finding kind: alarms, unexplained, in_file, exact (the same counts as above, split by kind)."""

    def kind(self, kind: str) -> dict[str, int]:
        return self.kinds.setdefault(kind, dict(alarms=0, unexplained=0, in_file=0, exact=0))

    @property
    def found(self) -> int:
        return sum(ok for _, _, ok in self.expected)

    @property
    def misses(self) -> list[tuple[str, int]]:
        return [(k, ln) for k, ln, ok in self.expected if not ok]


def _label(f: dict[str, Any]) -> str:
    rank = f" rank {f['rank']}" if f.get("rank") is not None else ""
    return f"{f.get('kind')}@{f.get('call_site') or '-'} ({f.get('severity')}{rank})"


def top_line(prog: Program, out: Outcome) -> str:
    """The lines view's costliest line of the program itself ("prog.py:21 q, _ = torch.linalg.qr(h)"; its
    backward part when it has one), "-" when none."""
    for ln in out.lines:
        site = str(ln.get("call_site") or "")
        if site and site_line(site, prog) is not None:
            bwd = f" (+ backward {', '.join(ln['backward_of'][:2])})" if ln.get("backward_of") else ""
            return f"{site.rsplit('/', 1)[-1]} {str(ln.get('source') or '').split('  #')[0]}{bwd}".strip()
    return "-"


def _cold_cache(f: dict[str, Any]) -> bool:
    """A `first_call_compile` finding confined to warm-up (the cold compile cache): no tag names it (README:
    cold-cache compiles of the first step are not tagged), so its line, the costliest of warm-up's compiles, is
    left out of the exact-line rate."""
    return f.get("kind") == "first_call_compile" and f.get("after_warmup") is False


def score(prog: Program, out: Outcome) -> Score:
    """Compare one run's findings with the program's tags for that run's device (rules: README.md)."""
    device = out.device
    s = Score(prog.name, out.way, clean=prog.clean)
    fs = out.findings
    for kind, line in prog.expected(device):
        hit = any(f.get("kind") == kind and line in finding_lines(f, prog) for f in fs)
        s.expected.append((kind, line, hit))
    kinds = prog.kinds(device)
    for f in fs:
        kind = f.get("kind", "")
        # an alarm is what `check` fails on by default: warning or critical, not confined to warm-up (a cold
        # compile cache is a warning by its cost, but a clean program pays it once, in warm-up)
        if f.get("severity") in SEVERE and f.get("after_warmup") is not False:
            s.alarms += 1
            s.kind(kind)["alarms"] += 1
            if kind not in kinds:
                s.unexplained.append(_label(f))
                s.kind(kind)["unexplained"] += 1
            if prog.clean:
                s.clean_alarms.append(_label(f))
        if kind in kinds and not _cold_cache(f):
            ln = site_line(f.get("call_site") or "", prog)
            if ln is not None:
                exact = ln in prog.lines_for(device, kind)
                s.in_file += 1
                s.exact += exact
                if not exact:
                    s.off_line.append(f"{kind}@{ln}")
                s.kind(kind)["in_file"] += 1
                s.kind(kind)["exact"] += exact
    return s


class KnownFailure(Exception):
    """A run failed the way its program's XFAIL tag says (tests: xfail(raises=KnownFailure, strict=True))."""


def known_failure(prog: Program, out: Outcome) -> str:
    """The XFAIL text (one of its " | " alternatives) in the output of this run if it failed; "" if none."""
    if out.ok:
        return ""
    for text in prog.xfail.get(out.device, "").split(" | "):
        if text.strip() and text.strip() in out.output:
            return text.strip()
    return ""


def describe(prog: Program, out: Outcome) -> str:
    """What was expected where, and what was found where: the message of a failing test."""
    s = score(prog, out)
    lines = [f"{prog.name} ({out.way}, {out.seconds:.1f} s):"]
    for kind, line, ok in s.expected:
        at = sorted({f.get("call_site") or "-" for f in out.findings if f.get("kind") == kind})
        ev = sorted({x for f in out.findings if f.get("kind") == kind
                     for x in evidence_sites(f.get("evidence") or {})})
        more = f"; evidence sites: {', '.join(ev[:8])}" if ev else ""
        lines.append(f"  {'ok  ' if ok else 'MISS'} {kind:<19} {prog.name}:{line}   "
                     f"found at: {', '.join(at) or 'nothing'}{more}")
    if s.clean_alarms:
        lines.append(f"  CLEAN program raised: {', '.join(s.clean_alarms)}")
    elif s.unexplained:
        lines.append(f"  warning/critical findings no tag explains: {', '.join(s.unexplained)}")
    lines.append("  all findings: " + "; ".join(_label(f) for f in out.findings))
    return "\n".join(lines)


def check_truth(prog: Program, truth: list[dict[str, Any]]) -> list[str]:
    """Tags on the emulated device that the emulator's own log contradicts (empty when every tag is true).

    cpu_fallback / sync_point / dtype_demotion / first_call_compile: the log has an event of that sort at the
    tagged line (a sync on a real device: a host wait, or an op whose output shape depends on the values);
    shape_churn: some op compiled for 3 or more signatures at the tagged line (or, at a line that ran no device
    op, the tensor being made on the host, anywhere), or at least 3 graph compiles happened; CLEAN: no CPU
    fallback and no float64 anywhere.
    """
    at: dict[int, set[str]] = {}
    for r in truth:
        kind = "data_dependent" if r["kind"] == "exec" and r["name"] in DATA_DEPENDENT else r["kind"]
        at.setdefault(int(r["line"]), set()).add(kind)
    bad = []
    for t in prog.tags:
        if "neuron" not in t.devices:
            continue
        if t.kind == "dtype_demotion" and not t.required:
            continue  # ALSO dtype_demotion marks int64 arrivals (info), absent from the emulator's log
        if t.kind in TRUTH_KINDS and not at.get(t.line, set()) & set(TRUTH_KINDS[t.kind]):
            bad.append(f"{prog.name}:{t.line} tagged {t.kind}, but the emulator logged there only "
                       f"{sorted(at.get(t.line, set())) or 'nothing'}")
        if t.kind == "shape_churn":
            # the line itself compiled 3+ signatures; or the tensor is made on the host (pad_sequence, a
            # collate_fn), which compiles nothing there, and ops elsewhere compiled 3+ signatures
            on_host = not any(r["line"] == t.line and r["kind"] in ("compile", "exec") for r in truth)
            churn = any(r["kind"] == "compile" and (r["line"] == t.line or on_host) and r["signatures"] >= 3
                        for r in truth)
            graphs = sum(r["count"] for r in truth if r["kind"] == "graph_compile")
            if not churn and graphs < 3:
                bad.append(f"{prog.name}:{t.line} tagged shape_churn, but no op there compiled 3+ signatures")
    if prog.clean:
        dirty = [f"{r['kind']} {r['name']} at line {r['line']}" for r in truth
                 if r["kind"] in ("fallback", "f64")]
        if dirty:
            bad.append(f"{prog.name} is tagged CLEAN but the emulator logged: {', '.join(dirty[:5])}")
    return bad
