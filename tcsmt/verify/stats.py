"""``tcsmt verify --stats``: error distributions of the schemes on random inputs (simulator), and their plot."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tcsmt.io import files
from tcsmt.io.limits import STATS_K, STATS_N, as_size, require_memory
from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import errors_fp64, params_for, random_inputs, simulate_scheme
from tcsmt.verify.schemes import scheme_key


@dataclass
class Stats:
    """Error distribution of one algorithm on one architecture."""

    algo: str
    arch: str
    n: int
    median: float
    p95: float
    max: float
    errors: np.ndarray
    seconds: float


STATS_CHUNK = 1 << 22
"""Entries (rows x K) of the random inputs generated and simulated at once: memory stays bounded, and a run of
at most this many entries draws its inputs exactly as one (n, K) draw (the same numbers for a seed)."""
ENTRY_BYTES = 96
"""Memory per input entry of one chunk (float64 magnitudes and products, patterns, int64 columns)."""


def stats(arch: str, algos: Sequence[str], K: int, n: int, dom: Domain, dist: str = "loguniform",
          relative: bool = True, seed: int = 0, progress: Callable[[str], None] | None = None) -> list[Stats]:
    """Errors of each algorithm on the same n random dot products of length K (simulator).

    The inputs are drawn and simulated in chunks of :data:`STATS_CHUNK` entries (rows x K); the errors of
    every row are kept (n fp64 values per algorithm), and a run that would not fit the memory available
    is refused before it starts.  ``progress`` gets a line per chunk and scheme on runs of a quarter chunk
    or more.
    """
    as_size(n, "--n", STATS_N, why="dot products of one statistics run")
    as_size(K, "--k", STATS_K, why="products per dot product")
    keys = [scheme_key(a) for a in algos]
    params = {a: params_for(a, arch) for a in keys}
    rows = max(1, STATS_CHUNK // K)
    require_memory(n * 8 * (len(keys) + 1) + min(rows, n) * K * ENTRY_BYTES,
                   f"verify --stats with --n {n:,} and --k {K:,}", "lower --n or --k")
    rng = np.random.default_rng(seed)
    errs = {a: np.empty(n) for a in keys}
    secs = dict.fromkeys(keys, 0.0)
    for s in range(0, n, rows):
        e = min(n, s + rows)
        a, b = random_inputs(rng, e - s, K, dom, dist)
        for algo in keys:
            t0 = time.perf_counter()
            d = simulate_scheme(algo, params[algo], a, b)
            errs[algo][s:e] = errors_fp64(d, a, b, relative)
            secs[algo] += time.perf_counter() - t0
            if progress is not None and n * K >= STATS_CHUNK // 4:
                progress(f"{arch}: {algo} on dot products {s + 1:,}..{e:,} of {n:,}")
    return [Stats(algo, arch, n, float(np.median(errs[algo])), float(np.percentile(errs[algo], 95)),
                  float(np.max(errs[algo])), errs[algo], secs[algo]) for algo in keys]


def plot_available() -> bool:
    """Whether matplotlib can be imported (``--plot`` needs it)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def write_plot(results: Sequence[Stats], path: str | files.Output, relative: bool, force: bool = False) -> str:
    """Histogram of log2 errors per algorithm/arch; returns a message (missing matplotlib included).

    ``path`` is a file name (claimed here; replaced only with ``force``, and then only a regular file)
    or an output already claimed with :func:`tcsmt.io.files.output`.  The format follows the suffix
    (png without one); the file is written atomically.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'tcsmt[plot]')"
    out = path if isinstance(path, files.Output) else files.output(path, force)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for s in results:
        e = s.errors[np.isfinite(s.errors) & (s.errors > 0)]
        if e.size:
            ax.hist(np.log2(e), bins=80, histtype="step", label=f"{s.arch} {s.algo}")
    ax.set_xlabel("log2 " + ("relative" if relative else "absolute") + " error")
    ax.set_ylabel("count")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fmt = out.path.suffix[1:].lower() or "png"
    try:
        out.write_with(lambda fh: fig.savefig(fh, format=fmt))
    finally:
        plt.close(fig)
    return f"plot written to {out.path}"
