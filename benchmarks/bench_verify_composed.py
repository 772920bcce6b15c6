"""Benchmark: ``tcsmt verify --algo A`` with no other argument (every architecture, K = 2, the default
domain), end to end in a fresh process (cold lemma caches): wall time per run (median of --runs), and per
architecture the worst input found, the proven bound, their ratio and the status, which must be the same
on every run (the README's target).

    python benchmarks/bench_verify_composed.py [--algos markidis,ootomo] [--runs 3] [--out FILE]
    python benchmarks/bench_verify_composed.py --instr-k [--algos markidis,ootomo]   # K = instr_k per model
    python benchmarks/bench_verify_composed.py --abs [--range 0..2^14]                # the absolute error

The machine (CPU count, load average before and after) is written with the table.
"""
from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.files import output
from tcsmt.io.options import POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.verify.evaluate import fp16_paths
from tcsmt.verify.schemes import input_format, scheme_key

ROW = re.compile(r"^(\w+)\s+(\d+)\s+(\S+) \((2\^\S+)\)\s+(?:<= (\S+) \((2\^\S+)\)|-)\s+(\d+)\s+\S+s\s+(.*)$")


def one_run(algo: str, extra: tuple[str, ...] = ()) -> tuple[float, int, list[tuple[str, ...]]]:
    """(seconds, exit status, rows (arch, found, bound, status)) of one fresh ``tcsmt verify --algo algo``."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tcsmt", "verify", "--algo", algo, *extra], capture_output=True,
                         text=True, check=False)
    secs = time.perf_counter() - t0
    rows = []
    for line in res.stdout.splitlines():
        m = ROW.match(line)
        if m:
            rows.append((m.group(1), m.group(3), m.group(4), m.group(5) or "-", m.group(6) or "-", m.group(8)))
    if not rows:
        raise TcsmtError(f"tcsmt verify --algo {algo} printed no table (exit {res.returncode}): {res.stderr.strip()}")
    return secs, res.returncode, rows


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--algos", default="markidis,markidis-full,ootomo", show_default=True)
@click.option("--runs", type=POSITIVE_INT, default=3, show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, help="write the table here (new file)")
@click.option("--force", is_flag=True, help="replace an existing --out file (a regular file only)")
@click.option("--instr-k", is_flag=True, help="instead: each architecture alone at K = its instruction's k (one run)")
@click.option("--abs", "absolute", is_flag=True, help="the absolute error (tcsmt verify --abs)")
@click.option("--range", "range_text", default=None, help="passed to tcsmt verify --range (e.g. 0..2^14)")
def bench_cmd(algos: str, runs: int, out: str | None, force: bool, instr_k: bool, absolute: bool,
              range_text: str | None) -> None:
    names = [scheme_key(a) for a in algos.split(",") if a.strip()]  # an unknown scheme: one line, before any run
    if not names:
        raise TcsmtError("--algos names no scheme")
    claimed = output(out, force=force) if out else None  # an existing file is refused before the work, not after it
    extra = (("--abs",) if absolute else ()) + (("--range", range_text) if range_text else ())
    lines = [f"# bench_verify_composed{' ' + ' '.join(extra) if extra else ''}: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
             f"load average {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "| algo | runs (s) | median | exit | architectures with a composed proof | bound / found (max) | same on every run |",
             "|---|---|---|---|---|---|---|"]
    detail: list[str] = []
    if instr_k:
        lines[1:] = ["| algo | arch | K | seconds | exit | found | bound | status |", "|---|---|---|---|---|---|---|---|"]
        for algo in names:
            for arch, p in fp16_paths(input_format(algo)):
                secs, rc, rows = one_run(algo, ("--arch", arch, "--k", str(p.instr_k), *extra))
                _, _, f2, _, b2, status = rows[0]
                lines.append(f"| {algo} | {arch} | {p.instr_k} | {secs:.1f} | {rc} | {f2} | {b2} | {status} |")
        lines.append(f"# load average {os.getloadavg()[0]:.2f} at the end")
        text = "\n".join(lines) + "\n"
        _emit(text, claimed)
        return
    for algo in names:
        results = [one_run(algo, extra) for _ in range(runs)]
        tables = [r[2] for r in results]
        same = all(t == tables[0] for t in tables)
        rows = tables[0]
        within = [r for r in rows if "composed proof" in r[5] and r[3] != "-"]
        ratio = max((float(r[3]) / float(r[1]) for r in within), default=float("nan"))
        secs = [r[0] for r in results]
        lines.append(f"| {algo} | {', '.join(f'{s:.1f}' for s in secs)} | {statistics.median(secs):.1f} | "
                     f"{', '.join(str(r[1]) for r in results)} | {len(within)} of {len(rows)} | {ratio:.3f} | "
                     f"{'yes' if same else 'NO'} |")
        for arch, found, found2, bound, bound2, status in rows:
            detail.append(f"{algo:14} {arch:14} found {found} ({found2})  bound {bound} ({bound2})  {status}")
    lines.append(f"# load average {os.getloadavg()[0]:.2f} at the end")
    text = "\n".join([*lines, "", *detail]) + "\n"
    _emit(text, claimed)


def _emit(text: str, claimed) -> None:
    click.echo(text, nl=False)
    if claimed is not None:
        claimed.write_text(text)
        claimed.release()


main = script_main(bench_cmd, "python benchmarks/bench_verify_composed.py")

if __name__ == "__main__":
    sys.exit(main())
