"""`neuron-prof run`: profile a Python script (or `-m module`) with no change to its code."""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from neuron_prof.cli._run_exit import print_user_traceback
from neuron_prof.errors import UsageError
from neuron_prof.formats import DEFAULT_OUTPUT, PFTRACE, suffix_list

EMULATE_ENV = "NEURON_PROF_EMULATE"


def _exit_code(e: SystemExit) -> int:
    """The exit status Python itself would give for this SystemExit."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)  # sys.exit("message") prints the message and exits 1
    return 1


def _enable_emulator(forced: bool) -> bool:
    """Enable the emulated neuron device: always with --emulate-neuron, else when NEURON_PROF_EMULATE=1.
    True when enabled: its device timeline is then captured as on Trainium (the runtime's system profile,
    processed by its stand-in neuron-explorer)."""
    if not forced and os.environ.get(EMULATE_ENV, "").strip().lower() not in ("1", "true", "yes"):
        return False
    try:
        import neuron_prof.emulator as emu
    except ImportError:
        raise UsageError("--emulate-neuron: the emulated neuron device (neuron_prof.emulator) is not installed") from None
    emu.enable(emu.EmulatorConfig.from_env())  # the env also tunes it (NEURON_PROF_EMULATE_COMPILE_SCALE, ...)
    return True


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", default=DEFAULT_OUTPUT, show_default=True,
              help=f"Trace file ({suffix_list()}); a {PFTRACE.suffixes[0]} is also written beside a JSON.")
@click.option("--backend", default=None, help="Backend adapter: cpu, cuda or neuron (default: detected).")
@click.option("--emulate-neuron", is_flag=True, default=False,
              help=f"Run on the emulated neuron device (also when {EMULATE_ENV}=1).")
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module, like `python -m MODULE`.")
@click.option("--no-pftrace", is_flag=True, default=False, help="Write only the JSON.")
@click.option("-q", "--quiet", is_flag=True, default=False, help="Do not print where the traces went.")
@click.option("--device-profile", "device_profile", is_flag=True, default=False,
              help="On Trainium, also capture the Neuron runtime's device profile (engines, collectives, HBM "
                   "bandwidth, Summary metrics; reserves about 5 GB of HBM on Trn2) after 3 warm-up steps "
                   "(or NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP; a step = an optimizer.step() call).")
@click.option("--device-profile-steps", default=None, metavar="N|A:B",
              help="The device profile's window: after N steps, or steps A to B-1 (implies --device-profile).")
@click.option("--profile-dir", default=None, metavar="DIR",
              help="Where the runtime's capture and its tables go (default: neuron-prof's cache, bounded).")
@click.option("--device-profile-dir", default=None, metavar="DIR", hidden=True,
              help="Old name: --profile-dir DIR with --device-profile-steps 0.")
@click.option("--no-system-profile", is_flag=True, default=False,
              help="On Trainium, do not capture the runtime's system profile (the device execution timeline).")
@click.option("--host-usage", is_flag=True, default=False,
              help="On Trainium, also capture the runtime's host CPU utilisation and host memory (ProfileMode "
                   "CPU_UTIL and HOST_MEMORY) as counter tracks.")
@click.option("--operator-lines", is_flag=True, default=False,
              help="Exact lines for operator statements too (a * b, x[i]): a Python call per operator, up to "
                   "~1.5x torch.profiler's step time on microsecond ops.")
@click.option("--full-python-trace", is_flag=True, default=False,
              help="Keep every Python call the profiler's tracer recorded (default: Python work that launched no "
                   "op, an import say, is one slice per call at its line; builtins without an op are dropped "
                   "unless they took 100 us or more).")
@click.option("--max-events", type=click.IntRange(min=1), default=None, metavar="N",
              help="Keep the trace under N events: the deepest Python frames go first, then steps are sampled; "
                   "summary says what went.")
@click.option("--steps", "steps", default=None, metavar="N|A:B",
              help="Record only these steps in full: N = the first N, A:B = steps A to B-1, A: = from step A on "
                   "(a step = an optimizer.step() call); summary says which steps were not recorded.")
@click.argument("script_and_args", nargs=-1, type=click.UNPROCESSED)
def command(output: str, backend: str | None, emulate_neuron: bool, module: str | None, no_pftrace: bool,
            quiet: bool, device_profile: bool, device_profile_steps: str | None, profile_dir: str | None,
            device_profile_dir: str | None, no_system_profile: bool, host_usage: bool, operator_lines: bool,
            full_python_trace: bool, max_events: int | None, steps: str | None,
            script_and_args: tuple[str, ...]) -> int:
    """Profile a Python script with no code change.

    \b
    neuron-prof run train.py --epochs 1            # -> trace.json, trace.pftrace
    neuron-prof run -o run1/t.json -m mypkg.train  # a module, like python -m
    neuron-prof run --device-profile train.py      # on Trainium: also the device profile, after 3 steps

    The script sees the same sys.argv, sys.path[0] and __name__ == "__main__" as under python;
    its exit code passes through, and an uncaught exception prints the script's own traceback and
    exits 1, as under python. The trace is written even when it fails.
    """
    import neuron_prof

    if module is None and not script_and_args:
        raise UsageError("run: give a script to profile (neuron-prof run SCRIPT [ARGS...]) or -m MODULE")
    if module is None:
        script = Path(script_and_args[0])
        if not script.is_file():
            raise UsageError(f"{script}: no such script")
        argv = [str(script), *script_and_args[1:]]
    else:
        argv = [module, *script_and_args]
    window = _window(device_profile, device_profile_steps, device_profile_dir)
    _enable_emulator(emulate_neuron)
    try:
        session = neuron_prof.profile(output, backend=backend, pftrace=not no_pftrace, quiet=quiet,
                                      system_profile=not no_system_profile, device_profile=window,
                                      host_usage=host_usage, profile_dir=profile_dir or device_profile_dir,
                                      operator_lines=operator_lines, full_python_trace=full_python_trace,
                                      max_events=max_events, steps=steps)
    except ValueError as e:  # a malformed --steps, said before the script runs
        raise UsageError(f"--{e}") from None

    saved_argv = sys.argv[:]
    sys.argv = argv
    # What python puts first on sys.path: the script's folder, or the working directory for -m.
    path0 = str(Path(argv[0]).resolve().parent) if module is None else os.getcwd()
    sys.path.insert(0, path0)
    keep: list[object] = []
    code = 0
    try:
        with session, _keep_code(keep), _optimizer_steps(session, window, steps is not None):
            if module is None:
                keep.append(runpy.run_path(argv[0], run_name="__main__"))
            else:
                keep.append(runpy.run_module(module, run_name="__main__", alter_sys=True))
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:  # noqa: BLE001  (the script's own error: shown as python shows it)
        print_user_traceback(e)
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
    finally:
        sys.argv = saved_argv
        if sys.path and sys.path[0] == path0:
            sys.path.pop(0)
        keep.clear()
    return code


def _window(flag: bool, steps: str | None, old_dir: str | None) -> bool | int | tuple[int, int | None]:
    """The device profile's window from the options: False, True (default warm-up), N or (A, B)."""
    if steps is None:
        return 0 if old_dir is not None else flag
    try:
        if ":" in steps:
            a, b = steps.split(":", 1)
            return int(a or 0), int(b) if b.strip() else None
        return int(steps)
    except ValueError:
        raise UsageError(f"--device-profile-steps {steps!r}: give N or A:B (step numbers)") from None


