"""The docs hold: README.md is a front page linking every page, every local link resolves, and every command a
page shows runs.

The convention (docs/contributing.md relies on it): commands are shown in ```console blocks as `$ ` lines (a
line ending in `\\` or inside an open quote goes on); the lines after a command are its sample output, never
compared, except after `$ echo $?`, whose next line is the exit code the command before must give. A block
preceded by `<!-- docs-test: flags only: REASON -->` needs something this test cannot give (a device, a
server, a terminal, a cluster): its `neuron-prof` commands are parsed by click, their flags checked, not run.
Every other `neuron-prof` command runs through `neuron_prof.cli.main()` in a workspace holding a real
capture: `train.py` (below) run under `neuron-prof run` on the emulated neuron device as before.json,
after.json and trace.json, two rank files made from it (run/), and a git checkout on branch `main`. Each page
starts from a fresh copy of that workspace. Commands other than neuron-prof's are checked by what they name:
`make` targets exist, `python -m bench NAME` is a benchmark, a script exists and knows its flags, a DuckDB
query runs on what the page exported. `neuron-prof ...` in inline code is flag-checked too.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

from neuron_prof.analysis import Kind
from neuron_prof.cli import cli, main
from neuron_prof.formats import FORMATS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
FLAGS_ONLY = re.compile(r"<!--\s*docs-test:\s*flags only:\s*(.+?)\s*-->")
RUNS_NOWHERE = {"tui": "an interactive app", "open": "a server", "demo": "a minute of training"}
"""neuron-prof commands that must sit in a flags-only block (they would hang or take minutes here)."""
NOT_RUN = {"pip": "installs into the environment"}
"""Other commands a page may show that the test names but does not run."""

TRAIN = '''\
"""A small training loop: a model, an optimizer, a median (a CPU fallback on the neuron device), a float64
scale (a dtype demotion) and the loss read every step (a sync point)."""
import argparse

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--lr", type=float, default=1e-2)
args = p.parse_args()
dev = "neuron" if hasattr(torch, "neuron") else "cpu"
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    for step in range(6):
        x = torch.randn(16, 32).to(dev)
        scale = torch.ones(1, dtype=torch.float64).to(dev)
        loss = (model(x).pow(2).mean() * scale).float()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.3f} median {x.median().item():.3f}")
'''


# ---- reading the pages -----------------------------------------------------------------------------------


@dataclass
class Block:
    lang: str
    lines: list[str]
    flags_only: str | None
    line_no: int


@dataclass
class Page:
    path: Path
    text: str
    blocks: list[Block] = field(default_factory=list)
    prose: str = ""
    """The text outside fenced blocks."""

    @property
    def name(self) -> str:
        return self.path.relative_to(REPO).as_posix()


def read_page(path: Path) -> Page:
    page = Page(path, path.read_text(encoding="utf-8"))
    lines = page.text.splitlines()
    prose: list[str] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            prose.append(lines[i])
            i += 1
            continue
        indent, start = len(fence.group(1)), i
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        marker = FLAGS_ONLY.search(before)
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        i += 1
        page.blocks.append(Block(fence.group(2), body, marker.group(1) if marker else None, start + 1))
    page.prose = "\n".join(prose)
    return page


@dataclass
class Command:
    text: str
    output: list[str]


def commands(block: Block) -> list[Command]:
    """The `$ ` commands of a console block, each with the output lines shown after it."""
    out: list[Command] = []
    lines = iter(block.lines)
    for line in lines:
        if not line.startswith("$ "):
            if out:
                out[-1].output.append(line)
            continue
        text = line[2:]
        while text.endswith("\\") or not _closed(text):
            text = (text[:-1] if text.endswith("\\") else text + "\n") + next(lines)
        out.append(Command(text, []))
    return out


def _closed(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in read_page(path).prose.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


ALL = [read_page(README), *map(read_page, PAGES)]


def local_links(page: Page) -> Iterator[str]:
    prose = re.sub(r"`[^`\n]*`", "", page.prose)
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", prose):
        target = m.group(1)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
            yield target


# ---- the front page and the links ------------------------------------------------------------------------


def test_readme_is_a_front_page_linking_every_docs_page() -> None:
    readme = ALL[0]
    n = len(readme.text.splitlines())
    assert n <= 250, f"README.md has {n} lines: the front page holds at most 250; move the rest to a docs page"
    linked = {(README.parent / t.split("#")[0]).resolve() for t in local_links(readme)}
    pages = {p.resolve() for p in PAGES}
    assert len(pages & linked) >= 8, "the README links fewer than 8 docs pages"
    assert not pages - linked, f"docs pages the README does not link: {sorted(p.name for p in pages - linked)}"


@pytest.mark.parametrize("page", ALL, ids=lambda p: p.name)
def test_every_local_link_resolves(page: Page) -> None:
    bad = []
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.path.parent / path).resolve() if path else page.path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.relative_to(REPO)}")
    assert not bad, f"{page.name}: broken links:\n" + "\n".join(bad)


def test_every_registry_entry_is_on_its_page() -> None:
    """The findings page names every kind, the TUI page every view, the formats page every format."""
    from neuron_prof.tui.views import VIEWS

    text = {p.path.name: p.text for p in ALL[1:]}
    assert not [k.value for k in Kind if f"| `{k.value}` |" not in text["findings.md"]], "kinds missing from " \
        "docs/findings.md's table"
    assert not [v.title for v in VIEWS if f"| `{v.hotkey}` | {v.title} |" not in text["tui.md"]], "views missing " \
        "from docs/tui.md's table"
    assert not [f for f in FORMATS if f"| `{f}` |" not in text["formats.md"]], "formats missing from " \
        "docs/formats.md's table"


def test_commands_are_shown_where_the_test_finds_them() -> None:
    """A command outside a console block would not be checked: code blocks of other kinds hold none."""
    hidden = [f"{p.name}:{b.line_no}: {ln.strip()}" for p in ALL for b in p.blocks if b.lang != "console"
              for ln in b.lines if re.match(r"^\s*(\$ |neuron-prof )", ln)]
    assert not hidden, "commands outside ```console blocks:\n" + "\n".join(hidden)
    assert all(any(b.lang == "console" for b in p.blocks) for p in ALL), [
        p.name for p in ALL if not any(b.lang == "console" for b in p.blocks)]


# ---- the commands ----------------------------------------------------------------------------------------


def command_of(name: str) -> click.Command:
    cmd = cli.get_command(click.Context(cli), name)
    assert cmd is not None, f"neuron-prof has no command {name!r}"
    return cmd


def check_flags(args: list[str], *, parse: bool) -> None:
    """`args` (after `neuron-prof`): the command exists, each option before its positional arguments end (a
    script's own, for `run`) is one of its options, and with `parse` click accepts the whole line."""
    assert args, "`neuron-prof` with no command"
    name, rest = args[0], args[1:]
    cmd = command_of(name)
    opts = {o: p for p in cmd.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok == "--":
            break
        if tok.startswith("-") and len(tok) > 1 and not re.match(r"^-\d", tok):
            key = tok.split("=", 1)[0]
            assert key in opts or key in ("-h", "--help"), f"neuron-prof {name} has no option {key}"
            param = opts.get(key)
            if param is not None and not param.is_flag and not param.count and "=" not in tok:
                i += 1
            if name == "run" and param is not None and param.name == "module":
                break  # `-m MODULE`: the module's own arguments follow
        elif name == "run":
            break  # the script and its own arguments
        i += 1
    if parse:
        cmd.make_context(name, list(rest))


@dataclass
class Shell:
    """Runs one page's commands in the workspace (the current directory)."""

    capsys: pytest.CaptureFixture[str]
    rc: int | None = None
    pending: str | None = None
    """The last neuron-prof command and its stderr, until its exit code is judged: by the `echo $?` after it,
    else by what its command may exit with (0; `check` also 1 and 3)."""
    allowed: tuple[int, ...] = (0,)
    flags_only: int = 0
    ran: int = 0

    def judge(self) -> None:
        if self.pending is not None:
            what, self.pending = self.pending, None
            assert self.rc in self.allowed, f"exit {self.rc}: {what}"

    def run(self, cmd: Command, flags_only: str | None) -> None:
        lex = shlex.shlex(cmd.text, posix=True, punctuation_chars=";&|<>")
        lex.whitespace_split = True
        tokens = list(lex)
        segment: list[str] = []
        for tok in [*tokens, ";"]:
            if tok in (";", "&&"):
                if segment:
                    self.segment(segment, cmd, flags_only)
                segment = []
            else:
                segment.append(tok)

    def segment(self, tokens: list[str], cmd: Command, flags_only: str | None) -> None:
        redirect = None
        if len(tokens) >= 2 and tokens[-2] in (">", ">>"):
            redirect, tokens = (tokens[-2], os.path.expandvars(tokens[-1])), tokens[:-2]
        assert "|" not in tokens and "<" not in tokens, f"{cmd.text!r}: pipes are not supported here"
        while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):  # `VAR=value cmd`: the variable is for the job
            tokens = tokens[1:]
        prog = tokens[0]
        if not (prog == "echo" and tokens[1:] == ["$?"]):
            self.judge()
        if prog == "neuron-prof":
            self.neuron_prof([os.path.expandvars(t) for t in tokens[1:]], redirect, flags_only)
        elif prog == "echo" and tokens[1:] == ["$?"]:
            expected = next((ln.strip() for ln in cmd.output if ln.strip()), None)
            assert expected is not None, "`echo $?` shows no exit code after it"
            assert self.rc == int(expected), f"exit code {self.rc}, the page says {expected}: {self.pending}"
            self.pending = None
        elif prog == "head" and tokens[1] == "-c" and redirect and redirect[0] == ">":
            Path(redirect[1]).write_bytes(Path(tokens[3]).read_bytes()[: int(tokens[2])])
        elif prog == "duckdb" and tokens[1] == "-c":
            import duckdb

            duckdb.connect().execute(tokens[2]).fetchall()
        elif prog == "make":
            targets = re.findall(r"^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text(), re.MULTILINE)
            missing = [t for t in tokens[1:] if "=" not in t and t not in targets]
            assert not missing, f"Makefile has no target {missing}"
        elif prog == "torchrun" or tokens[:3] == ["python", "-m", "torch.distributed.run"]:
            if "neuron-prof" in tokens:
                check_flags(tokens[tokens.index("neuron-prof") + 1:], parse=True)
            self.flags_only += 1
        elif prog in ("python", "python3", ".venv/bin/python"):
            self.python(tokens[1:])
        else:
            assert prog in NOT_RUN, f"{cmd.text!r}: the test does not know {prog!r} (add a rule to tests/test_docs.py)"

    def neuron_prof(self, args: list[str], redirect: tuple[str, str] | None, flags_only: str | None) -> None:
        if flags_only is not None:
            check_flags(args, parse=True)
            self.flags_only += 1
            return
        check_flags(args, parse=False)
        assert args[0] not in RUNS_NOWHERE, (
            f"neuron-prof {args[0]} ({RUNS_NOWHERE[args[0]]}) needs a `<!-- docs-test: flags only: ... -->` block")
        assert not (args[0] == "run" and "--emulate-neuron" in args), "run --emulate-neuron needs a flags-only block"
        self.capsys.readouterr()
        self.rc = main(args)
        out = self.capsys.readouterr()
        if redirect is not None:
            with open(redirect[1], "a" if redirect[0] == ">>" else "w", encoding="utf-8") as f:
                f.write(out.out)
        self.allowed = (0, 1, 3) if args[0] == "check" else (0,)
        self.pending = f"neuron-prof {' '.join(args)}\n{out.err[-2000:]}"
        self.ran += 1

    def python(self, args: list[str]) -> None:
        if args[:2] == ["-m", "bench"]:
            import bench.__main__ as suite

            names = {**suite.BENCHES, **suite.OPT_IN}
            rest = args[2:]
            if rest and not rest[0].startswith("-"):
                assert rest[0] in names, f"python -m bench: no benchmark {rest[0]!r}"
                source = (REPO / "bench" / f"{names[rest[0]].module.split('.')[-1]}.py").read_text()
                rest = rest[1:]
            else:
                source = (REPO / "bench" / "__main__.py").read_text()
            unknown = [t.split("=")[0] for t in rest if t.startswith("--") and f'"{t.split("=")[0]}"' not in source]
            assert not unknown, f"python -m bench {' '.join(args[2:])}: unknown options {unknown}"
        elif args[:2] == ["-m", "pytest"]:
            missing = [t for t in args[2:] if not t.startswith("-") and not (REPO / t).exists()]
            assert not missing, f"pytest: no such test files {missing}"
        else:
            script = REPO / args[0] if (REPO / args[0]).is_file() else Path(args[0])  # or one a command made
            assert script.is_file(), f"python {args[0]}: no such script"
            source = script.read_text()
            unknown = [t for t in args[1:] if t.startswith("--") and f'"{t}"' not in source]
            assert not unknown, f"python {args[0]}: unknown options {unknown}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prepared workspace (kept as `<ws>.orig`; each page gets a fresh copy at the same path)."""
    ws = tmp_path_factory.mktemp("docs") / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN)
    (ws / "mypkg").mkdir()
    (ws / "mypkg" / "__init__.py").write_text("")
    (ws / "mypkg" / "train.py").write_text(TRAIN)
    env = {**os.environ, **_env(ws), "NEURON_PROF_EMULATE": "1"}
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "train.py"]):
        subprocess.run([*git, *args], cwd=ws, check=True, env=env)
    capture = textwrap.dedent("""
        import sys
        from neuron_prof.cli import main
        for out, epochs in (("before.json", "1"), ("after.json", "2"), ("trace.json", "1")):
            if main(["run", "-q", "-o", out, "train.py", "--epochs", epochs]) != 0:
                sys.exit(f"neuron-prof run -o {out} failed")
    """)
    done = subprocess.run([sys.executable, "-c", capture], cwd=ws, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.copy(ws / "before.json", ws / "main.json")
    import neuron_prof
    from neuron_prof.exporters import write_trace

    trace = neuron_prof.load(ws / "trace.json")
    (ws / "run").mkdir()
    for r in (0, 1):
        write_trace(trace.replace(metadata={**trace.metadata, "rank": r, "world_size": 2}),
                    ws / "run" / f"trace.rank{r}.json")
    shutil.copytree(ws, ws.with_suffix(".orig"), symlinks=True)
    return ws


def _env(ws: Path) -> dict[str, str]:
    return {"NEURON_PROF_DATA_DIR": str(ws / ".data"), "NEURON_PROF_CACHE_DIR": str(ws / ".cache"),
            "NEURON_PROF_PROGRESS": "0", "GITHUB_STEP_SUMMARY": str(ws / "step_summary.md")}


def _forget_mypkg() -> None:
    for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.mark.parametrize("page", ALL, ids=lambda p: p.name)
def test_every_command_on_the_page_runs(page: Page, workspace: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    shutil.rmtree(workspace)
    shutil.copytree(workspace.with_suffix(".orig"), workspace, symlinks=True)
    for k, v in _env(workspace).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(workspace)
    # `run -m mypkg.train` runs in this process: a `mypkg` another test imported from its own folder (same
    # pytest worker) must not answer for the workspace's
    _forget_mypkg()
    request.addfinalizer(_forget_mypkg)  # nor may the workspace's answer for a later test's
    shell = Shell(capsys)
    for block in page.blocks:
        if block.lang == "console":
            cmds = commands(block)
            for i, cmd in enumerate(cmds):
                try:
                    shell.run(cmd, block.flags_only)
                    if not (i + 1 < len(cmds) and cmds[i + 1].text.strip() == "echo $?"):
                        shell.judge()
                except Exception as e:  # a DuckDB error, a click error: named with the page's line
                    raise AssertionError(f"{page.name}:{block.line_no}: $ {cmd.text}\n{type(e).__name__}: {e}") from e
    shell.judge()
    for span in re.findall(r"`(neuron-prof [^`]+)`", page.prose):
        args = shlex.split(span.replace("...", ""))[1:]
        if args and not args[0].endswith(":") and not args[0].startswith("-"):
            check_flags(args, parse=False)
