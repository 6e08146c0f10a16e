"""Finding kinds (issue 31): every kind is declared once in neuron_prof.analysis.kinds; a finding of any other
kind is an error in our code, a kind from another version's file is kept; the analyses and the job findings emit
declared kinds only; no shipped module spells a kind as a string literal."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import orjson
import pytest

from neuron_prof.analysis import (
    ANALYSES,
    KINDS,
    Finding,
    ForeignKind,
    Kind,
    UnknownKind,
    analyze,
    annotate,
    cross_rank_findings,
    report,
)
from neuron_prof.analysis.kinds import analysis_modules
from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.job import InProcessRunner, job_summary, rank_sources
from neuron_prof.loaders import load
from neuron_prof.model import Meta, Trace
from tests import _demo_trace, _report_trace
from tests._job_ranks import ddp_rank
from tests._merge_ranks import SKEW, rank_with
from tests.conftest import kineto_traces
from tests.test_layout import ROOT, SHIPPED

REGISTRY = ROOT / "neuron_prof" / "analysis" / "kinds.py"
SHARED_WORDS = {"collective": "also a track kind (TrackKind.COLLECTIVE), a step part and an evidence key"}
"""Kind values the house also uses as other words: a literal of one is an error only where it names a kind."""


def _finding(kind: str) -> Finding:
    return Finding(kind=kind, severity="info", title="t", cost_ns=0, share=0.0, count=1)


# ---- the registry -------------------------------------------------------------------------------------------


def test_a_kind_is_its_string_and_kinds_derive_from_the_registry() -> None:
    assert Kind.CPU_FALLBACK == "cpu_fallback" and {"cpu_fallback": 1}[Kind.CPU_FALLBACK] == 1
    assert KINDS == tuple(Kind) and len(set(KINDS)) == len(KINDS)
    f = _finding("cpu_fallback")  # a plain string naming a kind becomes the kind
    assert f.kind is Kind.CPU_FALLBACK
    d = f.to_dict()
    assert type(d["kind"]) is str and json.loads(json.dumps(d))["kind"] == "cpu_fallback"


def test_an_unknown_kind_is_an_error() -> None:
    with pytest.raises(UnknownKind, match="'cpu_fallbacks'.*kinds.py"):
        _finding("cpu_fallbacks")
    with pytest.raises(UnknownKind):
        _finding(3)  # type: ignore[arg-type]


def test_a_kind_from_another_version_is_kept_as_written() -> None:
    # GIVEN findings as a newer version writes them: one of a kind this version does not know
    doc = [{**_finding(Kind.RECOMPILE).to_dict(), "title": "old"}, {**_finding(Kind.RECOMPILE).to_dict(),
                                                                    "kind": "tensor_parallel_skew", "future": 1}]
    # THEN both come back, the unknown one with its kind as written, and go out again unchanged
    old, new = (Finding.from_dict(d) for d in doc)
    assert old.kind is Kind.RECOMPILE
    assert isinstance(new.kind, ForeignKind) and new.kind == "tensor_parallel_skew"
    assert new.to_dict() == {k: v for k, v in doc[1].items() if k != "future"}
    assert json.dumps(new.to_dict()) == json.dumps({k: v for k, v in doc[1].items() if k != "future"})


def test_the_pipeline_imports_every_analysis_module_the_kinds_name() -> None:
    analyze(_demo_trace.demo_like_trace())
    emitting = {fn.__module__.removeprefix("neuron_prof.analysis.") for fn in ANALYSES.values()}
    # every registered analysis lives in a module a kind names, and every named module registers one
    assert emitting == set(analysis_modules())


def test_facts_are_consistent() -> None:
    for k in Kind:
        assert k.value == k.name.lower() and k.info.label
        assert k.info.modules or k.info.cross_rank, f"{k}: no analysis module and not made across ranks"


# ---- every emitted kind is declared ------------------------------------------------------------------------


def _assert_declared(findings: list[Finding]) -> set[Kind]:
    for f in findings:
        assert isinstance(f.kind, Kind) and f.kind in KINDS, f.kind
        assert f.to_dict()["kind"] == f.kind.value
    return {f.kind for f in findings}  # type: ignore[misc]


def _single_rank_traces() -> list[Trace]:
    traces = [_demo_trace.demo_like_trace(churn=True), _report_trace.demo_like_trace()]
    return traces + [load(p) for p in kineto_traces() if p.stat().st_size < 200_000]


def test_every_analysis_emits_declared_kinds() -> None:
    seen: set[Kind] = set()
    for tr in _single_rank_traces():
        rep = report(tr)
        failed = [f.title for f in rep.findings if str(f.evidence.get("probe", "")).startswith("analysis:")]
        assert not failed, failed  # an analysis making an undeclared kind fails, as any error would
        seen |= _assert_declared(rep.findings)
        assert set(rep.totals["findings_by_kind"]) <= set(KINDS)
        orjson.dumps(rep.to_dict())  # kinds reach documents as plain strings (orjson takes no other keys)
        seen |= _assert_declared([Finding.from_dict(d) for d in annotate(tr, rep.findings).findings])
    # the analyses ran: the demo trace's problems came back
    assert {Kind.FIRST_CALL_COMPILE, Kind.SHAPE_CHURN, Kind.CPU_FALLBACK, Kind.SYNC_POINT} <= seen
    assert all(not k.info.cross_rank for k in seen)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0-2 of a 4-rank job, their clocks apart: rank 1 compiles before each all_reduce (late, and
    compiling what the others do not); rank 3 wrote nothing."""
    d = tmp_path_factory.mktemp("kinds_job")
    for r in range(3):
        t = rank_with(r, skew=SKEW if r == 1 else 0, late_compile=r == 1, jitter=20_000)
        write_trace(t.replace(metadata={**t.metadata, Meta.WORLD_SIZE: 4}), d / f"trace.rank{r}.json")
    return d


