"""Can a call's cuBLAS plan be predicted beyond the recorded calls?  Three rule families, measured on held-out calls.

    python -m tools.library.prediction_study study [--gpu h100 --gpu h200] [--json evidence/library/prediction_study.json]
    python -m tools.library.prediction_study check --gpu G --fresh FRESH.sqlite [--json OUT.json]

``check`` asks the library (:func:`tcsmt.library.lookup.answer`, the shipped catalogs only) about every call of a
catalog built from *fresh* recordings beyond the recorded token counts (``tools/device/record_plans.py`` with an
M range above 16,384, converted by ``python -m tcsmt.library.catalog_build`` with the shipped catalog's flags) and
counts the calls predicted, and those whose recorded arithmetic differs (a fresh call tcsmt refuses counts as
differing wherever a prediction was made, unless the refusal says the recorder failed: :data:`RECORDING_FAILURES`).

The plan catalogs (``models/library/<gpu>_cublas13_catalog.sqlite``) hold every recorded call's plan.  What
decides the output bits is the plan's *arithmetic* (:meth:`tcsmt.library.plans.Plan.arithmetic`: split-K count S,
slices, reduction, K tiles, input rounding, epilogue), not its kernel names, so two calls "have the same plan"
here when their catalog plans are equal once ``kernels`` and ``sources`` are left out; a refusal (no plan) is its
own class when fitting.  Each rule below is fitted on some recorded calls and asked about others it never saw; an answer is
*wrong* where the rule names an arithmetic other than the recorded one; a held-out call that tcsmt itself
refuses (an unread slice rule, an unknown epilogue) is not asked, since its arithmetic is not known.  A rule could ship as a "predicted" answer
only with 0 wrong; none does (the figures in ``evidence/library/prediction_study.json``, quoted in the README):

* **continuation** (:mod:`tcsmt.library.predict`, its constants): for every recorded range of token counts, fit on
  the counts 1..8192 and predict 8193..16384 with the arithmetic of the stretch that ends at 8192, where that
  stretch starts at or below 4097; asked separately of the runs that vary M (forward and input-gradient products,
  N and K fixed: the rule the library applies) and of those that vary K (weight gradients: not applied).
* **dominance** (more output tiles and a shorter K never bring split-K back): a call (M, N, K) without split-K
  would certify every (M', N', K') with M' >= M, N' >= N, K' <= K in its family and alignment class
  (:func:`align_class`).  Counted: recorded calls with split-K (or another arithmetic) that some recorded
  split-free call dominates.
* **tree**: a decision tree over (log2 M, log2 N, log2 K) per family and alignment class whose leaves are pure (one
  arithmetic, at least ``MIN_LEAF`` fitting calls) and which answers only inside the fitted calls' bounding box;
  fitted on every recorded call except half of the random shapes (seeded), asked about that half.
"""
from __future__ import annotations

import collections
import json
import math
import random
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog import call_at, open_catalog, read_plans
from tcsmt.library.lookup import answer
from tcsmt.library.plans import plans_dir
from tcsmt.library.predict import REACH, STRETCH_START, VARY

CUT = 8192
"""Continuation: the last token count fitted (the recordings go to 16,384 = REACH x CUT)."""
MIN_LEAF = 5
"""Tree: the fewest fitting calls of a leaf that answers."""
PER_RUN = 24
"""Points taken from each end of a long run (and about 30 spread over it) for the tree and dominance rules: a
run's extremes are what bound a rule (the tree's boxes, dominance's corners)."""
SEED = 0
SHOWN = 8


def align_class(x: int) -> int:
    """The largest of 8, 4, 2, 1 dividing x: the alignment the library's kernel choice depends on."""
    return next(a for a in (8, 4, 2) if x % a == 0) if x % 2 == 0 else 1


