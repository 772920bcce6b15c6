"""Shared helpers for the Core test suite: exact values, one-row simulation, exact rounding."""
from __future__ import annotations

import functools
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tcsmt import resolve, simulate
from tcsmt.arith.formats import get_format
from tcsmt.arith.values import parse_value
from tcsmt.io.load import json_bytes

REPO = Path(__file__).resolve().parent.parent
# the scalar model lives in benchmarks/ (it doubles as the benchmark's baseline)
sys.path.insert(0, str(REPO / "benchmarks"))
# the developers' tools (tools/, not installed) are imported by their tests as tools.<folder>.<module>
sys.path.insert(0, str(REPO))


# the real-GPU vectors (BSD-2, see LICENSE there), committed so that a fresh clone checks them
HW_DIR = REPO / "tests" / "data" / "hardware_vectors"
EVIDENCE = REPO / "evidence"


@functools.cache
def _evidence_bytes(name: str) -> bytes:
    return json_bytes(EVIDENCE / name, "evidence file")


def evidence_json(name: str) -> Any:
    """The committed result file ``evidence/NAME`` (``.json``, or ``.json.gz`` through the package's loader), parsed
    anew on every call (a test may change what it gets); its text is read and decompressed once per worker (the
    two recorded plan files are 10.5 MB of JSON each, read by a dozen tests)."""
    return json.loads(_evidence_bytes(name))


def sweep_sample(cases: list[Any], keep: int = 3) -> list[Any]:
    """A sweep's ``pytest.param`` cases split between the default run and the slow tier (CI time): the first case
    of each family (the id up to its first ``/``: an architecture or a named reference) and every case whose id's
    CRC-32 is 0 mod ``keep`` run by default; the others are marked ``slow`` (``pytest -m slow`` runs them), so the
    two runs together cover the whole sweep, and the default sample is the same on every run."""
    import zlib

    out, seen = [], set()
    for c in cases:
        family = str(c.id).split("/")[0]
        first = family not in seen
        seen.add(family)
        if first or zlib.crc32(str(c.id).encode()) % keep == 0:
            out.append(c)
        else:
            out.append(pytest.param(*c.values, id=c.id, marks=[*c.marks, pytest.mark.slow]))
    return out


def V(text: str) -> Fraction:
    """An exact value written as the papers write it (``1-2^-24``)."""
    return parse_value(text)


def bits_of(fmt: str, values) -> np.ndarray:
    f = get_format(fmt)
    return np.array([f.from_fraction(Fraction(v) if not isinstance(v, float) else v) for v in values], dtype=f.dtype)


def dot1(arch: str, a, b, c, in_fmt: str, out_fmt: str, instr: str | None = None) -> Fraction | float:
    """One dot product a.b + c (exact values) through model ``arch``; the exact result value."""
    p = resolve(arch, in_fmt, out_fmt, instr)
    ab = bits_of(p.in_fmt, a)[None, :]
    bb = bits_of(p.in_fmt, b)[None, :]
    cb = bits_of(p.c_fmt, [c])
    d = simulate(arch, ab, bb, cb, in_fmt, out_fmt, instr)
    return get_format(p.out_fmt).to_fraction(int(d[0]))


def round_fraction(v: Fraction, fmt: str, mode: str = "rne") -> Fraction | float:
    """v rounded to ``fmt`` (IEEE rounding, subnormals kept, overflow to inf for rne)."""
    f = get_format(fmt)
    if v == 0:
        return Fraction(0)
    neg = v < 0
    m = -v if neg else v
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    e = max(e, f.emin)
    ulp = Fraction(2) ** (e - f.frac_bits)
    q, r = divmod(m, ulp)
    q = int(q)
    if r:
        if mode == "rne":
            if r > ulp / 2 or (r == ulp / 2 and q % 2):
                q += 1
        elif (mode == "ru" and not neg) or (mode == "rd" and neg):
            q += 1
    out = q * ulp
    if out > f.max_finite:
        if mode == "rne" or (mode == "ru" and not neg) or (mode == "rd" and neg):
            return float("-inf") if neg else float("inf")
        out = f.max_finite
    return -out if neg else out


@pytest.fixture(scope="session")
def hw_dir() -> Path:
    """tests/data/hardware_vectors: the real-GPU vectors (Khattak & Mikaitis, BSD-2; README.md and LICENSE there)."""
    return HW_DIR
