"""Rows per second and peak memory of the simulator by input kind: bit patterns against float values.

Usage:

    python benchmarks/bench_value_arrays.py [--n 1000000] [--K 16] [--model volta]

Times ``tcsmt.simulate(MODEL, a, b, c, "fp16", "fp32")`` with a and b given as
uint16 fp16 patterns, as float16 values (reinterpreted: no conversion), as
float32 values and as float64 values (converted chunk-wise by exact bit
manipulation), then reports the peak memory that numpy allocated (tracemalloc)
on a 2*10^5-row float16 input against the size of a float64 copy of it.
"""
from __future__ import annotations

import sys
import time
import tracemalloc
from types import SimpleNamespace

import click
import numpy as np

from tcsmt import simulate
from tcsmt.io.options import POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main


def random_fp16(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Finite fp16 patterns with exponents spread over +-8 binades around 1."""
    s = rng.integers(0, 2, shape, dtype=np.uint16)
    e = rng.integers(7, 23, shape, dtype=np.uint16)
    f = rng.integers(0, 1024, shape, dtype=np.uint16)
    return (s << 15) | (e << 10) | f


def _main(args: SimpleNamespace) -> int:
    rng = np.random.default_rng(0)
    pat = random_fp16(rng, (args.n, args.K))
    c = rng.standard_normal(args.n).astype(np.float32)
    f16 = pat.view(np.float16)
    ref = simulate(args.model, pat, pat, c, "fp16", "fp32")
    cases = [("uint16 patterns", pat, "fp16"), ("float16 values", f16, "fp16"),
             ("float32 values", f16.astype(np.float32), "fp16"), ("float64 values", f16.astype(np.float64), "fp16")]
    print(f"{args.model} fp16 -> fp32, {args.n} x {args.K}")
    for label, a, path in cases:
        t0 = time.perf_counter()
        d = simulate(args.model, a, a, c, path, "fp32")
        t = time.perf_counter() - t0
        assert np.array_equal(d, ref), label
        print(f"  {label:16} {args.n / t:12,.0f} rows/s  ({t:.2f} s)")
    m = min(200_000, args.n)
    a = f16[:m]
    tracemalloc.start()
    simulate(args.model, a, a, c[:m], "fp16", "fp32")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"peak numpy allocation, {m} x {args.K} float16 rows: {peak / 2 ** 20:.1f} MiB "
          f"(input {a.nbytes / 2 ** 20:.1f} MiB; a float64 copy: {a.size * 8 / 2 ** 20:.1f} MiB)")
    return 0


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--n", type=POSITIVE_INT, default=1_000_000, show_default=True)
@click.option("--K", "K", type=POSITIVE_INT, default=16, show_default=True)
@click.option("--model", default="volta", show_default=True)
def bench_cmd(**options) -> int:
    return _main(SimpleNamespace(**options))


main = script_main(bench_cmd, "python benchmarks/bench_value_arrays.py")

if __name__ == "__main__":
    sys.exit(main())
