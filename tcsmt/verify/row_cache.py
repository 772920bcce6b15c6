"""Rows and scheme results that the comparisons of one architecture on one domain share (``tcsmt verify --compare``).

The simulator search of :func:`tcsmt.verify.compare.search_rows` starts every comparison on the same fixed
candidate rows, and its rounding rounds draw each row family from its own seeded stream: round i of a family is
the same rows for every pair of schemes (only the local search between them depends on the pair).  A
:class:`RowCache` keeps those rows, and each scheme's results on them, so that a run over many pairs (both
directions of ``--compare A B``, every pair of ``--compare all``) simulates each scheme on them once.  The results
are the deterministic simulator's bit patterns: sharing them changes no answer, only the time.

A cache belongs to one architecture and one domain (the CLI makes a new one for each), which bounds its memory:
the rows of every round that ran, and one uint32 per row for each scheme simulated on them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from tcsmt.arith.params import ModelParams
from tcsmt.verify.evaluate import simulate_scheme

Rows = tuple[np.ndarray, np.ndarray]


@dataclass
class RowCache:
    """Named row sets (made once) and every scheme's results on them (simulated once)."""

    rows: dict[tuple, Rows] = field(default_factory=dict)
    results: dict[tuple, np.ndarray] = field(default_factory=dict)
    streams: dict[tuple, np.random.Generator] = field(default_factory=dict)
    """the generator of each row family whose rounds are drawn in order (its state after the last round drawn)"""
    drawn: dict[tuple, int] = field(default_factory=dict)
    """rounds drawn so far, by family"""

    def get(self, key: tuple, make: Callable[[], Rows]) -> tuple:
        """``key``, after making its rows by ``make()`` the first time (read-only arrays: every user shares them)."""
        if key not in self.rows:
            a, b = make()
            a.flags.writeable = b.flags.writeable = False
            self.rows[key] = (a, b)
        return key

    def round_rows(self, family: tuple, i: int, seed: int, make: Callable[[np.random.Generator], Rows]) -> tuple:
        """The key of round ``i`` of a row family (``family`` names it with everything its rows depend on, such as
        K and the domain) drawn from its own stream ``default_rng(seed)`` by ``make(rng)``: the rows the family
        gives when its rounds 0..i are drawn in order, as :func:`~tcsmt.verify.compare.search_rows` does."""
        name = (family, seed)
        if name not in self.streams:
            self.streams[name] = np.random.default_rng(seed)
            self.drawn[name] = 0
        while self.drawn[name] <= i:
            self.get(("round", name, self.drawn[name]), partial(make, self.streams[name]))
            self.drawn[name] += 1
        return ("round", name, i)

    def simulate(self, algo: str, p: ModelParams | None, key: tuple) -> np.ndarray:
        """``algo``'s results (fp32 patterns) on the rows named ``key``, simulated once."""
        rk = (algo, p, key)
        if rk not in self.results:
            a, b = self.rows[key]
            d = simulate_scheme(algo, p, a, b)
            d.flags.writeable = False
            self.results[rk] = d
        return self.results[rk]
