"""Dot products per second of the vectorised simulator and of the scalar pure-Python model.

Usage (one core, as the project measures it):

    taskset -c 0 python benchmarks/bench_simulator.py [--n 200000] [--repeats 7] [--cpu 0]

For each model and input format (fp16 and bf16 inputs, fp32 output, K = 16) it times the numpy semantics
(``tcsmt.sim.simulator.simulate_params``) and the public ``tcsmt.simulate_params`` (the compiled CPU kernel
where it implements the path, ``tcsmt.kernels.simulate``; else the same numpy semantics) on n random rows,
side by side, and the scalar model (benchmarks/scalar_model.py) on a smaller sample; it prints the median
of the repeats (wall clock and CPU time of this process) and the ratios, and writes a markdown table to
stdout.  It checks that all three give the same bits (the compiled kernel on every row).  With ``--cpu``
the compiled kernel runs on one numba thread.
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

import tcsmt
from tcsmt import resolve
from tcsmt.errors import TcsmtError
from tcsmt.sim.simulator import simulate_params


def random_fp16(rng, shape) -> np.ndarray:
    """Finite fp16 patterns with exponents spread over +-8 binades around 1 (cancellation and carries happen)."""
    s = rng.integers(0, 2, shape, dtype=np.uint16)
    e = rng.integers(7, 23, shape, dtype=np.uint16)
    f = rng.integers(0, 1024, shape, dtype=np.uint16)
    return (s << 15) | (e << 10) | f


def random_bf16(rng, shape) -> np.ndarray:
    """Finite bf16 patterns with exponents spread over +-8 binades around 1, as :func:`random_fp16`."""
    s = rng.integers(0, 2, shape, dtype=np.uint16)
    e = rng.integers(119, 135, shape, dtype=np.uint16)
    f = rng.integers(0, 128, shape, dtype=np.uint16)
    return (s << 15) | (e << 7) | f


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
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # read when numba is first imported (lazily)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    rng = np.random.default_rng(2024)
    c = random_fp32(rng, args.n)
    m = min(args.n_scalar, args.n)

    rows = []
    for fmt in args.formats.split(","):
        draw = {"fp16": random_fp16, "bf16": random_bf16}[fmt]
        a = draw(rng, (args.n, args.K))
        b = draw(rng, (args.n, args.K))
        for arch in args.models.split(","):
            try:
                p = resolve(arch, fmt, "fp32")
            except TcsmtError:
                continue  # no such path (volta has no bf16)
            simulate_params(p, a[:1000], b[:1000], c[:1000])  # warm up (tables, imports)
            tcsmt.simulate_params(p, a, b, c)  # warm up: the compiled kernel's compile or cache load
            w_vec, c_vec = timed(lambda p=p, a=a, b=b: simulate_params(p, a, b, c), args.repeats)
            w_pub, c_pub = timed(lambda p=p, a=a, b=b: tcsmt.simulate_params(p, a, b, c), args.repeats)
            w_sc, _ = timed(lambda p=p, a=a, b=b: scalar_model.dot_rows(p, a[:m], b[:m], c[:m]), max(1, args.repeats // 2))
            same = np.array_equal(simulate_params(p, a[:m], b[:m], c[:m]),
                                  np.array(scalar_model.dot_rows(p, a[:m], b[:m], c[:m]), dtype=np.uint32))
            same = same and np.array_equal(simulate_params(p, a, b, c), tcsmt.simulate_params(p, a, b, c))
            rows.append((p.name, args.n / w_vec, args.n / c_vec, args.n / w_pub, args.n / c_pub, m / w_sc, same))
            print(f"{p.name}: numpy {args.n / w_vec / 1e6:.3f} M/s (cpu {args.n / c_vec / 1e6:.3f}), tcsmt.simulate "
                  f"{args.n / w_pub / 1e6:.3f} M/s (cpu {args.n / c_pub / 1e6:.3f}), scalar {m / w_sc / 1e3:.1f} k/s, "
                  f"same bits: {same}", file=sys.stderr)

    print(f"\n{args.formats} -> fp32, K = {args.K}; median of {args.repeats} repeats; CPUs {cpus}; "
          f"n = {args.n} (vectorised), {m} (scalar)\n")
    print("| model path | numpy semantics (dot/s, wall) | (dot/s, CPU) | tcsmt.simulate (dot/s, wall) | (dot/s, CPU) "
          "| scalar (dot/s, wall) | tcsmt.simulate / numpy (CPU) | bits agree |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, vw, vc, pw, pc, sw, same in rows:
        print(f"| {name} | {vw:,.0f} | {vc:,.0f} | {pw:,.0f} | {pc:,.0f} | {sw:,.0f} | {pc / vc:,.1f}x "
              f"| {'yes' if same else 'NO'} |")
    return 0 if all(r[-1] for r in rows) else 1


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--n", type=POSITIVE_INT, default=200_000, show_default=True, help="rows for the vectorised simulator")
@click.option("--n-scalar", type=POSITIVE_INT, default=3000, show_default=True, help="rows for the scalar model")
@click.option("--repeats", type=POSITIVE_INT, default=7, show_default=True)
@click.option("--K", "K", type=POSITIVE_INT, default=16, show_default=True)
@click.option("--models", default="hopper,ampere,volta", show_default=True)
@click.option("--formats", default="fp16,bf16", show_default=True, help="input formats (fp16, bf16), comma-separated")
@click.option("--cpu", type=NON_NEGATIVE_INT, default=None, help="pin this process to one CPU (as taskset -c CPU)")
def bench_cmd(**options) -> int:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_simulator.py")

if __name__ == "__main__":
    sys.exit(main())
