"""``tcsmt verify --stats``: error distributions of the schemes on random inputs (simulator), and their plot."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io import files
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


def stats(arch: str, algos: Sequence[str], K: int, n: int, dom: Domain, dist: str = "loguniform",
          relative: bool = True, seed: int = 0) -> list[Stats]:
    """Errors of each algorithm on the same n random dot products of length K (simulator)."""
    if n < 1:
        raise TcsmtError("--n must be at least 1")
    if K < 1:
        raise TcsmtError("--k must be at least 1")
    rng = np.random.default_rng(seed)
    a, b = random_inputs(rng, n, K, dom, dist)
    out = []
    for algo in algos:
        algo = scheme_key(algo)
        p = params_for(algo, arch)
        t0 = time.perf_counter()
        d = simulate_scheme(algo, p, a, b)
        errs = errors_fp64(d, a, b, relative)
        out.append(Stats(algo, arch, n, float(np.median(errs)), float(np.percentile(errs, 95)),
                         float(np.max(errs)), errs, time.perf_counter() - t0))
    return out


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
