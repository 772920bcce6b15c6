"""Solver benchmarks for the discrimination queries of the SMT issue.

Each query is run ``--repeats`` times per solver (each solve in a fresh child
process, formula construction included); the median wall time is reported, or
``> T s`` when the solver gave no answer within ``--timeout``.

    python benchmarks/bench_smt.py [--repeats 3] [--timeout 120] [--solvers z3,cvc5,bitwuzla]
"""
from __future__ import annotations

import itertools
import platform
import statistics
import sys
import time
from types import SimpleNamespace

import click

from tcsmt.io.options import POSITIVE_FLOAT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.solve.discriminate import discriminate
from tcsmt.solve.solvers import available

NVIDIA_FP16 = ["volta", "turing", "ampere", "ada", "hopper", "blackwell"]

QUERIES = [
    ("volta vs ampere (fp16->fp32, K = 1, 2, 4, 8)", [("volta", "ampere", None)], "under 2 s"),
    ("Volta carry bits 2 vs 3 (5 terms, K = 4)", [("volta:carry_bits=2", "volta:carry_bits=3", 4)], "under 10 s (anchor 679 s)"),
    ("9-term carry bits 3 vs 4 (8 products + C)",
     [("volta:block_k=8,instr_k=8,carry_bits=3", "volta:block_k=8,instr_k=8,carry_bits=4", 8)], "under 30 s (anchor > 420 s)"),
    ("all 15 pairs of NVIDIA fp16->fp32 models", [(x, y, None) for x, y in itertools.combinations(NVIDIA_FP16, 2)],
     "under 60 s in total"),
]


def run_query(pairs, solver: str, timeout: float) -> tuple[float, str]:
    t0 = time.perf_counter()
    statuses = []
    for m1, m2, k in pairs:
        left = timeout - (time.perf_counter() - t0)
        if left <= 0:
            return float("inf"), "timeout"
        o = discriminate([m1, m2], "fp16", "fp32", None, k, 1, False, None, solver, left)
        statuses.append(o.status)
        if o.status == "timeout":
            return float("inf"), "timeout"
    found = sum(s == "found" for s in statuses)
    return time.perf_counter() - t0, f"{found} found, {len(statuses) - found} unsat"


def _main(args: SimpleNamespace) -> None:
    solvers = [s for s in args.solvers.split(",") if available(s)]
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}")
    print(f"median of {args.repeats} runs, time limit {args.timeout:.0f} s per run\n")
    print("| query | target | " + " | ".join(solvers) + " | answer |")
    print("|---|---|" + "---|" * len(solvers) + "---|")
    for title, pairs, target in QUERIES:
        cells, answer = [], ""
        for s in solvers:
            times = []
            for _ in range(args.repeats):
                t, ans = run_query(pairs, s, args.timeout)
                times.append(t)
                if ans != "timeout":
                    answer = ans
                if t == float("inf"):
                    break
            med = statistics.median(times) if all(t != float("inf") for t in times) else float("inf")
            cells.append(f"> {args.timeout:.0f} s" if med == float("inf") else f"{med:.2f} s")
        print(f"| {title} | {target} | " + " | ".join(cells) + f" | {answer} |", flush=True)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--repeats", type=POSITIVE_INT, default=3, show_default=True)
@click.option("--timeout", type=POSITIVE_FLOAT, default=120.0, show_default=True)
@click.option("--solvers", default="z3,cvc5,bitwuzla", show_default=True)
def bench_cmd(**options) -> None:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_smt.py")

if __name__ == "__main__":
    sys.exit(main())
