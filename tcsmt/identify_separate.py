"""identify's solver queries: an input of one instruction on which two hypotheses differ, or a proof that none exists.

The query is ``domain(inputs) and out_1(inputs) != out_2(inputs)`` over one instruction's free bit
patterns (the same encoding as ``tcsmt discriminate``), asked in stages (:data:`STAGES`), each a
restriction of the inputs that often holds a separating input and is much easier to search:

``k1``           only product 0 non-zero (short, readable inputs: C, rounding, subnormals);
``uniform``      every product the same (a_i = a_0, b_i = b_0): the inputs that fill a block's carry
                 bits (n equal products of one sign), which local search finds in well under a second
                 where the full 32-product circuit takes minutes;
``k2``           only products 0 and 1 non-zero (alignment: two products of different exponents);
``full``         all K products free: the only stage whose "unsat" proves the pair equal.

With the default solver (``auto``: ``staged`` where bitwuzla is installed) the restricted stages run
bitwuzla's local search only (they can only help by being satisfiable), and the full stage runs the
local search for a short slice and then bit-blasting (:func:`tcsmt.solvers.solve`).
"""
from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pysmt.fnode import FNode
from pysmt.shortcuts import BV, And, Equals, Not

from .identify_space import Hypothesis, PathInfo
from .smt_encode import Inputs, domain, make_inputs, output_term
from .solvers import available, solve

SeparateStatus = Literal["sat", "unsat", "timeout"]
Row = tuple[list[int], list[int], int]
STAGES = ("k1", "uniform", "k2", "full")
SLICE = 2.0
"""Seconds at most for each restricted stage (and at most a fifth of the pair's budget)."""


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
        return [*out, "full"]

    def k_list(self) -> list[int]:
        """The numbers of free products of the stages (uniform counts as K)."""
        return [int(s[1:]) if s.startswith("k") else self.inp.K for s in self.stages()]

    def _query(self, stage: str, differ: FNode) -> FNode:
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
        for stage, k in zip(self.stages(), self.k_list()):
            left = budget - (time.perf_counter() - t0)
            if deadline is not None:
                left = min(left, deadline - time.time())
            if left <= 0.2:
                return "timeout", None, k, time.perf_counter() - t0
            full = stage == "full"
            query = self._query(stage, differ)
            solver = self.solver
            if not full and solver == "staged":
                solver = "bitwuzla-prop"  # a restriction helps only when satisfiable
            ans = solve(query, self._syms, solver, left if full else min(left, budget / 5, SLICE))
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
                from .discriminate import minimize_model

                spare = budget - (time.perf_counter() - t0)
                model = minimize_model(query, self.inp, model, min(self.readable_budget, max(1.0, spare)),
                                       self.solver)
            return "sat", self._row(stage, model), k, time.perf_counter() - t0
        return "timeout", None, self.inp.K, time.perf_counter() - t0


def split_score(outputs: np.ndarray) -> float:
    """Expected number of survivors if the device's output is one of the survivors' (sum n_i^2 / N)."""
    _, counts = np.unique(outputs, return_counts=True)
    return float((counts.astype(float) ** 2).sum() / max(1, outputs.size))