class Recorded:
    """A catalog's recorded calls, by run: (family, vary, d1, d2, lo, hi, step, arithmetic key or None)."""

    def __init__(self, path: Path):
        if not path.is_file():
            raise TcsmtError(f"no plan catalog {path}")
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.families = {int(i): str(k) for i, k in db.execute("SELECT id, key FROM families")}
        arith: dict[int, str | None] = {}
        for pid, f in read_plans(db).items():
            arith[pid] = None if "why" in f else json.dumps(
                {k: v for k, v in f.items() if k not in ("kernels", "sources")}, sort_keys=True)
        self.runs = [(fam, vary, d1, d2, lo, hi, step, arith[pid]) for fam, vary, d1, d2, lo, hi, step, pid in
                     db.execute("SELECT family, vary, d1, d2, lo, hi, step, plan FROM runs "
                                "WHERE vary IN ('M', 'K') ORDER BY family, vary, d1, d2, lo")]
        db.close()

    def single_points(self) -> set[tuple[int, int, int]]:
        """The shapes recorded as lone calls of vary M (the random shapes and other call lists)."""
        return {(lo, d1, d2) for _, vary, d1, d2, lo, hi, _, _ in self.runs if vary == "M" and lo == hi}


def _shape(vary: str, d1: int, d2: int, t: int) -> tuple[int, int, int]:
    return (t, d1, d2) if vary == "M" else (d1, d2, t)


