"""Dot products per second of the vectorised simulator and of the scalar pure-Python model.

Usage (one core, as the project measures it):

    taskset -c 0 python benchmarks/bench_simulator.py [--n 200000] [--repeats 7]

For each model (fp16 inputs, fp32 output, K = 16) it times ``simulate_params``
on n random rows and the scalar model (benchmarks/scalar_model.py) on a smaller
sample, prints the median of the repeats (wall clock and CPU time of this
process) and the ratio, and writes a markdown table to stdout.  It also checks
that both give the same bits on the scalar sample.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click
import numpy as np

from tcsmt.io.options import NON_NEGATIVE_INT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scalar_model

from tcsmt import resolve
from tcsmt.sim.simulator import simulate_params


def random_fp16(rng, shape) -> np.ndarray:
    """Finite fp16 patterns with exponents spread over +-8 binades around 1 (cancellation and carries happen)."""
    s = rng.integers(0, 2, shape, dtype=np.uint16)
    e = rng.integers(7, 23, shape, dtype=np.uint16)
    f = rng.integers(0, 1024, shape, dtype=np.uint16)
    return (s << 15) | (e << 10) | f


def random_fp32(rng, n) -> np.ndarray:
    return rng.standard_normal(n).astype(np.float32).view(np.uint32)


def timed(fn, repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def _main(args: SimpleNamespace) -> int:
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    rng = np.random.default_rng(2024)
    a = random_fp16(rng, (args.n, args.K))
    b = random_fp16(rng, (args.n, args.K))
    c = random_fp32(rng, args.n)
    m = min(args.n_scalar, args.n)

    rows = []
    for arch in args.models.split(","):
        p = resolve(arch, "fp16", "fp32")
        simulate_params(p, a[:1000], b[:1000], c[:1000])  # warm up (tables, imports)
        w_vec, c_vec = timed(lambda: simulate_params(p, a, b, c), args.repeats)
        w_sc, c_sc = timed(lambda: scalar_model.dot_rows(p, a[:m], b[:m], c[:m]), max(1, args.repeats // 2))
        same = np.array_equal(simulate_params(p, a[:m], b[:m], c[:m]),
                              np.array(scalar_model.dot_rows(p, a[:m], b[:m], c[:m]), dtype=np.uint32))
        rows.append((p.name, args.n / w_vec, args.n / c_vec, m / w_sc, m / c_sc, same))
        print(f"{p.name}: vectorised {args.n / w_vec / 1e6:.3f} M/s (cpu {args.n / c_vec / 1e6:.3f}), "
              f"scalar {m / w_sc / 1e3:.1f} k/s, ratio {w_sc / m * args.n / w_vec:.0f}x, same bits: {same}",
              file=sys.stderr)

    print(f"\nfp16 -> fp32, K = {args.K}; median of {args.repeats} repeats; CPUs {cpus}; "
          f"n = {args.n} (vectorised), {m} (scalar)\n")
    print("| model path | vectorised (dot/s, wall) | vectorised (dot/s, CPU) | scalar (dot/s, wall) | ratio | bits agree |")
    print("|---|---:|---:|---:|---:|---|")
    for name, vw, vc, sw, sc, same in rows:
        print(f"| {name} | {vw:,.0f} | {vc:,.0f} | {sw:,.0f} | {vw / sw:,.0f}x | {'yes' if same else 'NO'} |")
    return 0 if all(r[-1] for r in rows) else 1


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--n", type=POSITIVE_INT, default=200_000, show_default=True, help="rows for the vectorised simulator")
@click.option("--n-scalar", type=POSITIVE_INT, default=3000, show_default=True, help="rows for the scalar model")
@click.option("--repeats", type=POSITIVE_INT, default=7, show_default=True)
@click.option("--K", "K", type=POSITIVE_INT, default=16, show_default=True)
@click.option("--models", default="hopper,ampere,volta", show_default=True)
@click.option("--cpu", type=NON_NEGATIVE_INT, default=None, help="pin this process to one CPU (as taskset -c CPU)")
def bench_cmd(**options) -> int:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_simulator.py")

if __name__ == "__main__":
    sys.exit(main())
