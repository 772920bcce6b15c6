"""``tcsmt verify --compare all``: every pair of schemes on one architecture, in one process.

The pairs are those of :data:`tcsmt.verify.schemes.ALGOS` whose two schemes both run on the architecture (plain fp32
FMAs everywhere; Markidis and Ootomo-Yokota on its fp16 path; the bf16 and tf32 vendor schemes where it has that
path), in ALGOS order; each pair is compared in both directions on each domain by
:func:`tcsmt.verify.compare.compare`, with the same stages, the same rows and the same per-query time limit as
``--compare A B``.  What one process adds is sharing: the candidate rows, the rounding rounds and every scheme's
results on them (:mod:`tcsmt.verify.row_cache`, one cache per domain), the proofs of equal results
(:data:`tcsmt.verify.compare.EQUAL`), and the start-up of a process.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable

from tcsmt.arith.registry import REFERENCES, find_arch, split_spec
from tcsmt.errors import TcsmtError
from tcsmt.verify.compare import compare
from tcsmt.verify.domain import Domain
from tcsmt.verify.evaluate import fp16_paths, model_for
from tcsmt.verify.results import CompareResult
from tcsmt.verify.row_cache import RowCache
from tcsmt.verify.schemes import ALGOS, input_format


def schemes_on(arch: str) -> list[str]:
    """The schemes of ALGOS that run on the model spec ``arch`` (ALGOS order): those of every format the spec's
    architecture has a path for (a reference semantics such as ``ieee-fma32``: every format it can be built for).
    A spec without an fp16 -> fp32 path is a user error (TcsmtError, as for ``--compare A B``); so is one that names
    its bf16 or tf32 path wrongly (an unknown hypothesis there)."""
    model_for(arch, "fp16")  # raises for an unknown spec or one without the fp16 path
    base = split_spec(arch)[0].strip().lower()
    fmts = {"fp16"}
    for f in ("bf16", "tf32"):
        if base in REFERENCES:
            try:
                model_for(arch, f)
            except TcsmtError:
                continue
            fmts.add(f)
        elif find_arch(base).name in dict(fp16_paths(f)):
            model_for(arch, f)  # the path exists: a wrong hypothesis or parameter for it is the user's error
            fmts.add(f)
    return [a for a in ALGOS if a == "fp32" or input_format(a) in fmts]


def scheme_pairs(arch: str) -> list[tuple[str, str]]:
    """Every pair of schemes that both run on ``arch`` (:func:`schemes_on`), each once, in ALGOS order."""
    return list(itertools.combinations(schemes_on(arch), 2))


def compare_pairs(pairs: list[tuple[str, str]], arch: str, K: int, dom: Domain, solver: str, timeout: float,
                  done: Callable[[CompareResult], None] = lambda r: None) -> list[CompareResult]:
    """Both directions of every pair on one domain (A worse than B, then B worse than A), sharing one
    :class:`~tcsmt.verify.row_cache.RowCache`; ``done`` is told each answer as it comes."""
    cache = RowCache()
    out = []
    for x, y in pairs:
        for p, q in ((x, y), (y, x)):
            r = compare(p, q, arch, K, dom, solver, timeout, cache=cache)
            done(r)
            out.append(r)
    return out
