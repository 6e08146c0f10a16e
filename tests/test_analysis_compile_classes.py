"""What a compile was (issue 23, item 5): a statement's first compile (cold cache), new shapes of a statement
already compiled, another dtype or static argument of shapes it compiled (not new shapes), a signature
compiled a second time (the cache lost it: `recompile`, never new shapes), and a phase after warm-up that
compiled on its own (a first evaluation on a new batch size: its own finding at its line)."""

from __future__ import annotations

from neuron_prof.analysis import analyze
from neuron_prof.model import Arg, TraceBuilder, TrackKind

MS = 1_000_000
STEP = 100 * MS


def _trace(compiles: list[tuple[int, str, str, list[list[int]], str]], steps: int = 8):
    """(step, op, backend signature, shapes, "call site[ in module]") per compile; steps of 100 ms marked as
    torch does."""
    b = TraceBuilder()
    p = b.process(1, "python")
    host = b.thread_track(1, 1, "main")
    comp = b.track(p, "compile", TrackKind.COMPILE)
    for k in range(steps):
        b.add_slice(host, k * STEP, STEP - MS, f"ProfilerStep#{k}", "user_annotation")
    used: dict[int, int] = {}
    for step, op, sig, shapes, site in compiles:
        t = step * STEP + MS + used.get(step, 0)
        used[step] = used.get(step, 0) + 12 * MS
        b.add_slice(host, t, 11 * MS, op, "cpu_op", {"Input Dims": shapes})
        site, _, module = site.partition(" in ")
        b.add_slice(comp, t, 10 * MS, op, "neuron_prof.compile",
                    {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: sig, Arg.SHAPES: shapes, Arg.CALL_SITE: site,
                     **({Arg.MODULE: module} if module else {})})
    return b.build()


def test_same_signature_twice_is_a_recompile_and_same_shapes_are_not_new_shapes() -> None:
    t = _trace([
        (0, "aten::addmm", "aten::addmm_aaa", [[16, 8], [8, 4]], "train.py:10"),
        (0, "aten::add_", "aten::add_.Tensor_b1", [[8], [8]], "train.py:12"),
        (1, "aten::add_", "aten::add_.Tensor_b2", [[8], [8]], "train.py:12"),   # momentum's alpha: same shapes
        (4, "aten::addmm", "aten::addmm_aaa", [[16, 8], [8, 4]], "train.py:10"),  # the cache lost it
    ])
    found = analyze(t)
    [re] = [f for f in found if f.kind == "recompile"]
    assert re.call_site == "train.py:10" and re.count == 1 and "compiled again" in re.title
    assert "not new shapes" in re.advice
    fc = sorted((f for f in found if f.kind == "first_call_compile"), key=lambda f: f.ts_ns or 0)
    assert all("new shapes" not in f.title and "shape_churn" not in f.advice for f in fc), [f.title for f in fc]
    assert not [f for f in found if f.kind == "shape_churn"]
    assert sum(f.evidence["new_shapes"]["count"] for f in fc) == 0
    assert sum(f.evidence["new_arguments"]["count"] for f in fc) == 1
    assert sum(f.count for f in fc) == 3  # the second addmm compile is the recompile's, counted once


def test_a_first_evaluation_after_warm_up_is_its_own_finding_at_its_line() -> None:
    t = _trace([
        (0, "aten::addmm", "aten::addmm_train", [[16, 8], [8, 4]], "train.py:10 in model.0"),
        (0, "aten::relu", "aten::relu_train", [[16, 8]], "train.py:10 in model.1"),
        # the same modules on 96 rows, called from the evaluation's line
        (5, "aten::addmm", "aten::addmm_eval", [[96, 8], [8, 4]], "train.py:30 in model.0"),
        (5, "aten::relu", "aten::relu_eval", [[96, 8]], "train.py:30 in model.1"),
        (5, "aten::mean", "aten::mean_eval", [[96]], "train.py:31"),
    ])
    fc = sorted((f for f in analyze(t) if f.kind == "first_call_compile"), key=lambda f: f.ts_ns or 0)
    assert [f.call_site for f in fc] == ["train.py:10", "train.py:30"]
    cold, phase = fc
    assert cold.severity == "info" and cold.count == 2
    assert phase.count == 3 and "step 5" in phase.title and "new shapes" in phase.title
    assert phase.severity in ("warning", "critical")  # 30 ms of an 800 ms run
    assert {s["call_site"] for s in phase.evidence["sites"]} == {"train.py:30", "train.py:31"}