@pytest.fixture(scope="module")
def stopped_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0-2 of a 3-rank job; rank 2 stopped after 5 of 8 steps."""
    d = tmp_path_factory.mktemp("kinds_stopped")
    for r in range(3):
        write_trace(ddp_rank(r, 3, steps=5 if r == 2 else 8, stopped=r == 2), d / f"trace.rank{r}.json")
    return d


def test_job_summary_emits_declared_cross_rank_kinds(job: Path, stopped_job: Path) -> None:
    seen: set[Kind] = set()
    for folder in (job, stopped_job):
        js = job_summary(rank_sources([str(folder)]), InProcessRunner(), args=[str(folder)])
        kinds = _assert_declared(js.findings)
        assert all(k.info.cross_rank for k in kinds)
        # the job summary's document reads back as the same kinds
        doc = orjson.loads(orjson.dumps(js.to_dict()))
        assert {Finding.from_dict(d).kind for d in doc["findings"]} == kinds
        seen |= kinds
    assert {Kind.MISSING_RANK, Kind.STOPPED_RANK, Kind.STRAGGLER, Kind.RANK_COMPILES, Kind.COLLECTIVE_SPREAD,
            Kind.RANKS_TO_OPEN} <= seen


def test_merge_emits_declared_kinds(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "merged.pftrace"
    assert main(["merge", *sorted(str(p) for p in job.iterdir()), "-o", str(out)]) == 0
    merged = load(out)
    # the findings merge wrote (each rank's, the stragglers, the missing and stopped ranks)
    written = _assert_declared([Finding.from_dict(d) for d in merged.findings])
    assert {Kind.STRAGGLER, Kind.MISSING_RANK} <= written
    # and those found again from the merged trace
    assert Kind.STRAGGLER in _assert_declared(cross_rank_findings(merged))


# ---- no kind spelled outside the registry ------------------------------------------------------------------


def _is_kind_field(node: ast.expr) -> bool:
    """`x.kind`, `x["kind"]` or `x.get("kind")`: a finding's kind (a bare name `kind` may be any kind of thing)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind")


def _names_a_kind(node: ast.Constant, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether the literal stands where a kind goes: `kind=...`, a comparison with a kind, `register(...)`."""
    up = parents.get(node)
    if isinstance(up, (ast.Tuple, ast.List, ast.Set)):
        up = parents.get(up)
    if isinstance(up, ast.keyword):
        return up.arg == "kind"
    if isinstance(up, ast.Compare):
        return any(_is_kind_field(x) for x in (up.left, *up.comparators))
    if isinstance(up, ast.Call):
        return "register" in ast.unparse(up.func)
    return False


def kind_literals(path: Path) -> list[str]:
    """'file:line value' for every string literal in `path` that spells a declared kind where it names one."""
    values = {k.value for k in Kind}
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in sorted(ast.walk(tree), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values:
            if node.value not in SHARED_WORDS or _names_a_kind(node, parents):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                out.append(f"{where}:{node.lineno} {node.value!r}")
    return out


def test_no_kind_literal_outside_the_registry() -> None:
    found = [hit for folder in SHIPPED.values() for p in sorted(folder.rglob("*.py")) if p != REGISTRY
             for hit in kind_literals(p)]
    assert not found, "name finding kinds through neuron_prof.analysis.Kind:\n" + "\n".join(found)


def test_the_scan_finds_what_it_guards(tmp_path: Path) -> None:
    p = tmp_path / "probe.py"
    p.write_text('a = f.kind == "cpu_fallback"\nb = Finding(kind="collective")\nc = f.kind in ("x", "collective")\n'
                 'd = {"collective": 1}\ne = kind == "collective"\n@register("straggler")\ndef g(): ...\n'
                 'h = d["kind"] != "collective" or d.get("kind") == "collective"\ni = ["sync_point"]\n')
    # every literal of an unambiguous kind; "collective" where it names a finding's kind
    assert [h.split(" ", 1)[0].rsplit(":", 1)[1] for h in kind_literals(p)] == ["1", "2", "3", "6", "8", "8", "9"]
