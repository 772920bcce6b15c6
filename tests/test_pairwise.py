"""The pairwise reduction (``pairwise-rne``, ``cdna2:pairwise``) keeps IEEE infinities.

Each product and each partial sum is rounded to fp32 with RNE (IEEE 754-2019 4.3.1); a partial that
overflows is +-inf (7.4), and inf + finite = inf, inf + (-inf) = NaN (6.1, 7.2).  The reduction once
returned 2^100 for 2^100*2^100 + 2^100*1: the overflowed product was read back with
significand 0 and its infinity dropped.
"""
from __future__ import annotations

import math

import pytest
from conftest import V, dot1

P100 = V("2^100")


@pytest.mark.parametrize("model", ["pairwise-rne", "cdna2:pairwise"])
def test_overflowed_product_stays_infinite(model):
    assert dot1(model, [P100, P100], [P100, 1], 0, "bf16", "fp32") == math.inf
    assert dot1(model, [P100, P100], [-P100, 1], 0, "bf16", "fp32") == -math.inf


@pytest.mark.parametrize("model", ["pairwise-rne", "cdna2:pairwise"])
def test_opposite_overflows_give_nan(model):
    d = dot1(model, [P100, P100, 1, 1], [P100, -P100, 1, 1], 0, "bf16", "fp32")
    assert isinstance(d, float) and math.isnan(d)


def test_overflow_of_a_partial_sum():
    """Two finite fp32 products whose pairwise sum overflows fp32 (2^127 + 2^127 = 2^128)."""
    assert dot1("pairwise-rne", [V("2^64"), V("2^64")], [V("2^63"), V("2^63")], 0, "bf16", "fp32") == math.inf
