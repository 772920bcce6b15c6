"""Verify fp32 emulation on fp16 tensor cores: bulk statistics (simulator), worst cases and proofs (SMT).

The schemes themselves are defined once in :mod:`tcsmt.verify.schemes`.  This module is the facade
of the verify layer; each concern has its own module:

* :mod:`tcsmt.verify.domain`: the input domain ``LO..HI``;
* :mod:`tcsmt.verify.evaluate`: the schemes on numpy arrays and their exact errors;
* :mod:`tcsmt.verify.smt`: SMT encodings (free inputs, scheme results, exact error terms);
* :mod:`tcsmt.verify.results`: result records and the simulator replay of solver inputs;
* :mod:`tcsmt.verify.search`: prove a bound, search the worst case;
* :mod:`tcsmt.verify.compare`: compare two schemes (simulator search, proofs of equal results, solver);
* :mod:`tcsmt.verify.lemmas`: small solver lemmas (split constants, tensor-core chains);
* :mod:`tcsmt.verify.stats`: statistics on random inputs and their plot.
"""
from __future__ import annotations

from tcsmt.verify.compare import compare
from tcsmt.verify.domain import DEFAULT_RANGE, Domain, parse_range
from tcsmt.verify.evaluate import (
    NB,
    abs_products,
    error_of,
    errors_fp64,
    exact_dot,
    fp16_paths,
    model_for,
    params_for,
    random_inputs,
    simulate_scheme,
)
from tcsmt.verify.results import BoundResult, CompareResult, Query, Witness, WorstResult, replay
from tcsmt.verify.schemes import ALGOS
from tcsmt.verify.search import check_eps, prove_bound, search_worst
from tcsmt.verify.smt import SB, SmtProblem, error_terms, exceeds, fp32_on_grid, make_problem, output_pattern, scheme_term
from tcsmt.verify.stats import Stats, plot_available, stats, write_plot

DEFAULT_K = 2
COMPARE_RANGES = ("2^-36..2^-14", "2^-14..2^14", "1..2")

__all__ = [
    "ALGOS", "COMPARE_RANGES", "DEFAULT_K", "DEFAULT_RANGE", "NB", "SB", "BoundResult", "CompareResult", "Domain",
    "Query", "SmtProblem", "Stats", "Witness", "WorstResult", "abs_products", "check_eps", "compare", "error_of",
    "error_terms", "errors_fp64", "exact_dot", "exceeds", "fp16_paths", "fp32_on_grid", "make_problem", "model_for",
    "output_pattern", "params_for", "parse_range", "plot_available", "prove_bound", "random_inputs", "replay",
    "scheme_term", "search_worst", "simulate_scheme", "stats", "write_plot",
]
