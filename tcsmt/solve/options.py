"""``--solver``: the solver option of every command that asks a solver, written once.

It lives beside the solvers (:mod:`tcsmt.solve.solvers` names them) rather than with the other option types
(:mod:`tcsmt.io.options`), which scripts on a GPU host without pysmt also use.
"""
from __future__ import annotations

from collections.abc import Callable

import click

from tcsmt.solve.solvers import SOLVERS

SOLVER_HELP = ("SMT solver; auto = bitwuzla if installed, else z3 (identify: staged); staged = bitwuzla's local search "
               "for a short slice, then bit-blasting; bitwuzla-prop = local search only (finds inputs, proves "
               "nothing); portfolio = every installed engine, first answer wins")


def solver_option() -> Callable:
    """``--solver``, written once for every command that asks a solver."""
    return click.option("--solver", default="auto", show_default=True, type=click.Choice(list(SOLVERS)),
                        help=SOLVER_HELP)
