"""The words of a captured ``segment_k_on`` launch that say how it cuts K: read through the driver.

Standard library only (ctypes through :func:`tcsmt.hwcheck.gemv_launch.kernel_params`), for
:class:`tcsmt.hwcheck.plan_capture.GraphReader`.  cuBLAS's sm90 ``xmma`` tf32 kernels with ``segment_k_on`` in their
name take one 2,304-byte parameter struct; the int32 words of :data:`WORDS` hold the kernel's problem, its cluster
tiles and the host's choices (the segment count S, the swizzle and the raster), read on 170 H100 launches
(``tools/device/segment_k_params.py``, ``evidence/library/h100_segment_k_params*.json.gz``;
:mod:`tcsmt.library.segment_k` has the rule they feed).
"""
from __future__ import annotations

import struct
from typing import Any

from tcsmt.hwcheck.gemv_launch import kernel_params

SEGMENT_K_ON = "_segment_k_on_"
"""What the names of the kernels whose launch words are kept hold."""
PARAMS_BYTES = 2304
"""The one parameter of every ``segment_k_on`` (and ``segment_k_off``) launch read: a 2,304-byte struct."""
WORDS = {"swizzle_log": 3, "m": 4, "n": 5, "k": 6, "cluster_rows": 7, "cluster_cols": 10, "clusters": 13,
         "cluster_tile_rows": 16, "cluster_tile_cols": 19, "raster_along_m": 25, "split_tiles": 64, "segments": 66,
         "whole_tiles": 78, "k_iterations": 88, "units": 89, "segment_iterations": 92, "longer_segments": 94,
         "padded_tiles": 111}
"""int32 word index (byte offset / 4) of each field read; ``clusters`` is the clusters of the full grid (the launch's
grid can be smaller where every tile is split)."""
KEPT = ("m", "n", "k", "segments", "swizzle_log", "raster_along_m", "cluster_cols", "cluster_tile_rows",
        "cluster_tile_cols", "split_tiles")
"""The words a recording keeps (plan field ``segment_k_launch``): the problem (a check against the call), the host's
choices, the cluster width and the cluster tiles and split tiles it counted (checks of the rule)."""


def launch_words(raw: bytes) -> dict[str, int]:
    """The fields of :data:`WORDS` from a launch's parameter bytes (little-endian int32)."""
    if len(raw) != PARAMS_BYTES:
        raise ValueError(f"a segment_k launch struct is {PARAMS_BYTES} bytes, not {len(raw)}")
    return {name: struct.unpack_from("<i", raw, 4 * at)[0] for name, at in WORDS.items()}


def segment_k_launch(info: Any, handle: int | None, kernel_params_ptr: int | None, grid: list[int],
                     cluster: list[int] | None) -> dict[str, Any] | None:
    """The kept words (:data:`KEPT`) of a ``segment_k_on`` launch with its ``grid`` and ``cluster`` dims (arguments as
    :func:`tcsmt.hwcheck.gemv_launch.kernel_params`'s); None where its parameters are not the one 2,304-byte struct
    (another cuBLAS; the driver cannot say)."""
    params = kernel_params(info, handle, kernel_params_ptr)
    if not params or len(params) != 1 or params[0][1] != PARAMS_BYTES:
        return None
    words = launch_words(params[0][2])
    return {**{k: words[k] for k in KEPT}, "grid": [int(x) for x in grid],
            "cluster": None if cluster is None else [int(x) for x in cluster]}
