"""What cuBLAS runs for one torch call, read two ways, for ``record_plans.py`` (beside it): the package's own reader,
:mod:`tcsmt.hwcheck.plan_capture` (stream capture read through the driver API, or the calls executed under
``torch.profiler``) and :mod:`tcsmt.hwcheck.lt_trace` (cuBLASLt's trace of each call), which ``tcsmt record`` runs.

This file carried a copy of both until the package had them; it now imports them from the checkout it is part of,
``tcsmt/`` at the first folder above this file that holds ``tcsmt/hwcheck/plan_capture.py`` (``tools/device/`` in
the repository, or a copy of this folder such as ``.devcarry/`` at the checkout's root), so a bare GPU host needs
nothing installed: both modules use the standard library only, and importing ``tcsmt`` needs numpy, which the
recorder needs anyway (torch is passed in by the caller).
"""
from __future__ import annotations

import os
import sys


def _checkout_root() -> str | None:
    """The nearest folder above this file that holds the package's plan reader (None: no checkout around it)."""
    d = os.path.dirname(os.path.abspath(__file__))
    while True:
        if os.path.isfile(os.path.join(d, "tcsmt", "hwcheck", "plan_capture.py")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


_ROOT = _checkout_root()
if _ROOT is not None and _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)  # this checkout's package, even where another tcsmt is installed

from tcsmt.hwcheck.lt_trace import LT_COMP, LT_LINE, LT_WS, PTR, LtTrace, lib_path, parse_lt  # noqa: E402
from tcsmt.hwcheck.plan_capture import (  # noqa: E402
    NODE_TYPES,
    AttrValue,
    Capturer,
    Demangler,
    GraphReader,
    KernelParams,
    MemsetParams,
    graph_handle,
    kernel_name,
    record_executed,
)

__all__ = ["LT_COMP", "LT_LINE", "LT_WS", "NODE_TYPES", "PTR", "AttrValue", "Capturer", "Demangler", "GraphReader",
           "KernelParams", "LtTrace", "MemsetParams", "graph_handle", "kernel_name", "lib_path", "parse_lt",
           "record_executed"]
