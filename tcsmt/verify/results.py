"""Results of ``tcsmt verify``'s solver questions, and the replay of every solver input in the simulator."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from tcsmt.arith.params import ModelParams
from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import error_of, exact_dot, simulate_scheme
from tcsmt.verify.smt import SmtProblem


@dataclass
class Witness:
    """One input (fp32 patterns) with each algorithm's result and exact error."""

    a: list[int]
    b: list[int]
    exact: Fraction
    results: dict[str, int]
    errors: dict[str, Fraction | float]


def replay(algos: Sequence[str], p: ModelParams | Mapping[str, ModelParams | None] | None, a: list[int],
           b: list[int], relative: bool) -> Witness:
    """Each algorithm's result and exact error on one input, from the simulator (``p``: one model for
    all, or each algorithm's own)."""
    av = np.array([a], dtype=np.uint32)
    bv = np.array([b], dtype=np.uint32)
    res, errs = {}, {}
    for algo in algos:
        d = int(simulate_scheme(algo, p[algo] if isinstance(p, Mapping) else p, av, bv)[0])
        res[algo] = d
        errs[algo] = error_of(d, a, b, relative)
    return Witness(list(a), list(b), exact_dot(a, b), res, errs)


def _model_inputs(prob: SmtProblem, model: dict[str, int]) -> tuple[list[int], list[int]]:
    return [model[f"a{i}"] for i in range(prob.K)], [model[f"b{i}"] for i in range(prob.K)]


@dataclass
class Query:
    """One solver call: the threshold asked, the answer and its time."""

    threshold: Fraction
    status: str
    seconds: float


@dataclass
class BoundResult:
    """--bound: proven (unsat), counterexample (sat, replayed) or timeout."""

    algo: str
    arch: str
    K: int
    dom: Domain
    eps: Fraction
    relative: bool
    status: str
    witness: Witness | None
    seconds: float
    solver: str = ""


@dataclass
class WorstResult:
    """Worst-case search: the largest error found (replayed) and the smallest proven bound."""

    algo: str
    arch: str
    K: int
    dom: Domain
    relative: bool
    witness: Witness | None
    bound: Fraction | None
    queries: list[Query] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""
    proof: Any = None
    """the composed proof (:class:`tcsmt.verify.proof.Proof`) tried before the solver search, if any"""
    unbounded: bool = False
    """an input reaches relative error UNBOUNDED or more (:mod:`tcsmt.verify.search`): an answer, no bound below it"""
    bounded_k: tuple[int, Fraction] | None = None
    """where unbounded: the largest smaller K with a composed bound below UNBOUNDED, and that bound"""

    @property
    def found(self) -> Fraction | float | None:
        return None if self.witness is None else self.witness.errors[self.algo]


@dataclass
class CompareResult:
    """--compare: an input where algo1 is less accurate than algo2, or a proof that none exists."""

    algo1: str
    algo2: str
    arch: str
    K: int
    dom: Domain
    status: str  # found, impossible, timeout
    witness: Witness | None
    seconds: float
    how: str = ""
    """what answered: the simulator search, the solver's proof that the results are equal, or the comparison query"""
    queries: int = 0
    """solver queries asked"""
    lemmas: list = field(default_factory=list)
    """the proof's solver queries (``chain_equal.LemmaLine``: statement, answer, seconds), for ``-v``"""
