"""identify's solver queries: an input of one instruction on which two hypotheses differ, or a proof that none exists.

The query is ``domain(inputs) and out_1(inputs) != out_2(inputs)`` over one instruction's free bit
patterns (the same encoding as ``tcsmt discriminate``), asked in stages (:data:`STAGES`), each a
restriction of the inputs that often holds a separating input and is much easier to search:

``k1``           only product 0 non-zero (short, readable inputs: C, rounding, subnormals);
``uniform``      every product the same (a_i = a_0, b_i = b_0): the inputs that fill a block's carry
                 bits (n equal products of one sign), which local search finds in well under a second
                 where the full 32-product circuit takes minutes;
``k2``           only products 0 and 1 non-zero (alignment: two products of different exponents);
``tie``          four products of the first block (:func:`tie_ranges`): one at the top of the range that the
                 block result can hold, one near half a unit in the last place of the rounded block result
                 (a tie), two near the last bit of the alignment window, each product's exponent fixed to a
                 few values (signs and significands free).  A window that drops a bit, rounds or floors it
                 changes the block's result only where the bits it keeps lie on a rounding tie, which no
                 one or two products give on paths whose products are narrower than the accumulator (fp8 ->
                 fp16 with 15 extra bits: products 2^15, 2^4 and 2^-12 separate an exact window from
                 hopper's); with the exponents fixed the alignment shifts are constants, and bit-blasting
                 answers in seconds where the free 32-product circuit takes a minute or more;
``full``         all K products free: the only stage whose "unsat" proves the pair equal.

With ``--solver portfolio`` (machines with many cores) every stage runs at once, each in its own
process (:func:`tcsmt.solve.solvers.race`): the restricted ones with local search (``tie`` with bit-blasting),
the full one with bit-blasting and local search side by side; the first input found wins, and only
the full stage's "unsat" ends the race.

With the default solver (``auto``: ``staged`` where bitwuzla is installed) the restricted stages run
bitwuzla's local search only (they can only help by being satisfiable), except ``tie``, which runs
bit-blasting (the local search rarely finds a tie); the full stage runs the local search for a short
slice and then bit-blasting (:func:`tcsmt.solve.solvers.solve`).
"""
from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pysmt.fnode import FNode
from pysmt.shortcuts import BV, And, BVExtract, Equals, Not, Or

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.semantics import groups
from tcsmt.identify.space import Hypothesis, PathInfo
from tcsmt.solve.encode import Inputs, domain, make_inputs, output_term
from tcsmt.solve.solvers import Job, available, race, solve

SeparateStatus = Literal["sat", "unsat", "timeout"]
Row = tuple[list[int], list[int], int]
STAGES = ("k1", "uniform", "k2", "tie", "full")
SLICE = 2.0
"""Seconds at most for each restricted local-search stage (and at most a fifth of the pair's budget)."""
TIE_SLICE = 10.0
"""Seconds at most for the ``tie`` stage (and at most half of the pair's budget)."""
TIE_SLOTS = 4
"""Products the ``tie`` stage leaves non-zero."""
ExpSet = tuple[int, list[int]]
"""One ``tie`` slot: B's unbiased exponent (fixed) and the exponents A may take (all normal)."""


def tie_ranges(h1: Hypothesis, h2: Hypothesis) -> list[tuple[int, int]] | None:
    """The product exponents (lowest, highest) of the ``tie`` stage's four products, or None (no window).

    ``T`` is the highest product exponent whose block sum stays below the accumulator's overflow
    (``min(emax_a + emax_b, emax_acc - 1)``).  Product 1 lies within two binades below half a unit
    in the last place of a result of exponent ``T`` or ``T + 1`` (``T - fb - 2 .. T - fb``, ``fb`` the
    block result's fraction bits of either hypothesis); products 2 and 3 near the last bit of either
    window (``T - F - 2 .. T - F + 1``, ``F`` the window's fraction bits).  Every range is clipped to
    the products of normal inputs.
    """
    ps = [h1.params, h2.params]
    fa, fb = get_format(ps[0].in_fmt), get_format(ps[0].b_fmt or ps[0].in_fmt)
    acc = get_format(ps[0].acc_fmt)
    windows = [p.window_frac_bits for p in ps if p.window_frac_bits is not None]
    if not windows:
        return None
    lo_p, hi_p = fa.emin + fb.emin, fa.emax + fb.emax
    top = min(hi_p, acc.emax - 1)
    kept = [p.block_frac_bits or acc.frac_bits for p in ps]
    tail = (top - max(windows) - 2, top - min(windows) + 1)
    want = [(top, top), (top - max(kept) - 2, top - min(kept)), tail, tail]

    def clip(lo: int, hi: int) -> tuple[int, int]:
        lo, hi = min(max(lo, lo_p), hi_p), min(max(hi, lo_p), hi_p)
        return lo, max(lo, hi)

    return [clip(lo, hi) for lo, hi in want]


