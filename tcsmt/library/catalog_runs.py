"""The runs a plan catalog stores: recorded token counts (count -> plan) cut into arithmetic progressions, each
count in exactly one run (:func:`plan_runs`), as :mod:`tcsmt.library.catalog_build` writes them and
:meth:`tcsmt.library.catalog.Catalog.find` reads them (``lo <= t <= hi and (t - lo) % step == 0``)."""
from __future__ import annotations


def progressions(ts: list[int]) -> list[tuple[int, int, int]]:
    """Sorted token counts as arithmetic runs (lo, hi, step), each as long as possible from the left."""
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(ts):
        if i + 1 == len(ts):
            out.append((ts[i], ts[i], 1))
            break
        step = ts[i + 1] - ts[i]
        j = i + 1
        while j + 1 < len(ts) and ts[j + 1] - ts[j] == step:
            j += 1
        out.append((ts[i], ts[j], step))
        i = j + 1
    return out


RESIDUE_MODULI = (2, 4, 8, 16, 32, 64)
"""The strides tried by :func:`plan_runs`: cuBLAS often picks one plan for counts that are multiples of 8 (or
even) and another for the rest, which consecutive runs store one count at a time."""


def plan_runs(by_t: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """(lo, hi, step, plan) runs covering each recorded count of ``by_t`` (count -> plan) exactly once: runs of
    consecutive counts with one plan (cut into :func:`progressions`), or, where it gives fewer runs, each plan's
    counts of one residue modulo m (:data:`RESIDUE_MODULI`) cut into progressions.  Every count a run covers is a
    recorded count with the run's plan."""
    ts = sorted(by_t)
    best: list[tuple[int, int, int, int]] = []
    start = 0
    for i in range(1, len(ts) + 1):
        if i == len(ts) or by_t[ts[i]] != by_t[ts[start]]:
            best += [(lo, hi, step, by_t[ts[start]]) for lo, hi, step in progressions(ts[start:i])]
            start = i
    for m in RESIDUE_MODULI if len(best) > 8 else ():
        groups: dict[tuple[int, int], list[int]] = {}
        for t in ts:
            groups.setdefault((by_t[t], t % m), []).append(t)
        cand = sorted((lo, hi, step, pid) for (pid, _), g in groups.items() for lo, hi, step in progressions(g))
        if len(cand) < len(best):
            best = cand
    return best
