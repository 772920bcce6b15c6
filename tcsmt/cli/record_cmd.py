"""``tcsmt record``: record, on this machine's CUDA GPU, the cuBLAS plans of a list of calls or of every GEMM a
Python program runs, and write them as a plan catalog the library then loads.

    tcsmt record --call 'mm 4096x11008x4096 bfloat16' [--call ...] [--calls FILE] [--out DIR]
    tcsmt record --script train.py [--out DIR] [-- ARGS ...]      (or --module NAME)
    tcsmt record --recording REC.json.gz [...] [--out DIR]        (a catalog from earlier recordings; no GPU)

Calls are written as ``tcsmt explain`` and the library's refusals write them (``OP MxNxK DTYPE [key=value ...]``,
:func:`tcsmt.library.lookup.parse_record_spec`); ``--calls FILE`` holds one a line (``#`` comments).  A script or
module runs as ``__main__`` under a torch dispatch mode that sees its GEMMs forward and backward
(:mod:`tcsmt.hwcheck.gemm_calls`); each call is recorded under the library settings it ran with.  The plans are
recorded under CUDA graph capture (:mod:`tcsmt.hwcheck.record`), converted by the shipped rules
(:mod:`tcsmt.library.catalog_build`) and written to ``DIR/<gpu>_cublas<version>_torch<version>_<name>.sqlite``
(DIR: ``--out``, else the first folder of ``$TCSMT_PLANS``), with the raw recordings beside it; an existing
catalog is replaced only with ``--force``.  The catalog is stamped with the GPU, its SM count, the driver, torch,
CUDA, cuBLAS and cuBLASLt versions, and answers only for its GPU; under another stamp it is not applied
(:func:`tcsmt.library.lookup.answer` with ``stamp``).  At the end each call is looked up under the running
stamp, and the command says how many the library answers and why it refuses the others.  ``--progress`` prints a
line per batch of 256 calls; an interrupted recording (Ctrl-C, SIGTERM) writes the calls it finished and their
catalog, then exits as interrupted.
"""
from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import InternalError, TcsmtError
from tcsmt.io.options import progress_option
from tcsmt.io.progress import Progress
from tcsmt.io.trap import CONTEXT_SETTINGS, Command, script_main
from tcsmt.library.checks import make_call
from tcsmt.library.lookup import PLANS_ENV, answer, parse_record_spec, record_spec
from tcsmt.library.plans import Call
from tcsmt.library.record_store import (
    ENV_OF,
    catalog_name,
    recorder_call,
    recording_path,
    setting_for,
    write_recording,
)
from tcsmt.library.settings import settings_key


def calls_file(path: Path) -> list[str]:
    """The call specs of a file: one a line, blank lines and ``#`` comments skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TcsmtError(f"cannot read {path}: {exc}") from None
    return [t for t in (line.split("#", 1)[0].strip() for line in lines) if t]


def call_of_collected(entry: dict[str, Any]) -> Call:
    """The :class:`Call` of one call the dispatch mode saw, under its settings and this process's environment."""
    from tcsmt.hwcheck.record import norm_call

    c, s = norm_call(entry["call"]), entry["setting"]
    key = settings_key(c["a_dtype"], blas=s["blas"], reduced=tuple(s["reduced"]),
                       cublas_workspace=os.environ.get(ENV_OF["cublas_workspace"], ""),
                       cublaslt_workspace=os.environ.get(ENV_OF["cublaslt_workspace"], ""))
    layout = c["op"] not in ("linear", "scaled_mm")
    return make_call(c["op"], c["M"], c["N"], c["K"], a_dtype=c["a_dtype"], b_dtype=c["b_dtype"],
                     out_dtype=c["out_dtype"], batch=c["batch"], alpha=c["alpha"], beta=c["beta"], bias=c["bias"],
                     tf32=c["tf32"], scale=c["scale"], fast_accum=c["fast_accum"], a_t=bool(c["a_t"]) and layout,
                     b_t=bool(c["b_t"]) and layout, settings=key)


def out_dir(out: Path | None) -> Path:
    if out is None:
        first = next((p for p in os.environ.get(PLANS_ENV, "").split(":") if p), None)
        if first is None:
            raise TcsmtError(f"name the folder for the catalog: --out DIR, or set ${PLANS_ENV}")
        out = Path(first)
    if out.exists() and not out.is_dir():
        raise TcsmtError(f"{out} is not a folder")
    return out


def _collect(kind: str, target: str, argv: list[str]) -> tuple[list[tuple[Call, int]], dict[str, dict[str, Any]]]:
    """The calls a script or module makes (with their counts) and what was skipped (reason -> count, example)."""
    try:
        import torch
    except Exception as exc:
        raise TcsmtError(f"--{kind} needs PyTorch ({type(exc).__name__}: {exc})") from None
    from tcsmt.hwcheck.gemm_calls import collect, run_program

    found = collect(torch, lambda: run_program(kind, target, argv))
    calls: list[tuple[Call, int]] = []
    skipped = dict(found.skipped)
    for e in found.calls.values():
        try:
            calls.append((call_of_collected(e), int(e["count"])))
        except TcsmtError as exc:
            s = skipped.setdefault(str(exc), {"count": 0, "example": f"{e['aten']} {e['call']}"})
            s["count"] += int(e["count"])
    return calls, skipped


