"""Benchmark: ``tcsmt verify --compare A B --arch X`` with its defaults (K = 2, the three ranges, both directions,
10 s per solver query), end to end in a fresh process: wall time per run (median of --runs), exit status, and
every cell's answer (found, proven impossible, timeout), which must be the same on every run.

    python benchmarks/bench_verify_compare.py [--pairs ootomo:markidis] [--archs volta,hopper] [--runs 3] [--out FILE]
    python benchmarks/bench_verify_compare.py --pairs all --runs 1      # every pair of schemes on every architecture
    python benchmarks/bench_verify_compare.py --compare-all [--archs ...] [--runs 1]

A pair runs on every architecture that has both schemes' paths.  ``--compare-all`` times instead one fresh
``tcsmt verify --compare all --arch X`` per architecture (every pair of its schemes in one process): wall time,
exit status, the cells found / proven impossible / unanswered and the slowest cell.  The machine (CPU count, load
average before and after) is written with the table.  Target: every cell answered, under 60 s per architecture.
"""
from __future__ import annotations

import itertools
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
from tcsmt.verify.schemes import ALGOS, input_format, scheme_key

CELL = re.compile(r"(found|proven impossible|timeout) \((\d+\.\d+) s\)")


def one_run(a1: str, a2: str, arch: str) -> tuple[float, int, list[str]]:
    """(seconds, exit status, cell answers in table order) of one fresh ``tcsmt verify --compare a1 a2 --arch``."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tcsmt", "verify", "--compare", a1, a2, "--arch", arch],
                         capture_output=True, text=True, check=False)
    secs = time.perf_counter() - t0
    cells = [m.group(1) for line in res.stdout.splitlines() if line.startswith(f"  {arch} ")
             for m in CELL.finditer(line)]
    if len(cells) != 6:
        raise TcsmtError(f"tcsmt verify --compare {a1} {a2} --arch {arch} printed {len(cells)} cells, not 6 "
                         f"(exit {res.returncode}): {res.stderr.strip()}")
    return secs, res.returncode, cells


def all_run(arch: str) -> tuple[float, int, dict[str, int], float, str]:
    """(seconds, exit status, cells by answer, slowest cell's seconds, the summary line) of one fresh
    ``tcsmt verify --compare all --arch arch``."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tcsmt", "verify", "--compare", "all", "--arch", arch],
                         capture_output=True, text=True, check=False)
    secs = time.perf_counter() - t0
    cells = [m for line in res.stdout.splitlines() if line.startswith("  ") for m in CELL.finditer(line)]
    summary = [line for line in res.stdout.splitlines() if line.startswith("compare all: ") and " cells on " in line]
    if not cells or len(summary) != 1:
        raise TcsmtError(f"tcsmt verify --compare all --arch {arch} printed {len(cells)} cells and no summary "
                         f"(exit {res.returncode}): {res.stderr.strip()}")
    counts = {w: sum(m.group(1) == w for m in cells) for w in ("found", "proven impossible", "timeout")}
    return secs, res.returncode, counts, max(float(m.group(2)) for m in cells), summary[0]


