"""Plans predicted beyond the recorded token counts: the one rule that no held-out recorded call contradicts.

A catalog records a layer's forward and input-gradient products (:class:`~tcsmt.library.catalog.Catalog` runs
that vary M, with N and K fixed) at every token count M = 1..H (H = 16,384 in the shipped recordings).  Above H
nothing is recorded.  **Continuation:** where the recorded runs cover 1..H without a gap and the runs at the top
compute one arithmetic (:meth:`tcsmt.library.plans.Plan.arithmetic`: S, slices, reduction, K tiles, input rounding,
epilogue; kernels may differ) over at least the upper half of the counts (from :data:`STRETCH_START` x H or lower,
up to H), a call with H < M <= :data:`REACH` x H is answered with that arithmetic, as a *predicted* plan.

Why this rule and no other (``python -m tools.library.prediction_study``, ``evidence/library/prediction_study.json``):
fitted on the counts 1..8,192 of every recorded run of both catalogs and asked about 8,193..16,384, it answered
every layer whose top stretch qualified and was never wrong; the weight gradients (runs that vary K, the reduction)
are left out because there the same rule is wrong (split-K starts at larger K), and shapes away from a recorded
(N, K) are left out because every rule tried there (thresholds, monotone dominance, decision trees) is wrong on
held-out random shapes.  A refusal at the top of the range (no plan) predicts nothing.
"""
from __future__ import annotations

import dataclasses
from itertools import pairwise
from typing import TYPE_CHECKING

from tcsmt.library.plans import Call, Plan

if TYPE_CHECKING:
    from tcsmt.library.catalog import Catalog

STRETCH_START = 0.5
"""The top stretch of one arithmetic must start at or below this fraction of the last recorded count (+1)."""
REACH = 2
"""Predictions reach up to this multiple of the last recorded count."""
VARY = "M"
"""The runs the rule extends: token counts of forward and input-gradient products (N, K fixed)."""


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A predicted plan with the recorded stretch it extends: M = first..last (N, K fixed) in ``catalog``."""

    plan: Plan
    first: int
    last: int
    catalog: str

    def evidence(self) -> str:
        c = self.plan.call
        return (f"predicted from {self.catalog}: the recorded token counts M = {self.first}..{self.last} "
                f"(N = {c.N}, K = {c.K}) all run this arithmetic, and the recordings stop at M = {self.last}; "
                f"continuation up to M = {REACH * self.last} (rule: tcsmt.library.predict; held-out check: "
                f"evidence/library/prediction_study.json)")


def continuation(cat: Catalog, call: Call) -> Prediction | str:
    """The predicted plan of ``call`` from ``cat``, or why the rule does not apply ('' where ``cat`` records no
    token counts of this layer at all; see the module)."""
    runs = cat.runs_of(call, VARY)
    if not runs or runs[0][0] != 1:
        return ""
    top = runs[-1][1]
    if not top < call.M <= REACH * top:
        return (f"{cat.name} records M = 1..{top} of this layer; no prediction reaches M = {call.M} (continuation "
                f"goes up to {REACH} x {top})") if call.M > top else ""
    for (_, hi, step, _), (lo, _, _, _) in pairwise(runs):
        if hi + step < lo:
            return ""  # a gap: not every count recorded
    plans = [cat.plan_of(pid) for _, _, _, pid in runs]
    last = plans[-1]
    if last is None:
        return f"{cat.name} has no plan at its last recorded count M = {top} of this layer: no prediction"
    first = runs[-1][0]
    for (lo, _, _, _), p in zip(reversed(runs[:-1]), reversed(plans[:-1])):
        if p is None or p.arithmetic() != last.arithmetic():
            break
        first = lo
    if first > int(STRETCH_START * top) + 1:
        return (f"{cat.name} records M = 1..{top} of this layer, but its last plan holds only from M = {first}, "
                f"above the half of the counts a prediction needs: no prediction")
    return Prediction(dataclasses.replace(last, call=call), first, top, cat.name)
