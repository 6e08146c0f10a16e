"""The stand-in ``neuron-explorer`` for the emulated device: ``python -m neuron_prof.emulator.neuron_explorer``.

    neuron-explorer view -d RUN_DIR --output-format parquet|perfetto|summary-json [--output-file OUT]
                    [--ignore-device-profile] [--ignore-system-profile]
    neuron-explorer --show-profile-schema
    neuron-explorer --version

It takes the real tool's documented command line (neuron-explorer-facts, "Processing") and processes only the
emulated runtime's captures: Parquet tables (`_explorer_view`), the Perfetto files and summary-json
(`profiling.explorer_outputs`); the full-profile JSON, no longer maintained from Neuron 2.34, is not written. It is never installed
as a console script: `neuron_prof.emulator.enable()` puts a ``neuron-explorer`` launcher for it on the emulated
process's PATH (`install_on_path`), so a machine without the Neuron tools still has no ``neuron-explorer``.
Exit codes: 0 done, 1 nothing to process, 2 usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import orjson

COMMAND = "neuron-explorer"
VERSION = "emulated (neuron-prof stand-in)"
FORMATS = ("parquet", "perfetto", "summary-json")
"""The ``--output-format`` values it writes (the retired full-profile ``json`` is not one: 2.34 announcement)."""


def main(argv: list[str] | None = None) -> int:
    from neuron_prof.emulator import _explorer_schema

    ap = argparse.ArgumentParser(prog=COMMAND, description="Stand-in neuron-explorer for the emulated device.")
    ap.add_argument("--version", action="store_true")
    ap.add_argument("--show-profile-schema", action="store_true")
    sub = ap.add_subparsers(dest="cmd")
    view = sub.add_parser("view", help="process a run directory into tables")
    view.add_argument("-d", "--directory", required=True)
    view.add_argument("--output-format", default="parquet", choices=FORMATS)
    view.add_argument("--output-file", default=None)
    view.add_argument("--ignore-device-profile", action="store_true", help="skip device-level traces")
    view.add_argument("--ignore-system-profile", action="store_true", help="skip system profiles (device-only view)")
    a = ap.parse_args(argv)
    if a.version:
        print(f"{COMMAND} {VERSION}")
        return 0
    if a.show_profile_schema:
        sys.stdout.write(_explorer_schema.as_yaml())
        return 0
    if a.cmd != "view":
        ap.print_usage(sys.stderr)
        return 2
    return _view(Path(a.directory), a.output_format, a.output_file, not a.ignore_device_profile,
                 not a.ignore_system_profile)


def _view(run: Path, fmt: str, output_file: str | None, device: bool, system: bool = True) -> int:
    from neuron_prof.emulator._explorer_view import captures, process
    from neuron_prof.emulator.profiling.explorer_outputs import summary_json, write_perfetto

    if not captures(run):
        print(f"{COMMAND}: no runtime capture under {run}", file=sys.stderr)
        return 1
    if fmt == "summary-json":
        doc, warnings = summary_json(run)
        text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
        if output_file:
            Path(output_file).write_text(text + "\n")
        print(text)
        _warn(warnings)
        return 0
    out = Path(output_file) if output_file else run / fmt
    n, warnings = (write_perfetto(run, out, device, system) if fmt == "perfetto" else process(run, out, device, system))
    _warn(warnings)
    print(f"{COMMAND}: {n} capture(s) of {run} -> {out}")
    return 0


def _warn(warnings: list[str]) -> None:
    for w in warnings:
        print(f"{COMMAND}: warning: {w}", file=sys.stderr)


def install_on_path(bin_dir: Path) -> Path:
    """Write a ``neuron-explorer`` launcher (this interpreter, this module) into `bin_dir` and put `bin_dir` first
    on this process's PATH (children inherit it). Returns the launcher."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / COMMAND
    text = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m neuron_prof.emulator.neuron_explorer \"$@\"\n"
    if not exe.is_file() or exe.read_text() != text:
        tmp = bin_dir / f".{COMMAND}.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, exe)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if str(bin_dir) not in parts:
        os.environ["PATH"] = os.pathsep.join([str(bin_dir), *[p for p in parts if p]])
    return exe


if __name__ == "__main__":
    sys.exit(main())
