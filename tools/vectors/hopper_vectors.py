"""Hand-built inputs for the Hopper questions (evidence/h100_hopper_questions.json; written to ``vectors/hopper/``).

``python -m tools.vectors.hopper_vectors OUTDIR`` writes one JSON file per question and input
format, in the shape ``tcsmt discriminate`` writes (in_fmt, out_fmt, models, inputs with hex a, b,
c), so ``tcsmt hwcheck FILE --instr mma|wgmma`` and ``python -m tcsmt.hwcheck.questions`` run them.
Every file is drawn from a fixed seed: rerunning the builder gives the same bits.  The questions:

zero_product  one factor of slot 0 is +-0 and its partner is large (2^40 .. 2^127), the other
              products are non-zero and 2^-12 .. 2^-60 below that partner's scale times 2^-126:
              if a zero product counted with exponent -126 + e(partner) (MMA-Sim's reading,
              ``zero_exponent = -126``) it would set the alignment maximum and truncate them.
zero_c        C = +0 or -0, every product non-zero and below 2^-126 (exponents -127 .. -152):
              a zero C counting with exponent -126 would truncate them at 2^-151; the floor -133
              (tcsmt's Hopper model) keeps them down to 2^-158.
zero_sign     sums whose exact value is non-zero but truncates to zero in the output format
              (products below its least subnormal), with C = +-0; and sums of -0 terms only
              (every product -0, C = -0): +0 or -0?
c_alone       every product 0 (A = +-0) and C swept over the output format's subnormals and small
              normals with full significands: how many of C's bits a block keeps when C alone
              sets the alignment exponent (the fp8 wgmma window has 13 fraction bits; Hawkeye,
              MLSys 2026, gives Hopper FP8 a floor of -139).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.hwcheck.dists import from_exponents

# the models every file names (the reading tcsmt holds first); questions add their competitors
_SEED = 13


def _hex(fmt: Format, bits: int) -> str:
    return f"0x{int(bits):0{fmt.storage_bits // 4}x}"


def _doc(question: str, fin: str, fout: str, models: list[str], rows: list[tuple], note: str,
         fin_b: str = "") -> dict:
    fa, fc = get_format(fin), get_format(fout)
    fb = get_format(fin_b or fin)
    return {"schema": "tcsmt.vectors/1", "question": question, "note": note,
            "in_fmt": fin, **({"b_fmt": fin_b} if fin_b else {}), "out_fmt": fout, "models": models,
            "inputs": [{"a": [_hex(fa, x) for x in a], "b": [_hex(fb, x) for x in b], "c": _hex(fc, c)}
                       for a, b, c in rows]}


def _val(fmt: Format, e: Any, neg: Any, rng: np.random.Generator) -> np.ndarray:
    return from_exponents(fmt, np.asarray(e), np.asarray(neg, dtype=bool), rng).astype(np.int64)


def zero_product(fin: str, fout: str, k: int, n: int, rng) -> dict:
    fa, fc = get_format(fin), get_format(fout)
    rows = []
    for i in range(n):
        big = int(rng.integers(40, fa.emax + 1))
        zero = (1 << (fa.storage_bits - 1)) if rng.random() < 0.5 else 0
        partner = int(_val(fa, big, rng.random() < 0.5, rng))
        z_top = -126 + big  # the zero product's exponent in MMA-Sim's reading
        gap = int(rng.integers(12, 61))
        P = z_top - gap  # the other products' scale
        ea = rng.integers(max(fa.emin, P - fa.emax), min(fa.emax, P - fa.emin) + 1, k - 1)
        a = _val(fa, ea, rng.random(k - 1) < 0.5, rng)
        b = _val(fa, P - ea + rng.integers(-2, 3, k - 1), rng.random(k - 1) < 0.5, rng)
        c = 0 if i % 4 == 0 else int(_val(fc, P + int(rng.integers(-4, 3)), rng.random() < 0.5, rng))
        if i % 2:
            a, b = np.concatenate([[zero], a]), np.concatenate([[partner], b])
        else:
            a, b = np.concatenate([[partner], a]), np.concatenate([[zero], b])
        rows.append((a, b, c))
    return _doc("zero_product", fin, fout, ["hopper", "hopper:zero_exponent=-126"], rows,
                "slot 0 has a zero factor times a large one; the other products lie far below -126 + e(large)")


def zero_c(fin: str, fout: str, k: int, n: int, rng) -> dict:
    fa, fc = get_format(fin), get_format(fout)
    rows = []
    for i in range(n):
        P = rng.integers(-152, -126, k)  # product exponents, all below 2^-126
        ea = np.array([int(rng.integers(max(fa.emin - fa.frac_bits, p - fa.emax), min(fa.emax, p - fa.emin) + 1))
                       for p in P])
        a = _val(fa, ea, rng.random(k) < 0.5, rng)
        b = _val(fa, P - ea, rng.random(k) < 0.5, rng)
        c = (1 << (fc.storage_bits - 1)) if i % 2 else 0
        rows.append((a, b, c))
    return _doc("zero_c", fin, fout, ["hopper", "hopper:zero_exponent=-126", "hopper:no_floor"], rows,
                "C = +-0, every product non-zero and below 2^-126")


def zero_sign(fin: str, fout: str, k: int, n: int, rng, fin_b: str = "") -> dict:
    fa, fc = get_format(fin), get_format(fout)
    fb = get_format(fin_b or fin)
    sign_a, sign_b = 1 << (fa.storage_bits - 1), 1 << (fb.storage_bits - 1)
    neg_zero_c = 1 << (fc.storage_bits - 1)
    rows = []
    lo = fa.min_subnormal_exp + fb.min_subnormal_exp
    for i in range(n):
        kind = i % 4
        if kind < 2:  # a non-zero sum below C's least subnormal (where the formats reach there)
            top = min(fc.min_subnormal_exp - 2 - int(np.ceil(np.log2(k))), fa.emax + fb.emax)  # k of them < half an ulp
            P = rng.integers(lo, max(lo, top) + 1, k)
            ea = np.array([int(rng.integers(max(fa.min_subnormal_exp, p - fb.emax), min(fa.emax, p - fb.min_subnormal_exp) + 1))
                           for p in P])
            neg = rng.random() < 0.5
            a = _val(fa, ea, np.full(k, neg), rng)
            b = _val(fb, P - ea, np.zeros(k, bool), rng)
            c = neg_zero_c if kind == 1 else 0
        else:  # every term a zero: all -0 (kind 2) or a mix of signed zeros (kind 3)
            x = _val(fb, rng.integers(-4, 5, k), rng.random(k) < 0.5, rng)
            za = np.where(rng.random(k) < 0.5, sign_a, 0)
            if kind == 2:  # every product -0: a -0 factor times a positive one, or +0 times a negative one
                xb = x & ~sign_b
                neg_b = rng.random(k) < 0.5
                a = np.where(neg_b, 0, sign_a)
                b = np.where(neg_b, xb | sign_b, xb)
                c = neg_zero_c
            else:
                a, b = za, x
                c = neg_zero_c if rng.random() < 0.5 else 0
        rows.append((np.asarray(a), np.asarray(b), int(c)))
    return _doc("zero_sign", fin, fout, ["hopper", "hopper:zero_sign=positive", "hopper:zero_sign=ieee"], rows,
                "rows 4j, 4j+1: a non-zero sum below the output's least subnormal (C = +0, -0; none where the "
                "input formats cannot get there); 4j+2: every product -0 and C = -0; 4j+3: signed zeros",
                fin_b)


def c_alone(fin: str, fout: str, k: int, rng, fin_b: str = "") -> dict:
    fa, fc = get_format(fin), get_format(fout)
    fb = get_format(fin_b or fin)
    f = fc.frac_bits
    cs: list[int] = []
    for m in [1, 2, 3, 5, 7, 0x55, 0xFF, 0x3FF, 0x1FFF, 0x3FFF, 0x7FFF, (1 << f) - 1]:  # subnormal C
        if m < (1 << f):
            cs.append(m)
    for j in range(f):  # subnormal C with leading bit j and every bit below set, and a random tail
        cs.append((1 << (j + 1)) - 1)
        cs.append((1 << j) | int(rng.integers(0, 1 << j)) if j else 1)
    for e in range(fc.emin, fc.emin + 40):  # small normals with full significands
        cs.append(int(_val(fc, e, False, rng)) | 1)
    for e in (-20, -1, 0, 1, 10):
        cs.append(int(_val(fc, e, False, rng)) | 1)
    rows = []
    sign_a, sign_c = 1 << (fa.storage_bits - 1), 1 << (fc.storage_bits - 1)
    for i, c in enumerate(dict.fromkeys(cs)):
        b = _val(fb, rng.integers(-3, 4, k), rng.random(k) < 0.5, rng)
        a = np.full(k, sign_a if i % 3 == 1 else 0)
        rows.append((a, b, c | (sign_c if i % 2 else 0)))
    return _doc("c_alone", fin, fout, ["hopper", "hopper:c_mode=after", "hopper:zero_exponent=-126"], rows,
                "every product zero; C swept over subnormals (leading bit at every position) and small normals",
                fin_b)


PLAN = [  # (question, in_fmt, b_fmt, out_fmt, k, rows)
    ("zero_product", "bf16", "", "fp32", 16, 64), ("zero_product", "tf32", "", "fp32", 8, 64),
    ("zero_c", "bf16", "", "fp32", 16, 64), ("zero_c", "tf32", "", "fp32", 8, 64),
    ("zero_sign", "bf16", "", "fp32", 16, 64), ("zero_sign", "tf32", "", "fp32", 8, 64),
    ("zero_sign", "fp16", "", "fp32", 16, 32), ("zero_sign", "fp16", "", "fp16", 16, 64),
    ("zero_sign", "e4m3", "", "fp32", 32, 32), ("zero_sign", "e5m2", "", "fp16", 32, 64),
    ("zero_sign", "e4m3", "", "fp16", 32, 64),
    ("c_alone", "e4m3", "", "fp32", 32, 0), ("c_alone", "e5m2", "", "fp32", 32, 0),
    ("c_alone", "e4m3", "e5m2", "fp32", 32, 0), ("c_alone", "bf16", "", "fp32", 16, 0),
    ("c_alone", "e4m3", "", "fp16", 32, 0),
]


def build(outdir: Path) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for j, (q, fin, fin_b, fout, k, n) in enumerate(PLAN):
        rng = np.random.default_rng([_SEED, j])
        if q == "c_alone":
            doc = c_alone(fin, fout, k, rng, fin_b)
        elif q == "zero_sign":
            doc = zero_sign(fin, fout, k, n, rng, fin_b)
        else:
            doc = {"zero_product": zero_product, "zero_c": zero_c}[q](fin, fout, k, n, rng)
        name = f"{q}-{doc['in_fmt']}{'x' + doc['b_fmt'] if 'b_fmt' in doc else ''}-{fout}.json"
        path = outdir / name
        path.write_text(json.dumps(doc, indent=1) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build(Path(sys.argv[1] if len(sys.argv) > 1 else "vectors/hopper")):
        print(p)