def _bench_all(archs: list[str], runs: int) -> list[str]:
    """The table of ``--compare-all``: one row per architecture."""
    lines = ["| arch | pairs | cells | found | proven impossible | unanswered | slowest cell (s) | runs (s) | median | exit "
             "| same on every run |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arch in archs:
        results = [all_run(arch) for _ in range(runs)]
        secs = [r[0] for r in results]
        c = results[0][2]
        same = all(r[2] == c for r in results)  # (6 cells a pair: 3 ranges, 2 directions)
        lines.append(f"| {arch} | {sum(c.values()) // 6} | {sum(c.values())} | {c['found']} | {c['proven impossible']} | {c['timeout']} | "
                     f"{max(r[3] for r in results):.1f} | {', '.join(f'{s:.1f}' for s in secs)} | "
                     f"{statistics.median(secs):.1f} | {', '.join(str(r[1]) for r in results)} | "
                     f"{'yes' if same else 'NO'} |")
        click.echo(lines[-1], err=True)
    return lines


def _archs(a1: str, a2: str) -> list[str]:
    fmts = {input_format(a) for a in (a1, a2) if a != "fp32"} or {"fp16"}
    return [a for a, _ in fp16_paths("fp16") if all(a in dict(fp16_paths(f)) for f in fmts)]


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--pairs", default="ootomo:markidis", show_default=True, help="A:B,... or 'all' (every pair of schemes)")
@click.option("--archs", default=None, help="comma-separated (default: every architecture with both paths)")
@click.option("--runs", type=POSITIVE_INT, default=3, show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None, help="write the table here (new file)")
@click.option("--force", is_flag=True, help="replace an existing --out file (a regular file only)")
@click.option("--compare-all", "compare_all", is_flag=True,
              help="time one 'tcsmt verify --compare all --arch X' per architecture instead of one command per pair")
def bench_cmd(pairs: str, archs: str | None, runs: int, out: str | None, force: bool, compare_all: bool) -> None:
    if pairs == "all":
        todo = list(itertools.combinations(ALGOS, 2))
    else:
        todo = []
        for p in pairs.split(","):
            if p.count(":") != 1:
                raise TcsmtError(f"--pairs: write A:B (got {p!r})")
            a, b = p.split(":")
            todo.append((scheme_key(a), scheme_key(b)))  # an unknown scheme: one line, before any run
    wanted = [a.strip() for a in archs.split(",")] if archs else None
    claimed = output(out, force=force) if out else None  # an existing file is refused before the work, not after it
    lines = [f"# bench_verify_compare: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
             f"load average {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    if compare_all:
        if click.get_current_context().get_parameter_source("pairs") != click.core.ParameterSource.DEFAULT:
            raise TcsmtError("--pairs does not apply to --compare-all (it runs every pair of each architecture)")
        every = [a for a, _ in fp16_paths("fp16")]
        for a in wanted or []:
            if a not in every:
                raise TcsmtError(f"--archs: {a!r} is not an architecture with an fp16 path ({', '.join(every)})")
        lines += ["# one fresh `tcsmt verify --compare all --arch X` per architecture"]
        lines += _bench_all([a for a in every if wanted is None or a in wanted], runs)
        lines.append(f"# load average {os.getloadavg()[0]:.2f} at the end, "
                     f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        text = "\n".join(lines) + "\n"
        click.echo(text, nl=False)
        if claimed is not None:
            claimed.write_text(text)
            claimed.release()
        return
    lines += ["| pair | arch | runs (s) | median | exit | 2^-36..2^-14 A>B, B>A | 2^-14..2^14 A>B, B>A | 1..2 A>B, B>A "
              "| same on every run |", "|---|---|---|---|---|---|---|---|---|"]
    short = {"found": "found", "proven impossible": "impossible", "timeout": "TIMEOUT"}
    for a1, a2 in todo:
        for arch in _archs(a1, a2):
            if wanted is not None and arch not in wanted:
                continue
            results = [one_run(a1, a2, arch) for _ in range(runs)]
            secs = [r[0] for r in results]
            cells = results[0][2]
            same = all(r[2] == cells for r in results)
            ranges = [f"{short[cells[i]]}, {short[cells[i + 1]]}" for i in (0, 2, 4)]
            lines.append(f"| {a1}:{a2} | {arch} | {', '.join(f'{s:.1f}' for s in secs)} | {statistics.median(secs):.1f} "
                         f"| {', '.join(str(r[1]) for r in results)} | " + " | ".join(ranges)
                         + f" | {'yes' if same else 'NO'} |")
            click.echo(lines[-1], err=True)
    lines.append(f"# load average {os.getloadavg()[0]:.2f} at the end")
    text = "\n".join(lines) + "\n"
    click.echo(text, nl=False)
    if claimed is not None:
        claimed.write_text(text)
        claimed.release()


main = script_main(bench_cmd, "python benchmarks/bench_verify_compare.py")

if __name__ == "__main__":
    sys.exit(main())