def test_shapes_that_keep_changing_stay_one_finding() -> None:
    """New shapes at the same line in several steps recur (shape_churn's plan is the fix): not one finding
    per step."""
    t = _trace([(k, "aten::mm", f"aten::mm_{k}", [[8 * (k + 1), 4]], "train.py:10") for k in range(6)])
    fc = [f for f in analyze(t) if f.kind == "first_call_compile"]
    assert len(fc) == 1 and fc[0].evidence["new_shapes"]["count"] == 5


def test_an_op_first_run_after_the_loop_is_the_cold_cache_not_a_phase() -> None:
    """`(loss_sum / steps).item()` after training compiles a division once, and `acc += loss` an add the
    optimizer compiled for other shapes elsewhere: no new shapes of a statement or module, nothing to fix."""
    t = _trace([
        (0, "aten::addmm", "aten::addmm_train", [[16, 8], [8, 4]], "train.py:10"),
        (0, "aten::add_", "aten::add_param", [[8, 4], [8, 4]], "train.py:12"),
        (7, "aten::add_", "aten::add_acc", [[], []], "train.py:14"),
        (7, "aten::div", "aten::div_once", [[], []], "train.py:40"),
    ])
    fc = [f for f in analyze(t) if f.kind == "first_call_compile"]
    assert len(fc) == 1 and fc[0].count == 4 and "mid-run" not in fc[0].title


def test_the_first_iterations_tail_after_its_update_is_warm_up() -> None:
    """Steps inferred from optimizer steps run from update to update, so the next step's window holds the
    first iteration's tail (`torch.mode(logits.argmax(-1))` after `opt.step()`): its first compile there is
    the cold cache of warm-up, not a first call after it (gru_tagger.py raised a warning at opt.step's line)."""
    b = TraceBuilder()
    p = b.process(1, "python")
    host = b.thread_track(1, 1, "main")
    comp = b.track(p, "compile", TrackKind.COMPILE)

    def op(t: int, name: str, site: str, compile_ms: int = 0) -> None:
        b.add_slice(host, t, (compile_ms + 1) * MS, name, "cpu_op", {"Input Dims": [[8, 4]]})
        if compile_ms:
            b.add_slice(comp, t, compile_ms * MS, name, "neuron_prof.compile",
                        {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: f"{name}_x", Arg.SHAPES: [[8, 4]],
                         Arg.CALL_SITE: site})

    for k in range(6):
        t = k * STEP
        b.add_slice(host, t, MS, "Optimizer.zero_grad#Adam.zero_grad", "user_annotation")
        op(t + 2 * MS, "aten::mm", "train.py:29", 50 if k == 0 else 0)
        b.add_slice(host, t + 60 * MS, 5 * MS, "Optimizer.step#Adam.step", "user_annotation")
        op(t + 70 * MS, "aten::argmax", "train.py:33", 20 if k == 0 else 0)  # the first one: in step 1's window
    found = analyze(b.build())
    fc = [f for f in found if f.kind == "first_call_compile"]
    assert fc and sum(f.count for f in fc) == 2
    assert all(f.after_warmup is False and f.evidence["cold"]["after_warmup"] == 0 for f in fc), \
        [(f.title, f.after_warmup, f.evidence["cold"]) for f in fc]


def test_the_run_finding_names_the_statement_that_compiled_most() -> None:
    """One cold optimizer update (line 46) as costly as each of a forward's new shapes (line 43, every step):
    the finding is at line 43, which compiled most in all (dataloader_collate_churn.py named opt.step's line)."""
    t = _trace([(0, "aten::_foreach_add_", "aten::_foreach_add_a", [[500, 24], [2, 24]], "train.py:46")]
               + [(k, "aten::mm", f"aten::mm_{k}", [[16 - k, 2], [2, 24]], "train.py:43") for k in range(5)])
    (fc,) = [f for f in analyze(t) if f.kind == "first_call_compile"]
    assert fc.call_site == "train.py:43", fc.call_site
