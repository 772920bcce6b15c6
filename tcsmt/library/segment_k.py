"""Which output tiles cuBLAS's sm90 ``xmma`` tf32 ``segment_k_on`` kernels cut, into how many K segments, where
each segment ends, and how the segments' partial sums are joined: the host rule, read from the kernels' launch
parameters.

Evidence (H100, cuBLAS 13.1): ``evidence/library/h100_segment_k_params.json.gz`` (``tools/device/segment_k_params.py``:
every kernel node's parameter bytes of 283 captured calls, 160 of them on ``segment_k_on`` kernels, one 2,304-byte
struct each) and the swamping probes ``h100_segment_k_probes.json.gz`` (60 calls) and
``h100_segment_k_probes_more.json.gz`` (96 calls, sweeps of M, N, K): the rule below gives every kept output of all
156 probed calls (``tests/test_segment_k_rule.py``).  Tested after it was written on 80 calls drawn at random
(``h100_segment_k_params_fresh.json.gz``, ``h100_segment_k_probes_fresh.json.gz``): the 10 that ran ``segment_k_on``
kernels (S = 2 to 8) agree in every output; and by probes with +L and -L anywhere in K
(``h100_segment_k_tree_probes.json.gz``, 15 calls of S = 2 to 16): every output agrees.

The rule, in the kernel's own coordinates (problem ``m x n x k`` in int32 words 4..6 of the struct; for ``nn``
calls m is torch's N and n torch's M, for ``tn`` and ``nt`` m is torch's M, :func:`kernel_m_is_torch_rows`):

1. Tiles: ``ta = ceil(m / tile_m)`` by ``tb = ceil(n / tile_n)`` (the kernel name's ``tilesize<tile_m>x<tile_n>``).
   The launch's cluster is ``(cx, gy)`` with ``gy`` the grid's y (word 7), ``cx`` word 10; a cluster covers gy tiles
   along m and cx along n, so the cluster tiles form ``R = ceil(ta / gy)`` (word 16) by ``Q = ceil(tb / cx)``
   (word 19), padded tiles included.
2. ``C = grid_x / cx`` clusters run persistent; ``(R Q) mod C`` cluster tiles (the last partial wave) are split, the
   rest run whole (word 64 is their tile count, gy cx times that; word 78 the whole tiles).  With ``S`` (word 66) = 1
   nothing is split.
3. Which: the cluster tiles in launch order, :func:`cluster_tile_order`: panels of ``W = 2**w3`` (word 3) cluster
   tiles along m (word 25 = 1) or along n (word 25 = 0); inside a panel the other coordinate is the outer loop, run
   forward in even panels and backward in odd ones (serpentine); the split tiles are the last ones in that order.
   The ``r`` rows (or columns) left over after the whole panels of W are cut, while 4 or more are left, into panels
   of the largest power of two that fits, and what is left below 4 is one panel (:func:`panels`: r = 3 is one panel
   of 3, 5 is 4 + 1, 6 is 4 + 2, 10 is 8 + 2).  Read from the H200 probes of every recorded launch form
   (``h200_segment_k_probes_forms.json.gz``, 330 calls; ``_large``, 70 calls of the forms whose calls were larger)
   and of every recorded way the split tiles end in those last panels (``h200_segment_k_probes_tails.json.gz``, 73
   calls): one panel of r (the first reading) missed the outputs
   of the calls with W = 8, r = 5 or 6 and W = 16, r = 6 or 10 (e.g. ``mm 13824x5120x991``, A transposed, whose fresh
   outputs had refuted it, ``evidence/library/h100_catalog_samples_segment_k.json``); plain powers of two (3 = 2 + 1)
   missed those with r = 3; this cut gives every output of all 639 judged probe calls (589 of them split tiles).
   Where the split tiles end inside the panels of the left-over, only a (W, r) that a probe covered is answered
   (:data:`tcsmt.library.segment_k_checked.CHECKED_TAILS`).
4. Each split tile's K range is cut into S segments of whole 32-k iterations: ``I = ceil(k / 32)`` (word 88),
   ``q, r = divmod(I, S)`` (words 92, 94); segments 0 .. S-r-1 hold q iterations, the last r hold q + 1; the last
   ends at k.  Each segment is a K-chain from +0 (one CTA's unit of work; word 89 = S times the split tiles).
5. The S fp32 partials are added as :func:`reduction_tree`: the first n - P and the last P (P the largest power of
   two below n), each joined the same way, then their two sums.  A probe with +L in segment a and -L in segment b
   reads the span of the smallest subtree holding both; the tree probes saw 790 of the 827 pairs (a, b) of their
   calls, every one as this tree gives it (a serial join from segment 0 misses outputs of all 14 calls of S > 2).

S, the swizzle (word 3) and the raster (word 25) are host choices read from the launch (no function of the shape
found: e.g. ``mm 8896x64xK`` takes S = 2, 2, 4, 8, 8, 15, 15, 15 at I = 39 .. 130, with C / split tiles = 16 or
18); the grid and the cluster are the launch's.  Integer arithmetic only.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from tcsmt.hwcheck.segment_k_launch import PARAMS_BYTES, WORDS, launch_words  # noqa: F401 (re-exported)

ITERATION_K = 32
"""k per main-loop iteration of the tf32 kernels (``tilesize...x32``)."""
KERNEL_FORM = re.compile(r"_f32_(nn|nt|tn|tt)_n_tilesize(\d+)x(\d+)x32_")
"""A ``segment_k_on`` kernel name's operand layout and output tile (tile_m x tile_n, 32 k per iteration)."""