@click.command("record", cls=Command, context_settings={**CONTEXT_SETTINGS, "ignore_unknown_options": True,
                                                         "allow_interspersed_args": False})
@click.option("--call", "specs", multiple=True, metavar="SPEC",
              help="a call, as explain and the refusals write it: 'OP MxNxK DTYPE [key=value ...]'; repeatable")
@click.option("--calls", "calls_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a file of calls, one a line")
@click.option("--script", type=click.Path(exists=True, dir_okay=False), default=None,
              help="record every GEMM this Python script runs (ARGS are its arguments)")
@click.option("--module", default=None, help="record every GEMM this module runs as python -m NAME ARGS")
@click.option("--recording", "recordings", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="build the catalog from recordings made earlier (no GPU needed); repeatable")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"folder of the catalog (default: the first of ${PLANS_ENV})")
@click.option("--name", default="recorded", show_default=True, help="last part of the catalog's file name")
@click.option("--gpu", default=None, help="the catalog's GPU name (default: from the device name: h100, h200, ...)")
@click.option("--method", type=click.Choice(["capture", "executed"]), default="capture", show_default=True,
              help="capture: CUDA graph capture, nothing runs (calls whose capture fails run); executed: every "
                   "call runs under torch.profiler")
@click.option("--dry-run", is_flag=True, help="list the calls that would be recorded, and the skipped ones; record nothing")
@click.option("--force", is_flag=True, help="replace an existing catalog and its recordings")
@progress_option()
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def record_cmd(specs: tuple[str, ...], calls_path: Path | None, script: str | None, module: str | None,
               recordings: tuple[Path, ...], out: Path | None, name: str, gpu: str | None, method: str,
               dry_run: bool, force: bool, progress: bool, args: tuple[str, ...]) -> int:
    """Record the cuBLAS plans of calls on this GPU into a plan catalog the library loads."""
    if script and module:
        raise TcsmtError("give --script or --module, not both")
    program = ("script", script) if script else ("module", module) if module else None
    if args and program is None:
        raise TcsmtError(f"unexpected arguments {' '.join(args)!r} (arguments follow --script FILE or --module NAME)")
    if recordings and (specs or calls_path or program):
        raise TcsmtError("--recording builds a catalog from recordings: give no calls, script or module with it")
    if not (specs or calls_path or program or recordings):
        raise TcsmtError("nothing to record: give --call, --calls, --script, --module or --recording")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise TcsmtError(f"--name {name!r}: letters, digits, '.', '_' and '-' only")
    if recordings:
        return _from_recordings(recordings, out, name, gpu, force)

    wanted: dict[str, tuple[Call, int, str]] = {}
    for i, text in enumerate([*specs, *(calls_file(calls_path) if calls_path else [])]):
        call = parse_record_spec(text)
        wanted.setdefault(record_spec(call), (call, 0, "--call" if i < len(specs) else str(calls_path)))
    skipped: dict[str, dict[str, Any]] = {}
    if program is not None:
        kind, target = program
        assert target is not None
        found, skipped = _collect(kind, target, list(args))
        for call, n in found:
            spec = record_spec(call)
            prev = wanted.get(spec)
            wanted[spec] = (call, (prev[1] if prev else 0) + n, f"{kind} {target}")
    if dry_run:
        for spec, (_c, n, src) in sorted(wanted.items()):
            click.echo(f"{spec}" + (f"    # {n} x in {src}" if n else ""))
        for why, s in skipped.items():
            click.echo(f"# skipped {s['count']} x: {why} (e.g. {s['example']})")
        click.echo(f"# {len(wanted)} calls to record, {sum(s['count'] for s in skipped.values())} GEMM calls skipped")
        return 0
    if not wanted:
        raise TcsmtError("no call to record" + (f" ({sum(s['count'] for s in skipped.values())} GEMM calls "
                                                  "skipped: --dry-run lists why)" if skipped else ""))
    return _record(list(wanted.values()), skipped, out, name, gpu, method, force, Progress.for_cli(progress))


