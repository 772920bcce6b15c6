"""Library GEMMs (cuBLAS behind torch): recorded plans, their evaluation, conversion and replay.

The public API (:mod:`tcsmt.library.api`): :func:`plan`, :func:`run`, :func:`run_pairs`, :func:`mm`,
:func:`addmm`, :func:`linear`, :func:`bmm`, :func:`scaled_mm`.
"""

from tcsmt.library.api import Call, Plan, addmm, bmm, linear, mm, plan, run, run_pairs, scaled_mm

__all__ = ["Call", "Plan", "addmm", "bmm", "linear", "mm", "plan", "run", "run_pairs", "scaled_mm"]
