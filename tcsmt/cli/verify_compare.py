"""``tcsmt verify --compare``: the tables, witnesses and exit status of the two comparison forms.

* ``--compare A B``: one table per range, a row per architecture, a column per direction (:func:`run_compare`);
* ``--compare all``: every pair of schemes that run on an architecture, both directions, in one process: one table
  per architecture and range, a row per pair (:func:`run_compare_all`), then a one-line summary.

Both print every found input with its replayed errors, list the proofs' queries with ``-v``, and end with a
TcsmtError (exit 2) when a cell is left unanswered.  Called from :mod:`tcsmt.cli.verify_cmd`, whose number
formatting they share.
"""
from __future__ import annotations

import time

import click

from tcsmt import verify as V
from tcsmt.arith.values import format_value
from tcsmt.cli.verify_lines import _num, _witness_lines
from tcsmt.errors import TcsmtError
from tcsmt.io.progress import NO_PROGRESS, Progress
from tcsmt.verify.compare_all import compare_pairs, schemes_on
from tcsmt.verify.row_cache import RowCache

WORD = {"found": "found", "impossible": "proven impossible", "timeout": "timeout"}


def _where(r: V.CompareResult) -> str:
    return f"{r.arch}, {format_value(r.dom.lo)}..{format_value(r.dom.hi)}"


def _head(K: int, timeout: float, what: str = "compare") -> None:
    click.echo(f"{what}: inputs where one scheme's absolute error |D - A.B| exceeds the other's "
               f"(exact A.B, K = {K}, C = 0, {timeout:g} s per query)")


def _tail(results: list[V.CompareResult], timeout: float, verbose: bool, summary: str | None = None) -> None:
    """The found inputs, the proofs' queries (-v), the summary line, and exit 2 for unanswered cells."""
    found = [r for r in results if r.status == "found"]
    if found:
        click.echo("\ninputs found (replayed in the simulator; fp32 = sequential fp32 FMAs, for reference):")
    for r in found:
        assert r.witness is not None  # compare sets status "found" together with the replayed witness
        click.echo(f"\n{r.arch}, {format_value(r.dom.lo)} <= |x| <= {format_value(r.dom.hi)}: "
                   f"{r.algo1} error {_num(r.witness.errors[r.algo1])} > {r.algo2} error "
                   f"{_num(r.witness.errors[r.algo2])}")
        for line in _witness_lines(r.witness, list(dict.fromkeys([r.algo1, r.algo2, "fp32"]))):  # fp32 once
            click.echo(line)
    proofs = [r for r in results if r.lemmas] if verbose else []
    if proofs:
        click.echo("\nsolver queries of the proofs (answer, time, statement):")
    for r in proofs:
        click.echo(f"\n{r.arch}, {format_value(r.dom.lo)} <= |x| <= {format_value(r.dom.hi)}: {r.algo1} worse than "
                   f"{r.algo2}: {r.status}")
        for lem in r.lemmas:
            click.echo(f"  {lem.text()}")
    if summary is not None:
        click.echo("\n" + summary)
    open_ = [r for r in results if r.status == "timeout"]
    if open_:
        raise TcsmtError(f"solver timeout: {len(open_)} of {len(results)} comparisons unanswered within "
                         f"--timeout {timeout:g} s: " + "; ".join(
                             f"{r.arch} {format_value(r.dom.lo)}..{format_value(r.dom.hi)} {r.algo1} worse than "
                             f"{r.algo2}" for r in open_))


def run_compare(a1: str, a2: str, archs: list[str], K: int, ranges: list[V.Domain], solver: str,
                timeout: float, progress: Progress = NO_PROGRESS, verbose: bool = False) -> None:
    """``--compare A B``: A worse than B and B worse than A, on every architecture and range."""
    _head(K, timeout)
    pairs = [(a1, a2), (a2, a1)]
    results: list[V.CompareResult] = []
    w1 = max(len(a) for a in [*archs, "arch"])
    cols = [f"{x} worse than {y}" for x, y in pairs]
    for dom in ranges:
        click.echo(f"\ninputs {format_value(dom.lo)} <= |x| <= {format_value(dom.hi)}")
        click.echo(f"  {'arch':{w1}}  " + "  ".join(f"{c:>34}" for c in cols))
        for arch in archs:
            cells = []
            cache = RowCache()  # the two directions share their rows (the same answers)
            for x, y in pairs:
                r = V.compare(x, y, arch, K, dom, solver, timeout, cache=cache)
                results.append(r)
                progress(f"{_where(r)}: {x} worse than {y}: {WORD[r.status]} ({r.seconds:.1f} s)")
                cells.append(f"{WORD[r.status]} ({r.seconds:.1f} s)")
            click.echo(f"  {arch:{w1}}  " + "  ".join(f"{c:>34}" for c in cells))
    _tail(results, timeout, verbose)


def summary_line(results: list[V.CompareResult], archs: list[str], seconds: float) -> str:
    """``compare all: N cells (P pairs ...) on ARCH: F found (replayed), I proven impossible, U unanswered; T s``."""
    n = {s: sum(r.status == s for r in results) for s in WORD}
    where = archs[0] if len(archs) == 1 else f"{len(archs)} architectures"
    return (f"compare all: {len(results)} cells on {where}: {n['found']} found (replayed), {n['impossible']} proven "
            f"impossible, {n['timeout']} unanswered; {seconds:.1f} s")


def run_compare_all(archs: list[str], K: int, ranges: list[V.Domain], solver: str, timeout: float,
                    progress: Progress = NO_PROGRESS, verbose: bool = False) -> None:
    """``--compare all``: every pair of schemes of each architecture (:func:`tcsmt.verify.compare_all.schemes_on`),
    both directions, on every range; a table per architecture and range, a row per pair."""
    t0 = time.perf_counter()
    plan = {arch: schemes_on(arch) for arch in archs}  # every spec checked before any work
    _head(K, timeout, "compare all")
    results: list[V.CompareResult] = []

    def done(r: V.CompareResult) -> None:
        progress(f"{_where(r)}: {r.algo1} worse than {r.algo2}: {WORD[r.status]} ({r.seconds:.1f} s)")

    for arch, schemes in plan.items():
        pairs = [(x, y) for i, x in enumerate(schemes) for y in schemes[i + 1:]]
        click.echo(f"\n{arch}: {len(pairs)} pairs of its {len(schemes)} schemes ({', '.join(schemes)}), both "
                   "directions")
        w1 = max(len(f"{x}, {y}") for x, y in [*pairs, ("A", "B")])
        for dom in ranges:
            click.echo(f"\n{arch}, inputs {format_value(dom.lo)} <= |x| <= {format_value(dom.hi)}")
            click.echo(f"  {'A, B':{w1}}  {'A worse than B':>34}  {'B worse than A':>34}")
            rs = compare_pairs(pairs, arch, K, dom, solver, timeout, done)
            results += rs
            for i, (x, y) in enumerate(pairs):
                cells = [f"{WORD[r.status]} ({r.seconds:.1f} s)" for r in rs[2 * i:2 * i + 2]]
                click.echo(f"  {f'{x}, {y}':{w1}}  " + "  ".join(f"{c:>34}" for c in cells))
    _tail(results, timeout, verbose, summary_line(results, list(plan), time.perf_counter() - t0))