def _points(run: tuple) -> Iterator[tuple[int, int, int]]:
    _, vary, d1, d2, lo, hi, step, _ = run
    ts = range(lo, hi + 1, step)
    pick = ts if len(ts) <= 3 * PER_RUN else sorted({*ts[:PER_RUN], *ts[-PER_RUN:], *ts[::max(1, len(ts) // 30)]})
    for t in pick:
        yield _shape(vary, d1, d2, t)


def _example(rec: Recorded, fam: int, shape: tuple[int, int, int], said: str | None, was: str | None) -> dict:
    def s(a: str | None) -> str:
        return "refused" if a is None else f"S = {json.loads(a)['split_k']}"
    return {"family": json.loads(rec.families[fam]), "MNK": list(shape), "rule": s(said), "recorded": s(was)}


def continuation(rec: Recorded, vary: str) -> dict[str, Any]:
    groups: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for r in rec.runs:
        if r[1] == vary:
            groups[r[:4]].append(r)
    reach = REACH * CUT
    answered = wrong = no_rule = calls = 0
    shown: list[dict] = []
    for key, runs in groups.items():
        if runs[-1][5] < reach or runs[0][4] > 1:
            continue
        fit = [r for r in runs if r[4] <= CUT]
        last = fit[-1]
        if last[5] < CUT or last[7] is None:
            no_rule += 1
            continue
        start = last[4]
        for r in reversed(fit[:-1]):
            if r[7] != last[7] or r[5] + r[6] < start:
                break
            start = r[4]
        if start > int(STRETCH_START * CUT) + 1:
            no_rule += 1
            continue
        answered += 1
        bad = [r for r in runs if r[5] > CUT and r[4] <= reach and r[7] != last[7]]
        calls += sum((min(r[5], reach) - max(r[4], CUT + 1)) // r[6] + 1 for r in runs if r[5] > CUT and r[4] <= reach)
        if bad:
            wrong += 1
            if len(shown) < SHOWN:
                r = bad[0]
                shown.append(_example(rec, key[0], _shape(r[1], r[2], r[3], max(r[4], CUT + 1)), last[7], r[7]))
    return {"rule": f"continuation over {vary}: the arithmetic of the stretch ending at {CUT}, where it starts at or "
                    f"below {int(STRETCH_START * CUT) + 1}, holds for {CUT + 1}..{reach}", "vary": vary,
            "applied": vary == VARY, "layers_asked": answered + no_rule, "layers_answered": answered,
            "layers_wrong": wrong, "calls_answered": calls, "wrong_examples": shown}


def _classes(rec: Recorded, held: set[tuple[int, int, int]]) -> dict[tuple, list[tuple]]:
    """Points by (family, alignment classes): (M, N, K, arithmetic, held out)."""
    out: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for r in rec.runs:
        single = r[1] == "M" and r[4] == r[5]
        for M, N, K in _points(r):
            out[(r[0], align_class(M), align_class(N), align_class(K))].append(
                (M, N, K, r[7], single and (M, N, K) in held))
    return out


def _dominating(good: list[tuple], q: tuple) -> tuple | None:
    """A point of ``good`` (sorted by M) with M <= q's, N <= q's and K >= q's, or None."""
    for p in good:
        if p[0] > q[0]:
            return None
        if p[1] <= q[1] and p[2] >= q[2]:
            return p
    return None


def dominance(classes: dict[tuple, list[tuple]], rec: Recorded) -> dict[str, Any]:
    free = '"split_k": 1,'
    checked = violated = 0
    shown: list[dict] = []
    for key, pts in classes.items():
        good = sorted(p for p in pts if p[3] is not None and free in p[3] and '"k_tile"' not in p[3])
        other = [p for p in pts if p[3] is not None and (free not in p[3] or '"k_tile"' in p[3])]
        checked += len(other)
        for q in other:
            p = _dominating(good, q)
            if p is not None:
                violated += 1
                if len(shown) < SHOWN:
                    shown.append({**_example(rec, key[0], q[:3], p[3], q[3]), "dominated_by": list(p[:3])})
    return {"rule": "dominance: a split-free call certifies every call of its family and alignment class with more "
                    "rows and columns and a shorter K", "calls_checked": checked, "calls_contradicting": violated,
            "wrong_examples": shown}


def _impurity(pts: list[tuple]) -> int:
    return len(pts) - max(collections.Counter(p[3] for p in pts).values())


def _grow(pts: list[tuple], depth: int = 0) -> tuple:
    """A tree over log2 (M, N, K): ('leaf', arithmetic), ('refuse',) or ('split', dim, threshold, lo, hi)."""
    labels = {p[3] for p in pts}
    if len(labels) == 1:
        lab = next(iter(labels))
        return ("leaf", lab) if lab is not None and len(pts) >= MIN_LEAF else ("refuse",)
    if len(pts) < MIN_LEAF or depth > 40:
        return ("refuse",)
    best = None
    for d in range(3):
        vs = sorted(math.log2(p[d]) for p in pts)
        if vs[-1] - vs[0] < 1e-9:
            continue
        for q in (0.25, 0.5, 0.75):
            th = vs[int(len(vs) * q)]
            th = th if th > vs[0] else (vs[0] + vs[-1]) / 2
            lo = [p for p in pts if math.log2(p[d]) < th]
            hi = [p for p in pts if math.log2(p[d]) >= th]
            if lo and hi and (best is None or _impurity(lo) + _impurity(hi) < best[0]):
                best = (_impurity(lo) + _impurity(hi), d, th, lo, hi)
    if best is None:
        return ("refuse",)
    _, d, th, lo, hi = best
    return ("split", d, th, _grow(lo, depth + 1), _grow(hi, depth + 1))


def _ask(node: tuple, p: tuple) -> tuple[bool, str | None]:
    while node[0] == "split":
        node = node[3] if math.log2(p[node[1]]) < node[2] else node[4]
    return (True, node[1]) if node[0] == "leaf" else (False, None)


def tree(classes: dict[tuple, list[tuple]], rec: Recorded) -> dict[str, Any]:
    asked = answered = wrong = 0
    shown: list[dict] = []
    for key, pts in classes.items():
        fit = [p for p in pts if not p[4]]
        test = [p for p in pts if p[4] and p[3] is not None]
        asked += len(test)
        if not fit or not test:
            continue
        box = [(min(p[d] for p in fit), max(p[d] for p in fit)) for d in range(3)]
        root = _grow(fit)
        for p in test:
            if not all(box[d][0] <= p[d] <= box[d][1] for d in range(3)):
                continue
            ok, said = _ask(root, p)
            if ok:
                answered += 1
                if said != p[3]:
                    wrong += 1
                    if len(shown) < SHOWN:
                        shown.append(_example(rec, key[0], p[:3], said, p[3]))
    return {"rule": f"tree: pure leaves of >= {MIN_LEAF} fitting calls over log2 (M, N, K), inside the fitted box",
            "held_out_calls": asked, "answered": answered, "wrong": wrong, "wrong_examples": shown}


def study(gpu: str, catalog: Path | None = None) -> dict[str, Any]:
    rec = Recorded(catalog or plans_dir() / f"{gpu}_cublas13_catalog.sqlite")
    shapes = sorted(rec.single_points())
    random.Random(SEED).shuffle(shapes)
    classes = _classes(rec, set(shapes[: len(shapes) // 2]))
    return {"gpu": gpu, "catalog": f"{gpu}_cublas13_catalog.sqlite", "continuation": continuation(rec, VARY),
            "continuation_weight_gradients": continuation(rec, "K"),
            "dominance": dominance(classes, rec), "tree": tree(classes, rec)}


RECORDING_FAILURES = ("not recorded:",)
"""Refusals in a fresh catalog that say the recorder failed (:mod:`tcsmt.library.catalog_build`: the call could not
be made, device memory ran out while capturing), not what cuBLAS does: counted as not recorded, not as differing."""


def _not_recorded(cat: Any, pid: int) -> bool:
    why = str(cat.fields_of(pid).get("why", ""))
    return any(w in why for w in RECORDING_FAILURES)


def check(gpu: str, fresh: Path) -> dict[str, Any]:
    """Every run of ``fresh`` (vary M) asked of the shipped catalogs at its first count, each prediction
    compared with the fresh recording over the whole run (the rule's answer is one arithmetic per layer)."""
    cat = open_catalog(str(fresh))
    families = {int(i): json.loads(k) for i, k in cat.db.execute("SELECT id, key FROM families")}
    counts = collections.Counter()
    shown: list[dict] = []
    rows = cat.db.execute("SELECT family, vary, d1, d2, lo, hi, step, plan FROM runs WHERE vary = ?", (VARY,))
    for fam, vary, d1, d2, lo, hi, step, pid in rows.fetchall():
        n = (hi - lo) // step + 1
        counts["calls"] += n
        call = call_at(families[fam], vary, d1, d2, lo)
        try:
            ans = answer(call, gpu, plans_dirs=())
        except TcsmtError:
            counts["refused"] += n
            continue
        if ans.kind != "predicted":
            counts["recorded"] += n
            continue
        got = cat.plan_of(pid)
        if got is None and _not_recorded(cat, pid):
            counts["not_recorded"] += n
            continue
        counts["predicted"] += n
        if got is None or got.arithmetic() != ans.plan.arithmetic():
            counts["differ"] += n
            if len(shown) < SHOWN:
                shown.append({"call": call.label(), "run": [lo, hi, step], "predicted_split_k": ans.plan.split_k,
                              "recorded": "refused" if got is None else f"S = {got.split_k}"})
    return {"gpu": gpu, "fresh": fresh.name, "fresh_sources": cat.sources, "fresh_stamp": cat.stamp,
            **{k: counts[k] for k in ("calls", "predicted", "differ", "recorded", "refused", "not_recorded")},
            "differ_examples": shown}


@click.group(context_settings=CONTEXT_SETTINGS)
def cli() -> None:
    """Rules that would predict cuBLAS plans beyond the recorded calls, measured on held-out calls."""


@cli.command("study", context_settings=CONTEXT_SETTINGS)
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the results here")
def study_cmd(gpus: tuple[str, ...], json_out: str | None) -> None:
    """Measure the rule families on held-out recorded calls of the shipped catalogs."""
    doc = {"method": (__doc__ or "").strip(), "seed": SEED, "studies": []}
    for g in gpus:
        s = study(g)
        doc["studies"].append(s)
        c, w, d, t = s["continuation"], s["continuation_weight_gradients"], s["dominance"], s["tree"]
        print(f"{g}: continuation over M {c['layers_wrong']} wrong of {c['layers_answered']} layer ranges answered "
              f"({c['calls_answered']:,} calls), over K (weight gradients) {w['layers_wrong']} wrong of "
              f"{w['layers_answered']}; dominance {d['calls_contradicting']:,} of {d['calls_checked']:,} "
              f"calls contradict it; tree {t['wrong']} wrong of {t['answered']} answered "
              f"({t['held_out_calls']} held out)")
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=1) + "\n")


@cli.command("check", context_settings=CONTEXT_SETTINGS)
@click.option("--gpu", required=True)
@click.option("--fresh", type=click.Path(exists=True, dir_okay=False), required=True,
              help="a catalog built from recordings beyond the shipped token counts")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the results here")
def check_cmd(gpu: str, fresh: str, json_out: str | None) -> None:
    """Compare the library's predictions with fresh recordings beyond the recorded token counts."""
    r = check(gpu, Path(fresh))
    print(f"{gpu}: {r['calls']:,} fresh calls: {r['predicted']:,} predicted, {r['differ']:,} of them differ; "
          f"{r['recorded']:,} answered from the recordings, {r['refused']:,} refused, {r['not_recorded']:,} not "
          f"recorded (the recorder failed)")
    if json_out:
        Path(json_out).write_text(json.dumps({"method": (__doc__ or "").strip(), **r}, indent=1) + "\n")


main = script_main(cli, "python -m tools.library.prediction_study")

if __name__ == "__main__":
    sys.exit(main())