def _record(wanted: list[tuple[Call, int, str]], skipped: dict[str, dict[str, Any]], out: Path | None, name: str,
            gpu: str | None, method: str, force: bool, say: Callable[[str], None] | None = None) -> int:
    """Record the calls on this GPU, write the recordings and their catalog, report.  Interrupted during the
    recording, it writes what it finished (and its catalog), then exits as interrupted."""
    from tcsmt.arith.registry import gpu_of_device
    from tcsmt.hwcheck.record import record_calls
    from tcsmt.hwcheck.stamp import import_torch, running_stamp
    from tcsmt.library.catalog_build import build_catalog, setting_of

    groups: dict[str, list[Call]] = {}
    for call, _n, _src in wanted:
        groups.setdefault(call.settings, []).append(call)
    settings = {key: setting_for(key) for key in groups}  # refuses before any GPU work
    directory = out_dir(out)
    torch = import_torch()
    stamp = running_stamp(torch)
    gpu = (gpu or gpu_of_device(str(stamp["gpu_name"]))).lower()
    path = directory / catalog_name(gpu, stamp, name)
    rec_paths = {key: recording_path(path, key) for key in groups}
    for p in [path, *rec_paths.values()]:
        if p.exists() and not force:
            raise TcsmtError(f"{p} exists (pass --force to replace it, or --name to write another catalog beside it)")
    t0 = time.time()
    recs = []
    interrupted = False
    for key, calls in groups.items():
        rec = record_calls(torch, [recorder_call(c) for c in calls], settings[key], method=method, name=name,
                           progress=say)
        for c in calls[:rec["tasks"][0]["n"]]:
            if setting_of(rec, c.a_dtype) != c.settings:
                raise InternalError(f"recorded {record_spec(c)} under settings {setting_of(rec, c.a_dtype)!r}")
        recs.append((rec_paths[key].name, rec))
        if rec.get("interrupted"):  # keep what was recorded: write it and its catalog, then stop
            interrupted = True
            break
    secs = time.time() - t0
    directory.mkdir(parents=True, exist_ok=True)
    for (fname, rec) in recs:
        write_recording(directory / fname, rec)
    counts = build_catalog(recs, path, gpu=gpu)
    methods = sorted({str(r["method"]) for _f, r in recs})
    click.echo(f"recorded {len(wanted)} calls on {stamp['gpu_name']} ({gpu}; cuBLAS {stamp['cublas']}, torch "
               f"{stamp['torch']}, driver {stamp['driver']}) by {', '.join(methods)} in {secs:.1f} s")
    for _f, r in recs:
        for line in r.get("notes", []):
            click.echo(f"  note: {line}")
    click.echo(f"wrote {path}: {counts['runs']} runs of {counts['families']} call families, {counts['plans']} "
               f"distinct plans ({path.stat().st_size} bytes); recordings beside it")
    report(wanted, skipped, gpu, directory, stamp)
    if interrupted:
        done = sum(r["tasks"][0]["n"] for _f, r in recs)
        click.echo(f"interrupted: {done} of {len(wanted)} calls recorded and written", err=True)
        raise KeyboardInterrupt
    return 0


def report(wanted: list[tuple[Call, int, str]], skipped: dict[str, dict[str, Any]], gpu: str, directory: Path,
           stamp: dict[str, Any] | None) -> None:
    """How many calls the library answers now (under ``stamp``), and why it refuses the others."""
    others = tuple(p for p in os.environ.get(PLANS_ENV, "").split(":") if p and Path(p) != directory)
    dirs = (str(directory), *(p for p in others if Path(p).is_dir()))
    answered, why = 0, dict[str, int]()
    for call, _n, _src in wanted:
        try:
            answer(call, gpu, plans_dirs=dirs, stamp=stamp)
            answered += 1
        except TcsmtError as exc:
            reason = str(exc).split(": ", 1)[-1].split("; record it on that GPU")[0]
            why[reason] = why.get(reason, 0) + 1
    click.echo(f"the library answers {answered} of {len(wanted)} calls on {gpu}"
               + (" under this GPU's stamp" if stamp else ""))
    for reason, n in sorted(why.items(), key=lambda x: -x[1]):
        click.echo(f"  refused {n}: {reason}")
    for reason, s in skipped.items():
        click.echo(f"  not recorded {s['count']} GEMM calls: {reason}")


def _from_recordings(paths: tuple[Path, ...], out: Path | None, name: str, gpu: str | None, force: bool) -> int:
    from tcsmt.library.catalog_build import build_catalog, read_recording, recording_gpu, stamp_of

    recs = [(p.name, read_recording(p)) for p in paths]
    gpu = (gpu or recording_gpu(recs)).lower()
    stamp = stamp_of(recs[0][1], recs[0][0])
    directory = out_dir(out)
    path = directory / catalog_name(gpu, stamp, name)
    if path.exists() and not force:
        raise TcsmtError(f"{path} exists (pass --force to replace it, or --name to write another catalog beside it)")
    directory.mkdir(parents=True, exist_ok=True)
    counts = build_catalog(recs, path, gpu=gpu)
    click.echo(f"wrote {path}: {counts['calls']} recorded calls of {stamp['gpu_name']} ({gpu}) in {counts['runs']} "
               f"runs of {counts['families']} call families, {counts['plans']} distinct plans "
               f"({path.stat().st_size} bytes)")
    if counts["left_out"]:
        click.echo(f"  not in the catalog: {counts['left_out']} recorded calls of ops without a library model")
    return 0


main = script_main(record_cmd, "tcsmt record")
"""``python -m tcsmt.cli.record_cmd ARGS``: the same command where the solver packages of ``tcsmt`` are missing
(a bare GPU host with torch, numpy and click)."""

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
