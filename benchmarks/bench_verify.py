"""Benchmark: the seed-003 compare query (Ootomo-Yokota less accurate than Markidis) on Volta.

Query: free fp32 a_0..a_3, b_0..b_3 with 2^-36 <= |x| <= 2^-14 (the range of
the public SMT encoding), both schemes on the Volta fp16 -> fp32 model (one
m8n8k4 instruction per partial product), and |D_ootomo - A.B| > |D_markidis -
A.B| against the exact A.B.  Prints a markdown row with the median of 3 runs
(each run builds the encoding and solves it; every answer is replayed in the
simulator).  The public encoding timed out after 900 s on this question.

    python benchmarks/bench_verify.py [--k 4] [--runs 3] [--timeout 600] [--solver auto]
"""
from __future__ import annotations

import platform
import statistics
import sys
import time
from types import SimpleNamespace

import click

from tcsmt import verify as V
from tcsmt.io.options import POSITIVE_FLOAT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


def _main(args: SimpleNamespace) -> None:
    dom = V.parse_range(args.range_text)
    times, statuses = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        r = V.compare("ootomo", "markidis", "volta", args.k, dom, args.solver, args.timeout)
        times.append(time.perf_counter() - t0)
        statuses.append(r.status)
    med = statistics.median(times)
    print("| query | K | range | solver | result | median (s) | runs (s) | machine |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| ootomo worse than markidis, volta | {args.k} | {args.range_text} | {args.solver} | "
          f"{'/'.join(sorted(set(statuses)))} | {med:.1f} | {', '.join(f'{t:.1f}' for t in times)} | "
          f"{platform.machine()}, {__import__('os').cpu_count()} cpus |")


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--k", type=POSITIVE_INT, default=4, show_default=True)
@click.option("--runs", type=POSITIVE_INT, default=3, show_default=True)
@click.option("--timeout", type=POSITIVE_FLOAT, default=600.0, show_default=True)
@click.option("--solver", default="auto", show_default=True)
@click.option("--range", "range_text", default="2^-36..2^-14", show_default=True)
def bench_cmd(**options) -> None:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_verify.py")

if __name__ == "__main__":
    sys.exit(main())