@contextlib.contextmanager
def _optimizer_steps(session: object, window: object, steps: bool = False) -> Iterator[None]:
    """With a device-profile window or --steps, each ``optimizer.step()`` of the script ends a step
    (``session.step()``) when it returns (`_optimizer_steps.optimizer_steps`): a script run unchanged marks no
    steps, and the window counts them."""
    if not steps and (window is False or window == 0 or
                      (isinstance(window, tuple) and window[0] == 0 and window[1] is None)):
        yield
        return
    from neuron_prof.cli._optimizer_steps import optimizer_steps

    with optimizer_steps(session.step):  # type: ignore[attr-defined]
        yield


@contextlib.contextmanager
def _keep_code(keep: list[object]) -> Iterator[None]:
    """Keep the script's code objects alive until the session has read its profile.

    torch.profiler's Python tracer keeps only views of each code object's file and function names; runpy
    drops the script's module code when it returns, before the profile is read, and the names would read
    back as garbage. runpy runs every script and module through `_run_module_code(code, ...)`: its code
    argument is kept here (the globals runpy returns keep the script's functions alive)."""
    orig = getattr(runpy, "_run_module_code", None)
    if not callable(orig):  # another Python's runpy: names may be lost, never wrong (capture checks them)
        yield
        return

    def run_module_code(code: object, *args: object, **kwargs: object) -> object:
        keep.append(code)
        return orig(code, *args, **kwargs)

    runpy._run_module_code = run_module_code  # type: ignore[attr-defined]
    try:
        yield
    finally:
        runpy._run_module_code = orig  # type: ignore[attr-defined]
