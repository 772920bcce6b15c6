"""Batch invariance of one layer's GEMM: which token counts give a row the same output bits.

A layer's forward product (``linear``: M x N x K, M = the token count) and its input gradient (``mm``:
M x K x N) run one cuBLAS plan per token count.  Each output (i, j) depends only on row i of A, column j
of B (and the bias, C and scales at that position) and on the plan's arithmetic: the per-row K-chain, the
split-K count S and its slices, the reduction, the epilogue (:meth:`Plan.arithmetic`).  So the same row
gives the same bits at two token counts exactly where their plans compute the same function of a row and
a column, and a pair of plans that do not is shown by one row and one column whose outputs differ.

:func:`study` reads the recorded plans of every token count in a range (:func:`tcsmt.library.lookup.answers_over`:
plan tables, then catalogs; a count without a recorded plan refuses the whole range, naming ``tcsmt record``),
groups the counts by what decides the bits (:func:`tcsmt.library.discriminate.effective`: the chain, the slices
as lists of k, the reduction where S > 1, the epilogue; equal :meth:`Plan.arithmetic` implies equal), and
reports the runs of counts of one group, the counts where the group changes (with the plans' difference: S,
slices, grain, reduction, K-chain, epilogue, kernel class) and, through :func:`witness`, one row and one
column for a pair of groups whose outputs differ, found by the library-level discriminate
(:func:`tcsmt.library.discriminate.separate`) and evaluated under both plans by the exact simulator.

Only token counts that vary M are studied: the weight gradient's token count is its reduction length K, so
its rows at two counts are different sums and the question does not arise there.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from typing import Any

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.library.checks import make_call
from tcsmt.library.discriminate import effective, separate
from tcsmt.library.lookup import Answer, answers_over, record_spec
from tcsmt.library.plans import Call, Plan, plans_dir

PRODUCTS = ("forward", "input-grad")
"""The products of a layer whose token count is M: the forward product and the input gradient."""
LAYOUTS = ("linear", "conv1d")
"""How a layer stores its weight: ``linear`` (nn.Linear, (N, K), y = x @ W.T + b) or ``conv1d`` (transformers'
Conv1D of GPT-2, (K, N), y = addmm(b, x, W))."""
LAYERS_FILE = "model_layers.json"


# ------------------------------------------------------------------ layers
@cache
def _layers_doc(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read the model-layer list {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list):
        raise TcsmtError(f"{path} is not a model-layer list (a 'layers' list of model, layer, N, K, bias, layout)")
    return doc


def model_layers(path: str | None = None) -> dict[str, Any]:
    """The model-layer list (``models/library/model_layers.json``: each model's config source and its linear
    layers' N, K, bias and layout)."""
    return _layers_doc(str(path or plans_dir() / LAYERS_FILE))


def _names(layer: str) -> set[str]:
    """The names a layer answers to: its full name, the name before `` (``, each of ``a / b``, and each of those
    after its last dot."""
    base = layer.split(" (")[0].strip()
    names = {x.strip().lower() for x in (layer, base, *base.split(" / "))}
    return names | {x.rsplit(".", 1)[-1] for x in names}


def find_layer(model: str, layer: str, path: str | None = None) -> dict[str, Any]:
    """One layer of the list by model and layer name; a TcsmtError lists the names there are."""
    rows = model_layers(path)["layers"]
    mine = [r for r in rows if str(r["model"]).lower() == model.lower()]
    if not mine:
        known = sorted({str(r["model"]) for r in rows})
        raise TcsmtError(f"unknown model {model!r} (the model-layer list has: {', '.join(known)})")
    hit = [r for r in mine if layer.strip().lower() in _names(str(r["layer"]))]
    if len(hit) != 1:
        raise TcsmtError(f"{'no' if not hit else 'more than one'} layer {layer!r} in {model} (layers: "
                         f"{'; '.join(str(r['layer']) for r in mine)})")
    return dict(hit[0])


def layer_call(N: int, K: int, dtype: str, *, product: str = "forward", bias: bool = False,
               layout: str = "linear", settings: str = "default", M: int = 1) -> Call:
    """The library call of one product of a layer of N outputs and K inputs at token count M.

    forward: ``linear`` (M, N, K) with the layer's bias (``conv1d``: ``addmm(bias, x, W)``, or ``mm`` without a
    bias); input-grad: ``mm`` (M, K, N) of the output gradient and the weight as stored (``b_t``: the transposed
    view of a Conv1D weight)."""
    if product not in PRODUCTS:
        raise TcsmtError(f"product must be one of {', '.join(PRODUCTS)}, not {product!r} (the weight gradient's "
                         "token count is its reduction length K, so its rows do not compare across counts)")
    if layout not in LAYOUTS:
        raise TcsmtError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    if product == "input-grad":
        return make_call("mm", M, K, N, a_dtype=dtype, b_t=layout == "conv1d", settings=settings)
    if layout == "conv1d":
        if bias:
            return make_call("addmm", M, N, K, a_dtype=dtype, beta=1.0, bias=True, settings=settings)
        return make_call("mm", M, N, K, a_dtype=dtype, settings=settings)
    return make_call("linear", M, N, K, a_dtype=dtype, bias=bias, settings=settings)


# ------------------------------------------------------------------ study
@dataclass
class PlanClass:
    """The token counts whose plans compute the same bits: ``plan`` is the plan of the first of them."""

    index: int
    plan: Plan
    first: int
    counts: int = 0
    kernels: dict[str, int] = field(default_factory=dict)
    """The kernel classes recorded among its counts, with how many counts each."""

    def summary(self) -> str:
        return plan_summary(self.plan)


@dataclass(frozen=True)
class Change:
    """At token count ``at`` the bits of a row change: plan class ``before`` (at ``at - 1``) gives way to ``after``."""

    at: int
    before: int
    after: int
    what: str


@dataclass
class Witness:
    """One row ``a`` of A and one column ``b`` of B (K bit patterns each; the bias/C/scale values at (0, 0) in
    ``extras``) whose output differs under the plans of classes ``pair``, at token counts ``counts``."""

    pair: tuple[int, int]
    counts: tuple[int, int]
    how: str
    a: np.ndarray
    b: np.ndarray
    extras: dict[str, np.ndarray]
    outputs: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        return {"classes": list(self.pair), "token_counts": list(self.counts), "how": self.how, "K": int(self.a.size),
                "a": _sparse(self.a), "b": _sparse(self.b),
                "extras": {k: [f"0x{int(x):x}" for x in np.asarray(v).reshape(-1)] for k, v in self.extras.items()},
                "outputs": [f"0x{o:x}" for o in self.outputs]}


def _sparse(x: np.ndarray) -> list[list[Any]]:
    """The nonzero patterns of a row as [k, "0x.."] pairs."""
    return [[int(k), f"0x{int(x[k]):x}"] for k in np.flatnonzero(x)]


def dense(pairs: list[list[Any]], K: int, dtype: Any) -> np.ndarray:
    """A row of K patterns from :func:`_sparse`'s pairs (zeros elsewhere)."""
    out = np.zeros(K, dtype=dtype)
    for k, v in pairs:
        out[int(k)] = int(str(v), 16)
    return out


@dataclass
class Study:
    """The plans of one call over a range of token counts, grouped by the bits they compute."""

    call: Call
    """The call at the first token count (M varies)."""
    gpu: str
    lo: int
    hi: int
    classes: list[PlanClass]
    runs: list[tuple[int, int, int]]
    """(first count, last count, class index) of each run of consecutive counts of one class."""
    changes: list[Change]
    sources: list[str]
    witnesses: dict[tuple[int, int], Witness | None] = field(default_factory=dict)
    """The pairs tried so far: a witness, or None where no separating input was found."""

    @property
    def invariant(self) -> bool:
        """One class over the whole range: every token count gives a row the same bits."""
        return len(self.classes) == 1

    def pairs(self, which: str = "all") -> list[tuple[int, int]]:
        """The class pairs to separate: ``all`` pairs, the ``adjacent`` ones (a change point's two sides), the
        pairs with the first count's class (``first``), or ``none``."""
        n = len(self.classes)
        if which == "all":
            return [(i, j) for i in range(n) for j in range(i + 1, n)]
        if which == "adjacent":
            return list(dict.fromkeys(tuple(sorted((c.before, c.after))) for c in self.changes))  # type: ignore[misc]
        if which == "first":
            return [(0, j) for j in range(1, n)]
        if which == "none":
            return []
        raise TcsmtError(f"witnesses: all, adjacent, first or none, not {which!r}")

    def class_at(self, m: int) -> int:
        for lo, hi, c in self.runs:
            if lo <= m <= hi:
                return c
        raise TcsmtError(f"token count {m} is outside {self.lo}..{self.hi}")

    def bits_change(self, i: int, j: int) -> bool | None:
        """True: a witness shows that classes i and j give different bits; None: not tried, or none found."""
        if i == j:
            return False
        w = self.witnesses.get((min(i, j), max(i, j)))
        return True if w is not None else None

    def to_json(self) -> dict[str, Any]:
        pend = [list(p) for p in self.pairs("all") if p not in self.witnesses]
        return {
            "call": self.call.label().replace(f" {self.call.M}x{self.call.N}x", f" Mx{self.call.N}x", 1), "call_spec": record_spec(self.call),
            "gpu": self.gpu, "token_counts": [self.lo, self.hi], "batch_invariant": self.invariant,
            "classes": [{"index": c.index, "first": c.first, "counts": c.counts, "plan": c.summary(),
                         "kernels": c.kernels, "describe": c.plan.describe()} for c in self.classes],
            "runs": [list(r) for r in self.runs],
            "changes": [{"at": c.at, "from": c.before, "to": c.after, "what": c.what} for c in self.changes],
            "witnesses": [w.to_json() if w is not None else {"classes": list(p), "found": False,
                                                               "why": "no separating input found (slice probes, "
                                                                      "reduction probes, 32 random rows)"}
                          for p, w in self.witnesses.items()],
            "pairs_not_tried": pend, "sources": self.sources}


def _compress(counts: list[int]) -> str:
    """1, 2, 3, 7 -> '1..3, 7'."""
    out, i = [], 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and counts[j + 1] == counts[j] + 1:
            j += 1
        out.append(str(counts[i]) if i == j else f"{counts[i]}..{counts[j]}")
        i = j + 1
    return ", ".join(out)


def _refuse(call: Call, gpu: str, refused: list[tuple[int, str]], lo: int, hi: int) -> TcsmtError:
    counts = [m for m, _ in refused]
    shown = _compress(counts)
    if len(shown) > 120:
        shown = shown[:shown.rfind(",", 0, 120)] + ", ..."
    first = refused[0][1]
    return TcsmtError(f"{len(counts)} of the {hi - lo + 1} token counts {lo}..{hi} have no recorded plan on {gpu} "
                      f"({shown}); the first: {first}")


def study(call: Call, gpu: str, lo: int, hi: int, *, plans_dirs: tuple[str, ...] | None = None,
          stamp: dict[str, Any] | None = None) -> Study:
    """The plans of ``call`` (its M replaced by each count) at token counts lo..hi on ``gpu``, grouped by the
    bits they compute; a TcsmtError naming ``tcsmt record`` where a count has no recorded plan."""
    if call.op not in ("mm", "addmm", "linear", "scaled_mm"):
        raise TcsmtError(f"{call.op}: batch invariance is studied for mm, addmm, linear and scaled_mm (M = tokens)")
    got = answers_over(call, gpu, lo, hi, plans_dirs=plans_dirs, stamp=stamp)
    refused = [(m, why) for m, a, why in got if a is None]
    if refused:
        raise _refuse(call, gpu, refused, lo, hi)
    by_arith: dict[tuple, int] = {}
    by_effect: dict[tuple, int] = {}
    classes: list[PlanClass] = []
    runs: list[tuple[int, int, int]] = []
    sources: dict[str, None] = {}
    for m, ans, _ in got:
        assert ans is not None
        plan = ans.plan
        key = plan.arithmetic()
        if key not in by_arith:
            eff = effective(plan)
            if eff not in by_effect:
                by_effect[eff] = len(classes)
                classes.append(PlanClass(len(classes), plan, m))
            by_arith[key] = by_effect[eff]
        c = by_arith[key]
        cls = classes[c]
        cls.counts += 1
        kern = _kernels(plan)
        cls.kernels[kern] = cls.kernels.get(kern, 0) + 1
        if runs and runs[-1][2] == c and runs[-1][1] == m - 1:
            runs[-1] = (runs[-1][0], m, c)
        else:
            runs.append((m, m, c))
        for s in _source_names(ans):
            sources[s] = None
    changes = [Change(b[0], a[2], b[2], plan_difference(classes[a[2]].plan, classes[b[2]].plan))
               for a, b in pairwise(runs)]
    first = classes[0].plan.call
    return Study(first, str(gpu).lower(), lo, hi, classes, runs, changes, list(sources))


def _source_names(ans: Answer) -> list[str]:
    if ans.kind == "recorded table":
        return [f"plan table {ans.plan.table}"]
    return [f"plan catalog {re.split('recorded in |predicted from ', e, maxsplit=1)[-1].split(':', 1)[0]}"
            for e in ans.evidence]


def witness(st: Study, i: int, j: int, *, seed: int = 0) -> Witness | None:
    """One row and one column whose output differs under the plans of classes i and j (each evaluated by the
    exact simulator at its own token count), or None where no construction separates them; kept in
    ``st.witnesses``."""
    pa, pb = st.classes[i].plan, st.classes[j].plan
    s = separate(pa, pb, seed=seed)
    w = None if s is None else Witness((i, j), (st.classes[i].first, st.classes[j].first), s.how, s.a, s.b,
                                       s.extras, (s.out_a, s.out_b))
    st.witnesses[(i, j)] = w
    return w


def invariance(call: Call, gpu: str, lo: int, hi: int, *, witnesses: str = "all", seed: int = 0,
               plans_dirs: tuple[str, ...] | None = None, stamp: dict[str, Any] | None = None,
               progress: Callable[[str], None] | None = None) -> Study:
    """:func:`study`, then a witness for each class pair of ``witnesses`` (:meth:`Study.pairs`)."""
    st = study(call, gpu, lo, hi, plans_dirs=plans_dirs, stamp=stamp)
    pairs = st.pairs(witnesses)
    for n, (i, j) in enumerate(pairs):
        w = witness(st, i, j, seed=seed)
        if progress is not None:
            progress(f"witness {n + 1} of {len(pairs)}: plans {i} and {j}: "
                     + ("found" if w is not None else "none found"))
    return st


# ------------------------------------------------------------------ plan differences
def _lengths(p: Plan) -> str:
    """The slice lengths of a plan for its K: '4 x 3584' or '3 x 3648 + 3392'."""
    sizes = [len(r) for r in p.slice_ranges()]
    parts: list[str] = []
    i = 0
    while i < len(sizes):
        j = i
        while j + 1 < len(sizes) and sizes[j + 1] == sizes[i]:
            j += 1
        parts.append(f"{j - i + 1} x {sizes[i]}" if j > i else str(sizes[i]))
        i = j + 1
    return " + ".join(parts)


def kernel_class(name: str) -> str:
    """A recorded kernel name without its template arguments (``gemv2T_kernel_val<int, ...>`` ->
    ``gemv2T_kernel_val``); the recorded classes (``family ...``, ``no split: ...``) as they are."""
    if name.startswith(("family ", "no split")):
        return name
    name = re.sub(r"^std::enable_if<[^>]*>::type ", "", name)
    return re.sub(r"^cutlass::Kernel2<", "", name).split("<")[0]


def _kernels(p: Plan) -> str:
    return ", ".join(dict.fromkeys(kernel_class(k) for k in p.kernels)) or "(not recorded)"


def plan_summary(p: Plan) -> str:
    """One line: S and the slices, the reduction, K tiles, segments, chain, epilogue, kernel class."""
    parts = [f"S = {p.split_k}"]
    if p.split_k > 1:
        parts.append(f"slices {_lengths(p)} (grain {p.grain}, {p.slices}, remainder {p.remainder}), reduce {p.reduce}")
    parts += [f"{label} {v}" for label, v in (("K tile", p.k_tile), ("segment", p.segment)) if v]
    parts.append(f"chain {p.chain_spec}")
    if p.in_round:
        parts.append(f"inputs {p.in_round}")
    if p.epilogue:
        parts.append(f"epilogue {'+'.join(p.epilogue)}")
    parts.append(f"kernels {_kernels(p)}")
    return "; ".join(parts)


def plan_difference(p: Plan, q: Plan) -> str:
    """What differs between two plans of one call's K, in the terms that decide the bits (then the kernels)."""
    out = []
    if p.split_k != q.split_k:
        out.append(f"S {p.split_k} -> {q.split_k}")
    if (p.split_k > 1 or q.split_k > 1) and _lengths(p) != _lengths(q):
        out.append(f"slices {_lengths(p)} -> {_lengths(q)}")
    for name in ("grain", "k_floor", "slices", "remainder", "reduce"):
        a, b = getattr(p, name), getattr(q, name)
        if p.split_k > 1 and q.split_k > 1 and a != b:
            out.append(f"{name} {a} -> {b}")
    for name, label in (("k_tile", "K tile"), ("segment", "segment")):
        if getattr(p, name) != getattr(q, name):
            out.append(f"{label} {getattr(p, name)} -> {getattr(q, name)}")
    if p.chain != q.chain:
        out.append(f"chain {p.chain_spec} -> {q.chain_spec}")
    if p.in_round != q.in_round:
        out.append(f"inputs {p.in_round or 'as given'} -> {q.in_round or 'as given'}")
    if p.epilogue != q.epilogue:
        out.append(f"epilogue {'+'.join(p.epilogue) or 'none'} -> {'+'.join(q.epilogue) or 'none'}")
    if _kernels(p) != _kernels(q):
        out.append(f"kernels {_kernels(p)} -> {_kernels(q)}")
    return "; ".join(out) or "(the same arithmetic)"


__all__ = ["LAYOUTS", "PRODUCTS", "Change", "PlanClass", "Study", "Witness", "dense", "find_layer", "invariance",
           "layer_call", "model_layers", "plan_difference", "plan_summary", "study", "witness"]