def exponent_sets(fa: Format, fb: Format, lo: int, hi: int) -> ExpSet:
    """B's exponent and A's exponents whose sums cover most of ``lo .. hi`` (normal values only)."""
    def cover(eb: int) -> tuple[int, int]:
        n = len(range(max(lo - eb, fa.emin), min(hi - eb, fa.emax) + 1))
        return n, -abs(2 * eb - (fb.emin + fb.emax))

    eb = max(range(fb.emin, fb.emax + 1), key=cover)
    return eb, list(range(max(lo - eb, fa.emin), min(hi - eb, fa.emax) + 1))


def _default_solver(solver: str) -> str:
    return "staged" if solver == "auto" and available("bitwuzla") else solver


class Separator:
    """Solver queries on one path: an input where two hypotheses differ, or a proof that none exists."""

    def __init__(self, path: PathInfo, solver: str = "auto", timeout: float = 60.0, readable: bool = True,
                 readable_budget: float = 10.0):
        self.path = path
        self.solver = _default_solver(solver)
        self.timeout = timeout
        self.readable = readable
        self.readable_budget = readable_budget
        self.inp: Inputs = make_inputs(path.in_fmt, path.c_fmt, path.instr_k, prefix="ident_")
        self._terms: dict[tuple, FNode] = {}
        self._dom = domain(self.inp)
        self._pads: dict[int, FNode] = {}
        self._syms = {n: self.inp.symbol_of(n) for n in self.inp.names}
        K = self.inp.K
        self._same = {self._syms[f"{x}{i}"]: self._syms[f"{x}0"] for i in range(1, K) for x in "ab"}

    def _term(self, h: Hypothesis) -> FNode:
        if h.key not in self._terms:
            self._terms[h.key] = output_term(h.params, self.inp)
        return self._terms[h.key]

    def _pad(self, k: int) -> FNode:
        """Products k..K-1 are +0 * +0."""
        if k not in self._pads:
            cons = []
            for i in range(k, self.inp.K):
                for n in (f"a{i}", f"b{i}"):
                    s = self.inp.symbol_of(n)
                    cons.append(Equals(s, BV(0, s.bv_width())))
            self._pads[k] = And(cons) if cons else And([])
        return self._pads[k]

    def stages(self) -> list[str]:
        """The stages asked, in order (a restriction is left out where it is the whole domain)."""
        K = self.inp.K
        out = ["k1"] if K > 1 else []
        if K > 2:
            out += ["uniform", "k2"]
        if K > TIE_SLOTS:
            out += ["tie"]
        return [*out, "full"]

    def k_list(self) -> list[int]:
        """The numbers of free products of the stages (uniform counts as K)."""
        return [int(s[1:]) if s.startswith("k") else TIE_SLOTS if s == "tie" else self.inp.K
                for s in self.stages()]

    def _field_is(self, name: str, fmt: Format, exps: list[int]) -> FNode:
        s = self._syms[name]
        field = BVExtract(s, fmt.frac_bits, fmt.frac_bits + fmt.exp_bits - 1)
        return Or([Equals(field, BV(e + fmt.bias, fmt.exp_bits)) for e in exps])

    def _tie(self, h1: Hypothesis, h2: Hypothesis) -> FNode | None:
        """The ``tie`` restriction for this pair: four products of h1's first block, exponents fixed to
        :func:`tie_ranges` (None: no window, or an operand format this stage does not split)."""
        ranges = tie_ranges(h1, h2)
        p = h1.params
        if ranges is None or p.in_fmt != self.path.in_fmt:
            return None
        fa, fb = get_format(p.in_fmt), get_format(p.b_fmt or p.in_fmt)
        if fa.specials == "e8m0" or fb.specials == "e8m0" or fa.storage_bits != fb.storage_bits:
            return None
        blocks = groups(self.inp.K, p)[0]
        slots = [k for blk in blocks for k in blk][:TIE_SLOTS]
        cons = []
        for i in range(self.inp.K):
            if i not in slots:
                cons += [Equals(self._syms[n], BV(0, self._syms[n].bv_width())) for n in (f"a{i}", f"b{i}")]
        for i, (lo, hi) in zip(slots, ranges):
            eb, eas = exponent_sets(fa, fb, lo, hi)
            cons += [self._field_is(f"a{i}", fa, eas), self._field_is(f"b{i}", fb, [eb])]
        return And(cons)

    def _query(self, stage: str, differ: FNode, tie: FNode | None = None) -> FNode:
        if stage == "tie":
            assert tie is not None
            return And(self._dom, tie, differ)
        if stage == "uniform":
            return And(self._dom, differ).substitute(self._same)
        if stage.startswith("k"):
            return And(self._dom, self._pad(int(stage[1:])), differ)
        return And(self._dom, differ)

    def _row(self, stage: str, model: dict[str, int]) -> Row:
        K = self.inp.K
        if stage == "uniform":
            return [model["a0"]] * K, [model["b0"]] * K, model["c"]
        return [model[f"a{i}"] for i in range(K)], [model[f"b{i}"] for i in range(K)], model["c"]

    def separate(self, h1: Hypothesis, h2: Hypothesis, budget: float | None = None,
                 deadline: float | None = None) -> tuple[SeparateStatus, Row | None, int, float]:
        """("sat", input, k, seconds) | ("unsat", None, K, s) | ("timeout", None, k, s).

        The restricted stages come first; each gets at most :data:`SLICE` seconds and a fifth of ``budget`` (default: the
        separator's timeout).  Only "unsat" with all K products free proves the two hypotheses
        equivalent on the instruction.  ``k`` is the number of free products of the answering stage.
        """
        t0 = time.perf_counter()
        budget = self.timeout if budget is None else budget
        differ = Not(Equals(self._term(h1), self._term(h2)))
        if differ.is_false():  # the same circuit (pysmt shares equal terms)
            return "unsat", None, self.inp.K, time.perf_counter() - t0
        if self.solver == "portfolio" and available("bitwuzla"):
            return self._race(h1, h2, differ, budget, deadline, t0)
        for stage, k in zip(self.stages(), self.k_list()):
            left = budget - (time.perf_counter() - t0)
            if deadline is not None:
                left = min(left, deadline - time.time())
            if left <= 0.2:
                return "timeout", None, k, time.perf_counter() - t0
            full = stage == "full"
            tie = self._tie(h1, h2) if stage == "tie" else None
            if stage == "tie" and tie is None:
                continue
            query = self._query(stage, differ, tie)
            solver = self.solver
            limit = left if full else min(left, budget / 5, SLICE)
            if stage == "tie":
                limit = min(left, budget / 2, TIE_SLICE)
                if solver in ("staged", "portfolio") and available("bitwuzla"):
                    solver = "bitwuzla"  # bit-blasting: the local search rarely lands on a tie
            elif not full and solver == "staged":
                solver = "bitwuzla-prop"  # a restriction helps only when satisfiable
            ans = solve(query, self._syms, solver, limit)
            if ans.status == "unsat":
                if full:
                    return "unsat", None, k, time.perf_counter() - t0
                continue
            if ans.status != "sat":
                if full:
                    return "timeout", None, k, time.perf_counter() - t0
                continue
            model = ans.model
            if self.readable and stage != "uniform":
                from tcsmt.solve.discriminate import minimize_model

                spare = budget - (time.perf_counter() - t0)
                model = minimize_model(query, self.inp, model, min(self.readable_budget, max(1.0, spare)),
                                       self.solver)
            return "sat", self._row(stage, model), k, time.perf_counter() - t0
        return "timeout", None, self.inp.K, time.perf_counter() - t0

    def _race(self, h1: Hypothesis, h2: Hypothesis, differ: FNode, budget: float, deadline: float | None,
              t0: float) -> tuple[SeparateStatus, Row | None, int, float]:
        """Every stage side by side (``portfolio``): the first input found, or the full stage's proof."""
        left = budget - (time.perf_counter() - t0)
        if deadline is not None:
            left = min(left, deadline - time.time())
        if left <= 0.2:
            return "timeout", None, self.inp.K, time.perf_counter() - t0
        ks = dict(zip(self.stages(), self.k_list()))
        jobs: list[Job] = []
        for stage in self.stages():
            if stage == "full":
                q = self._query(stage, differ)
                jobs += [("full", q, "bitwuzla", left), ("full-local", q, "bitwuzla-prop", left)]
            elif stage == "tie":
                tie = self._tie(h1, h2)
                if tie is not None:
                    jobs.append((stage, self._query(stage, differ, tie), "bitwuzla", left))
            else:
                jobs.append((stage, self._query(stage, differ), "bitwuzla-prop", min(left, max(SLICE, budget / 2))))
        label, ans = race(jobs, self._syms, left, proofs={"full"})
        stage = "full" if label in (None, "full-local") else label
        k = ks[stage]
        if ans.status == "unsat":
            return "unsat", None, k, time.perf_counter() - t0
        if ans.status != "sat":
            return "timeout", None, k, time.perf_counter() - t0
        model = ans.model
        if self.readable and stage != "uniform":
            from tcsmt.solve.discriminate import minimize_model

            query = next(q for lab, q, _, _ in jobs if lab == label)
            spare = budget - (time.perf_counter() - t0)
            model = minimize_model(query, self.inp, model, min(self.readable_budget, max(1.0, spare)), "staged")
        return "sat", self._row(stage, model), k, time.perf_counter() - t0


def split_score(outputs: np.ndarray) -> float:
    """Expected number of survivors if the device's output is one of the survivors' (sum n_i^2 / N)."""
    _, counts = np.unique(outputs, return_counts=True)
    return float((counts.astype(float) ** 2).sum() / max(1, outputs.size))