Tree: TypeAlias = int | tuple["Tree", "Tree"]


def kernel_m_is_torch_rows(layout: str) -> bool:
    """Whether the kernel's m is torch's M (``tn``, ``nt`` kernels) rather than torch's N (``nn``): word 4 is N on
    every ``nn`` capture, M on every ``tn`` and ``nt`` one (160 captures)."""
    return layout != "nn"


@dataclass(frozen=True)
class SegmentKLaunch:
    """One ``segment_k_on`` launch: the kernel's problem and tile, its grid and cluster, and the host's choices."""
    m: int
    n: int
    k: int
    tile_m: int
    tile_n: int
    grid_x: int
    grid_y: int
    cluster_x: int
    segments: int
    swizzle_log: int
    raster_along_m: bool
    m_is_rows: bool = True
    """The kernel's m is torch's M (``tn``, ``nt`` kernels; :func:`kernel_m_is_torch_rows`); else torch's N."""
    from_call: bool = False
    """The problem (m, n, k) is the plan's call's (a catalog entry stores none: :func:`for_call` fills it)."""

    @property
    def tiles(self) -> tuple[int, int]:
        return -(-self.m // self.tile_m), -(-self.n // self.tile_n)

    @property
    def cluster_tiles(self) -> tuple[int, int]:
        ta, tb = self.tiles
        return -(-ta // self.grid_y), -(-tb // self.cluster_x)

    @property
    def k_iterations(self) -> int:
        return -(-self.k // ITERATION_K)

    @property
    def split_cluster_tiles(self) -> int:
        """Cluster tiles split: those of the last partial wave of the persistent clusters (none where S = 1)."""
        if self.segments <= 1:
            return 0
        rows, cols = self.cluster_tiles
        return rows * cols % (self.grid_x // self.cluster_x)


TAIL_PANEL_FLOOR = 4
"""The left-over rows (or columns) after the whole swizzle panels are cut into power-of-two panels while at least this
many are left; fewer form one panel (module docstring, step 3)."""


def panels(count: int, swizzle_log: int) -> list[tuple[int, int]]:
    """(first, width) of each swizzle panel of ``count`` cluster rows (or columns), in launch order: whole panels of
    ``2**swizzle_log``, then the left-over as the module docstring (step 3) says."""
    width = 2 ** swizzle_log
    whole = count - count % width
    out = [(first, width) for first in range(0, whole, width)]
    first, left = whole, count % width
    while left >= TAIL_PANEL_FLOOR:
        part = 1
        while 2 * part <= left:
            part *= 2
        out.append((first, part))
        first, left = first + part, left - part
    if left:
        out.append((first, left))
    return out


def tail_of(la: SegmentKLaunch) -> tuple[int, int] | None:
    """(panel width W, rows or columns r left over) where a launch's split cluster tiles end inside the panels of the
    left-over (fewer split tiles than those panels hold), so that how the left-over is cut decides which tiles are
    split; else None (nothing split, no left-over, or every tile of the left-over split)."""
    rows, cols = la.cluster_tiles
    inner, outer = (rows, cols) if la.raster_along_m else (cols, rows)
    width = 2 ** la.swizzle_log
    left = inner % width
    return (width, left) if left and 0 < la.split_cluster_tiles < left * outer else None


def cluster_tile_order(rows: int, cols: int, swizzle_log: int, along_m: bool) -> list[tuple[int, int]]:
    """The cluster tiles (row along m, col along n) in launch order (module docstring, step 3)."""
    out: list[tuple[int, int]] = []
    inner_n, outer_n = (rows, cols) if along_m else (cols, rows)
    for panel, (first, width) in enumerate(panels(inner_n, swizzle_log)):
        inner = range(first, first + width)
        outer = range(outer_n) if panel % 2 == 0 else range(outer_n - 1, -1, -1)
        for o in outer:
            for i in inner:
                out.append((i, o) if along_m else (o, i))
    return out


def split_tiles(launch: SegmentKLaunch) -> set[tuple[int, int]]:
    """The output tiles (index along m, index along n; real tiles only) whose K range is cut into segments."""
    rows, cols = launch.cluster_tiles
    n_split = launch.split_cluster_tiles
    if not n_split:
        return set()
    order = cluster_tile_order(rows, cols, launch.swizzle_log, launch.raster_along_m)
    ta, tb = launch.tiles
    out = set()
    for r, c in order[len(order) - n_split:]:
        for i in range(r * launch.grid_y, (r + 1) * launch.grid_y):
            for j in range(c * launch.cluster_x, (c + 1) * launch.cluster_x):
                if i < ta and j < tb:
                    out.add((i, j))
    return out


def segment_ends(k: int, segments: int) -> list[int]:
    """Where each of the S segments of a split tile ends, in k (the last at k; module docstring, step 4)."""
    q, r = divmod(-(-k // ITERATION_K), segments)
    ends = [ITERATION_K * (u * q + max(0, u - (segments - r))) for u in range(1, segments + 1)]
    return [min(e, k) for e in ends]


def reduction_tree(leaves: Sequence[int] | int) -> Tree:
    """The join of the segments' partials (module docstring, step 5), as nested pairs of segment indices."""
    seq = list(range(leaves)) if isinstance(leaves, int) else list(leaves)
    if len(seq) == 1:
        return seq[0]
    p = 1
    while 2 * p < len(seq):
        p *= 2
    return reduction_tree(seq[:len(seq) - p]), reduction_tree(seq[len(seq) - p:])


# ------------------------------------------------------------------ a recorded launch as plan data
def launch_of_words(words: dict[str, Any], kernel: str) -> SegmentKLaunch | str:
    """The launch of a recording's ``segment_k_launch`` words (:data:`tcsmt.hwcheck.segment_k_launch.KEPT`, grid and
    cluster) on kernel ``kernel`` (its name gives the layout and tile), or why the words do not make one (a kernel
    name without its tile, a cluster or word that disagrees with the rule of the module docstring)."""
    form = KERNEL_FORM.search(kernel)
    if form is None:
        return f"no layout and tile in the kernel name {kernel[:80]}"
    try:
        grid, cluster = [int(x) for x in words["grid"]], words.get("cluster")
        la = SegmentKLaunch(m=int(words["m"]), n=int(words["n"]), k=int(words["k"]), tile_m=int(form.group(2)),
                            tile_n=int(form.group(3)), grid_x=grid[0], grid_y=grid[1],
                            cluster_x=int(words["cluster_cols"]), segments=int(words["segments"]),
                            swizzle_log=int(words["swizzle_log"]), raster_along_m=int(words["raster_along_m"]) == 1,
                            m_is_rows=kernel_m_is_torch_rows(form.group(1)))
        split_word = int(words["split_tiles"])
        counted = (int(words["cluster_tile_rows"]), int(words["cluster_tile_cols"]))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return f"launch words incomplete ({type(exc).__name__}: {exc})"
    if min(la.m, la.n, la.k, la.tile_m, la.tile_n, la.grid_x, la.grid_y, la.cluster_x, la.segments) < 1 or \
            la.grid_x % la.cluster_x or not 0 <= la.swizzle_log <= 16 or int(words["raster_along_m"]) not in (0, 1):
        return "launch words out of range"
    if cluster is not None and [int(x) for x in cluster] != [la.cluster_x, la.grid_y, 1]:
        return f"cluster {cluster} is not (word 10, grid y, 1) = ({la.cluster_x}, {la.grid_y}, 1)"
    rows, cols = la.cluster_tiles
    split = rows * cols % (la.grid_x // la.cluster_x)
    if counted != (rows, cols) or split_word != split * la.grid_y * la.cluster_x or (split == 0) != (la.segments == 1):
        return (f"launch words disagree with the rule: cluster tiles {counted} (rule {(rows, cols)}), split tiles "
                f"{split_word} (rule {split * la.grid_y * la.cluster_x}), S = {la.segments}")
    return la


def launch_form(la: SegmentKLaunch, layout: str) -> tuple[str, int, int, int, int, int, int]:
    """A launch's form (:data:`tcsmt.library.segment_k_checked.CHECKED_FORMS`) on a kernel of ``layout`` (``nn``,
    ``tn``, ``nt``)."""
    return (layout, la.tile_m, la.tile_n, la.swizzle_log, int(la.raster_along_m), la.grid_y, la.cluster_x)


def launch_entry(la: SegmentKLaunch) -> dict[str, Any]:
    """A plan entry's ``segment_k`` field (JSON): the launch as :func:`launch_from_entry` reads it, less its problem
    (the call's own M x N x K, checked against the recorded words when the entry was made, :func:`launch_problem`):
    so the calls of a run of token counts that share the host's choices share one entry (a catalog stores a run of
    equal entries once)."""
    return {"tile": [la.tile_m, la.tile_n], "grid": [la.grid_x, la.grid_y], "cluster_x": la.cluster_x,
            "segments": la.segments, "swizzle_log": la.swizzle_log, "raster_along_m": la.raster_along_m,
            "m_is_rows": la.m_is_rows}


def for_call(la: SegmentKLaunch, M: int, N: int, K: int) -> SegmentKLaunch:
    """The launch with its problem taken from the call (the kernel's m is M or N by its layout) where its entry did
    not store one (``from_call``; :class:`tcsmt.library.plans.Plan` does this whenever it is made, so a plan given
    another call takes that call's problem); a launch that names its problem is returned as it is (and checked
    against the call by :func:`launch_problem` where it is evaluated)."""
    if not la.from_call:
        return la
    m, n = (M, N) if la.m_is_rows else (N, M)
    return dataclasses.replace(la, m=m, n=n, k=K)


def launch_from_entry(d: dict[str, Any]) -> SegmentKLaunch:
    """The launch of a plan entry's ``segment_k`` field (:func:`launch_entry`): its problem is the plan's call's
    (:func:`for_call`); ValueError where it is malformed."""
    try:
        (tm, tn), (gx, gy) = d["tile"], d["grid"]
        return SegmentKLaunch(m=0, n=0, k=0, tile_m=int(tm), tile_n=int(tn), grid_x=int(gx),
                              grid_y=int(gy), cluster_x=int(d["cluster_x"]), segments=int(d["segments"]),
                              swizzle_log=int(d["swizzle_log"]), raster_along_m=bool(d["raster_along_m"]),
                              m_is_rows=bool(d["m_is_rows"]), from_call=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"segment_k needs tile, grid, cluster_x, segments, swizzle_log, raster_along_m and "
                         f"m_is_rows ({type(exc).__name__}: {exc})") from None


def launch_problem(la: SegmentKLaunch, M: int, N: int, K: int) -> str:
    """'' where the launch's problem is torch's M x N x K (the kernel's m is M or N by its layout), else why not."""
    want = ((M, N) if la.m_is_rows else (N, M)) + (K,)
    if (la.m, la.n, la.k) != want:
        return (f"the launch's problem {la.m}x{la.n}x{la.k} is not the call's ({'M, N' if la.m_is_rows else 'N, M'}, "
                f"K = {want[0]}, {want[1]}, {want[2]})")
    return ""


_SPLIT: dict[SegmentKLaunch, np.ndarray] = {}


def split_table(la: SegmentKLaunch) -> np.ndarray:
    """bool (tiles along m, tiles along n): whether each output tile is split (:func:`split_tiles`), cached."""
    got = _SPLIT.get(la)
    if got is None:
        got = np.zeros(la.tiles, dtype=bool)
        for i, j in split_tiles(la):
            got[i, j] = True
        if len(_SPLIT) >= 256:
            _SPLIT.clear()
        _SPLIT[la] = got
    return got


def split_outputs(la: SegmentKLaunch, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """bool, broadcast of ``rows`` and ``cols`` (torch's output indices): whether output (i, j) lies in a split tile
    (the kernel's m is torch's rows or columns by its layout)."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    along_m, along_n = (rows, cols) if la.m_is_rows else (cols, rows)
    return split_table(la)[along_m // la.tile_m, along_n // la.tile_n]


def describe_launch(la: SegmentKLaunch) -> list[str]:
    """Lines for a plan's account: which tiles are split, in torch's outputs, and the segments."""
    ta, tb = la.tiles
    split = sorted(split_tiles(la))
    what = f"S = {la.segments}, {len(split)} of {ta * tb} output tiles split" if split else "no tile split"
    lines = [f"  segment-K: kernel problem {la.m}x{la.n}x{la.k} in {la.tile_m}x{la.tile_n} tiles ({ta}x{tb}), "
             f"grid {la.grid_x}x{la.grid_y}, cluster {la.cluster_x}x{la.grid_y}, swizzle 2^{la.swizzle_log} along "
             f"{'m' if la.raster_along_m else 'n'}; {what}"]
    if not split:
        return [*lines, "             every output: one K-chain over the whole K"]
    rows, cols = ("rows", "cols") if la.m_is_rows else ("cols", "rows")
    by_i: dict[int, list[int]] = {}
    for i, j in split:
        by_i.setdefault(i, []).append(j)
    shown = []
    for i, js in sorted(by_i.items()):
        runs, start = [], js[0]
        for a, b in zip(js, [*js[1:], -1]):  # runs of consecutive tile columns
            if b != a + 1:
                runs.append((start, a))
                start = b
        span = ", ".join(f"{la.tile_n * s}..{min(la.n, la.tile_n * (e + 1)) - 1}" for s, e in runs)
        shown.append(f"{rows} {la.tile_m * i}..{min(la.m, la.tile_m * (i + 1)) - 1} x {cols} {span}")
    more = f"; ... ({len(shown) - 8} more tile rows)" if len(shown) > 8 else ""
    ends = segment_ends(la.k, la.segments)
    return [*lines, f"             split outputs (torch {rows} x {cols}): {'; '.join(shown[:8])}{more}",
            f"             each split output: {la.segments} K-chains from +0 over k [0, {ends[0]})"
            + "".join(f", [{a}, {b})" for a, b in itertools.pairwise(ends))
            + f"; partials joined in fp32 (each sum RN32) as {reduction_tree(la.segments)}",
            "             other outputs: one K-chain over the whole K"]


def launch_facts(la: SegmentKLaunch) -> dict[str, Any]:
    """The launch as plain data (``tcsmt explain --json``): S, the segments' ends, the join, and each split tile as
    torch's output ranges [row_lo, row_hi) x [col_lo, col_hi)."""
    boxes = []
    for i, j in sorted(split_tiles(la)):
        m0, m1 = la.tile_m * i, min(la.m, la.tile_m * (i + 1))
        n0, n1 = la.tile_n * j, min(la.n, la.tile_n * (j + 1))
        boxes.append([m0, m1, n0, n1] if la.m_is_rows else [n0, n1, m0, m1])
    return {"segments": la.segments, "segment_ends": segment_ends(la.k, la.segments) if boxes else [la.k],
            "join": str(reduction_tree(la.segments)), "tile": [la.tile_m, la.tile_n], "kernel_m_is_torch_rows":
            la.m_is_rows, "grid": [la.grid_x, la.grid_y], "cluster_x": la.cluster_x, "swizzle_log": la.swizzle_log,
            "raster_along_m": la.raster_along_m, "split_outputs": boxes}
