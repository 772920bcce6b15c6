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
3. Which: the cluster tiles in launch order, :func:`cluster_tile_order`: panels of ``2**w3`` (word 3) cluster
   tiles along m (word 25 = 1) or along n (word 25 = 0); inside a panel the other coordinate is the outer loop, run
   forward in even panels and backward in odd ones (serpentine); the split tiles are the last ones in that order.
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

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

PARAMS_BYTES = 2304
"""The one parameter of every ``segment_k_on`` (and ``segment_k_off``) launch read: a 2,304-byte struct."""

WORDS = {"swizzle_log": 3, "m": 4, "n": 5, "k": 6, "cluster_rows": 7, "cluster_cols": 10, "clusters": 13,
         "cluster_tile_rows": 16, "cluster_tile_cols": 19, "raster_along_m": 25, "split_tiles": 64, "segments": 66,
         "whole_tiles": 78, "k_iterations": 88, "units": 89, "segment_iterations": 92, "longer_segments": 94,
         "padded_tiles": 111}
"""int32 word index (byte offset / 4) of each field read (module docstring); ``clusters`` is the clusters of the
full grid (the launch's grid can be smaller where every tile is split)."""

ITERATION_K = 32
"""k per main-loop iteration of the tf32 kernels (``tilesize...x32``)."""

Tree: TypeAlias = int | tuple["Tree", "Tree"]


def launch_words(raw: bytes) -> dict[str, int]:
    """The fields of :data:`WORDS` from a launch's parameter bytes (little-endian int32)."""
    if len(raw) != PARAMS_BYTES:
        raise ValueError(f"a segment_k launch struct is {PARAMS_BYTES} bytes, not {len(raw)}")
    return {name: struct.unpack_from("<i", raw, 4 * at)[0] for name, at in WORDS.items()}


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


def cluster_tile_order(rows: int, cols: int, swizzle_log: int, along_m: bool) -> list[tuple[int, int]]:
    """The cluster tiles (row along m, col along n) in launch order (module docstring, step 3)."""
    width = 2 ** swizzle_log
    out: list[tuple[int, int]] = []
    inner_n, outer_n = (rows, cols) if along_m else (cols, rows)
    for panel in range(-(-inner_n // width)):
        inner = range(panel * width, min(inner_n, (panel + 1) * width))
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
