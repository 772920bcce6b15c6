"""Benchmark: time to proof of ``tcsmt verify``'s solver queries (one row per query, median of --runs).

Queries, for the domain 2^-14 <= |x| <= 2^14 (fp32 inputs, C = 0):

* split lemmas (:func:`tcsmt.verify.pieces.piece_lemma`): rho and theta for Markidis (s = 0) and Ootomo-Yokota
  (s = 11), each a bisection of UNSAT/SAT queries on one free input; the time is the whole bisection;
* the lo-bound lemma |2^-s lo| <= 2^(e(x_h) - 11) (one UNSAT query);
* per model: the whole-scheme bound query "relative error > EPS" of ``tcsmt verify --bound`` at K = 2
  (EPS = 2^-9, above the Markidis worst case 2^-10 on this domain), and the Markidis tensor-core chain
  lemma's first query (free fp16 pieces, products abstracted; threshold 2^-21);
* per model, the first query of the one-instruction lemma :func:`tcsmt.verify.lemmas.instr_lemma` (the
  building block of a composed chain bound) at K = 2 products: normal pieces with C = +0 ("error > 2^-22
  sum|x y|"), the same with every exponent field pinned to 14..16, and any pieces with an accumulator C
  on the 2^-48 grid ("error > 2^-20 (sum 2^(e(x)+e(y)) + |C|)"), and the same compared on the grid
  2^(E - 40) relative to the largest exponent (``relative=40``), split by which addend is largest.

Every query stops at --timeout; a row then says "timeout".  Timings on a loaded machine are not
benchmark numbers: note the machine and its load with every table.

    python benchmarks/bench_verify_proofs.py [--archs volta,hopper] [--runs 1] [--timeout 60] [--rows instr]
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from types import SimpleNamespace

import click

from tcsmt import verify as V
from tcsmt.arith.registry import resolve
from tcsmt.io.options import POSITIVE_FLOAT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.verify import lemmas as VL
from tcsmt.verify import schemes as VS
from tcsmt.verify.pieces import piece_lemma, split_scheme


def markidis_chain_spec(p, K: int) -> VL.ChainSpec:
    names = [f"{x}{k}" for x in ("ah", "al", "bh", "bl") for k in range(K)]

    def build(B, v):
        pick = [[v[f"{x}{k}"] for k in range(K)] for x in ("ah", "al", "bh", "bl")]
        pairs = [(f"ah{k}", f"bh{k}") for k in range(K)] + [(f"ah{k}", f"bl{k}") for k in range(K)]
        pairs += [(f"al{k}", f"bh{k}") for k in range(K)]
        return VS.markidis_chain(B, p, *pick), pairs

    heads = [f"ah{k}" for k in range(K)] + [f"bh{k}" for k in range(K)]
    bounded = [(f"al{k}", f"ah{k}", 0) for k in range(K)] + [(f"bl{k}", f"bh{k}", 0) for k in range(K)]
    return VL.ChainSpec("markidis chain", names, build, bounded, heads, (0x0400, 0x7800),
                        [(f"ah{k}", f"bh{k}") for k in range(K)])


def timed(fn: Callable[[], str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    status = fn()
    return status, time.perf_counter() - t0


def _main(args: SimpleNamespace) -> None:
    dom = V.parse_range("2^-14..2^14")
    T = args.timeout
    queries: list[tuple[str, Callable[[], str]]] = []
    for s in (0, 11):
        for which in ("r", "t"):
            def lemma(s=s, which=which) -> str:
                lem = piece_lemma(split_scheme(s), True, dom, 0 if which == "r" else 1, T)
                return f"<= {float(lem.bound):.4g} ({len(lem.steps)} queries)" if lem.bound is not None else lem.stopped
            queries.append((f"split lemma {'rho' if which == 'r' else 'theta'}, s = {s}", lemma))
        queries.append((f"lo-bound lemma, s = {s}", lambda s=s: VL.lo_lemma(dom, s, T).stopped))
    for arch in args.archs.split(","):
        p = resolve(arch, "fp16", "fp32")
        for algo in ("markidis", "ootomo"):
            queries.append((f"{algo} {arch} K={args.k}: error > 2^-9",
                            lambda algo=algo, arch=arch: V.prove_bound(algo, arch, args.k, dom, Fraction(1, 512),
                                                                      True, "auto", T).status))

        def chain(p=p) -> str:
            spec = markidis_chain_spec(p, args.k)
            lem = VL.tighten  # one query at 2^-21: the lemma's first step
            first: list[str] = []

            def once(name, stmt, ask, value, start, timeout, **kw):
                first.append(ask(Fraction(1, 1 << 21), timeout).status)
                return VL.Lemma(name, stmt, None, Fraction(0), {})

            VL.tighten = once
            try:
                VL.chain_lemma(p, spec, T)
            finally:
                VL.tighten = lem
            return first[0]
        queries.append((f"markidis chain lemma {arch} K={args.k}: Gamma > 2^-21", chain))
        instr = [("normal pieces, C = +0: error > 2^-22 sum|x y|",
                  {"measure": "products", "heads": True, "c_set": "zero"}, 22),
                 ("normal pieces, exponent fields 14..16, C = +0: error > 2^-22 sum|x y|",
                  {"measure": "products", "heads": True, "c_set": "zero", "exp_fields": (14, 16)}, 22),
                 ("any pieces, C on the 2^-48 grid: error > 2^-20 (sum 2^(e(x)+e(y)) + |C|)",
                  {"measure": "tops", "c_set": "grid"}, 20),
                 ("normal pieces, C = +0, grid 2^(E-40): error > 2^-20 sum|x y|",
                  {"measure": "products", "heads": True, "c_set": "zero", "relative": 40}, 20),
                 ("any pieces, C on the grid, grid 2^(E-40), case C largest: error > 2^-16 (sum 2^(e(x)+e(y)) + |C|)",
                  {"measure": "tops", "c_set": "grid", "relative": 40, "top": "c"}, 16),
                 ("any pieces, C on the grid, grid 2^(E-40), case product 0 largest: error > 2^-16 (...)",
                  {"measure": "tops", "c_set": "grid", "relative": 40, "top": "0"}, 16)]
        for title, kw, e in instr:
            def first(p=p, kw=kw, e=e) -> str:
                return VL.instr_lemma(p, args.k, T, start=Fraction(1, 1 << e), max_steps=1, **kw).steps[0].status
            queries.append((f"instr lemma {arch} n={args.k}, {title}", first))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at start; "
          f"timeout {T:g} s per query")
    print("| query | result | median (s) | runs (s) |")
    print("|---|---|---|---|")
    for name, fn in queries:
        if args.rows not in name:
            continue
        res = [timed(fn) for _ in range(args.runs)]
        times = [t for _, t in res]
        print(f"| {name} | {res[-1][0]} | {statistics.median(times):.1f} | {', '.join(f'{t:.1f}' for t in times)} |",
              flush=True)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--archs", default=",".join(a for a, _ in V.fp16_paths()), show_default=True)
@click.option("--runs", type=POSITIVE_INT, default=1, show_default=True)
@click.option("--timeout", type=POSITIVE_FLOAT, default=60.0, show_default=True)
@click.option("--k", type=POSITIVE_INT, default=2, show_default=True)
@click.option("--rows", default="", help="run only the rows whose name contains this text")
def bench_cmd(**options) -> None:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_verify_proofs.py")

if __name__ == "__main__":
    sys.exit(main())
