"""Operand layouts of a GEMM as torch hands them to cuBLAS, and which of them a recorded plan answers.

A plan's key names two layouts per operand (:class:`tcsmt.library.plans.Call` ``a_t``/``b_t``): row-major
(``"n"``) and the transposed view of a row-major tensor (``"t"``), each with its batches packed one after the
other.  torch passes other strides to cuBLAS as they are (a leading dimension and a batch stride), and cuBLAS may
pick another plan for them, so a call with another layout has no recorded plan of its own.  Two such layouts
were recorded beside their row-major twins (``tools/device/record_plans.py``, list ``views``) and compared call
by call (``tools/library/layout_variants.py``):

* ``rows_interleaved``: a (b, R, C) operand with strides (C, b*C, 1), the (R, b, C) tensor viewed with its first
  two dimensions swapped: eager attention's query at batch 1 (``(S, heads, d)`` seen as ``(heads, S, d)``,
  row stride heads*d, batch stride d);
* ``batch_broadcast``: a (b, R, C) operand with strides (0, C, 1), one row-major matrix expanded over the batch
  (transformers' rotary embedding's ``inv_freq`` at batch > 1).

Where a recording of the GPU shows the variant's kernels, split-K, reduction scheme and cuBLASLt trace equal to
the twin's at this very call (dtype, batch, fixed dimensions, the varied one inside a recorded range), the call
is answered under the twin's key, and the answer names the evidence; everywhere else the layout is refused.
The covered calls are ``models/library/layout_variants.json`` (generated; the comparison itself is
``evidence/library/<gpu>_layout_variants.json``).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.library.plans import Call, plans_dir

ROW_MAJOR = "n"
TRANSPOSED = "t"
ROWS_INTERLEAVED = "rows_interleaved"
BATCH_BROADCAST = "batch_broadcast"
VARIANTS = {ROWS_INTERLEAVED: ROW_MAJOR, BATCH_BROADCAST: ROW_MAJOR}
"""Each recorded layout variant and the key layout whose plans it was compared with."""
DESCRIBED = {ROWS_INTERLEAVED: "rows interleaved over the batch (strides (C, b*C, 1): a batch-1 attention query "
                               "viewed (heads, S, d))",
             BATCH_BROADCAST: "one matrix broadcast over the batch (batch stride 0)"}
VARIANTS_FILE = "layout_variants.json"


def operand_layout(shape: Sequence[int], stride: Sequence[int]) -> str:
    """``"n"`` (row-major, batches packed), ``"t"`` (the transposed view of one), a name of :data:`VARIANTS`, or
    ``""`` (another layout).  Dimensions of size 1 take any stride."""
    R, C = int(shape[-2]), int(shape[-1])
    sr, sc = int(stride[-2]), int(stride[-1])
    nb = int(shape[0]) if len(shape) == 3 else 1
    sb = int(stride[0]) if len(shape) == 3 else 0
    packed = nb == 1 or sb == R * C
    if sc == 1 and (sr == C or R == 1):
        if packed:
            return ROW_MAJOR
        if sb == 0:
            return BATCH_BROADCAST
        return ""
    if sr == 1 and (sc == R or C == 1):
        return TRANSPOSED if packed else ""
    if nb > 1 and R > 1 and C > 1 and sc == 1 and sr == nb * C and sb == C:
        return ROWS_INTERLEAVED
    return ""


def describe(shape: Sequence[int], stride: Sequence[int]) -> str:
    return f"strides {list(stride)} of shape {list(shape)}"


@cache
def _coverage(path: str) -> dict[str, list[dict[str, Any]]]:
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read the layout-variant list {path}: {exc}") from None
    gpus = doc.get("gpus") if isinstance(doc, dict) else None
    if not isinstance(gpus, dict):
        raise TcsmtError(f"{path} is not a layout-variant list (a 'gpus' mapping of entries)")
    return gpus


def _dims_match(entry: dict[str, Any], call: Call) -> bool:
    """Whether the call's M, N, K are those of the entry's template with its sequence length in a recorded run."""
    tmpl = entry["call"]
    seq = None
    for d in "MNK":
        want, have = tmpl[d], getattr(call, d)
        if want == "S":
            if seq is not None and seq != have:
                return False
            seq = have
        elif int(want) != have:
            return False
    if seq is None:
        return False
    return any(lo <= seq <= hi and (seq - lo) % step == 0 for lo, hi, step in entry["equal"])


def covered(variant: str, call: Call, gpu: str, path: str | None = None) -> str | None:
    """The evidence note where ``gpu``'s recording shows ``variant`` (an operand of ``call``, the call keyed with
    the twin layout) planned as the twin at this very call; None where no recording says so."""
    entries = _coverage(str(path or plans_dir() / VARIANTS_FILE)).get(gpu, [])
    for e in entries:
        c = e["call"]
        if (e["variant"] != variant or c["op"] != call.op or c["a_dtype"] != call.a_dtype
                or c.get("out_dtype", c["a_dtype"]) != call.out_dtype or int(c["batch"]) != call.batch
                or bool(c.get("a_t")) != call.a_t or bool(c.get("b_t")) != call.b_t
                or bool(c.get("tf32")) != call.tf32 or e.get("settings", "default") != call.settings):
            continue
        if _dims_match(e, call):
            return (f"{e['operand']} is {DESCRIBED[variant]}: answered as the row-major layout, whose plan "
                    f"{gpu} recorded for this call with the same kernels, split-K and cuBLASLt trace "
                    f"({e['source']})")
    return None
