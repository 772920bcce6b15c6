"""The bit diagram's cut (E - F) is the semantics' own (semantics.first_block_cut), per model.

Expected values follow each model file's parameters: Ampere fp16 -> fp32 blocks of 8 with F = 24
(published_parameters.md: FTTN / Khattak-Mikaitis, 1 extra bit), Hopper fp8 mma.sync adds C after
the instruction (the SASS of sm_90a: HMMA chain then FADD, models/hopper.toml).
"""
from __future__ import annotations

from fractions import Fraction

from tcsmt.arith.formats import get_format
from tcsmt.arith.registry import resolve
from tcsmt.solve.report import first_block_cut

F16, F32, E4 = get_format("fp16"), get_format("fp32"), get_format("e4m3")


def _bits(fmt, values):
    return [int(fmt.from_fraction(Fraction(v))) for v in values]


def test_cut_uses_the_first_block_only():
    p = resolve("ampere", "fp16", "fp32")  # blocks of 8 in an instruction of 16, F = 24
    a = _bits(F16, [1] * 8 + [2 ** 10] * 8)
    b = _bits(F16, [1] * 16)
    assert first_block_cut(p, a, b, int(F32.from_fraction(Fraction(0)))) == 0 - 24  # E = 0, not 10


def test_cut_leaves_out_c_added_after_the_instruction():
    p = resolve("hopper", "e4m3", "fp32")  # C added by an FADD after the two HMMA blocks
    a, b = _bits(E4, [1] * 32), _bits(E4, [1] * 32)
    c = int(F32.from_fraction(Fraction(2) ** 20))
    cut = first_block_cut(p, a, b, c)
    assert cut == 0 - p.window_frac_bits  # E from the products (2^0), not from C (2^20)


def test_cut_with_c_aligned_and_the_floor():
    p = resolve("hopper", "bf16", "fp32")  # C joins the alignment; E >= -133
    bf = get_format("bf16")
    tiny = _bits(bf, [Fraction(2) ** -70] * 16)
    zero_c = int(F32.from_fraction(Fraction(0)))
    assert first_block_cut(p, tiny, tiny, zero_c) == -133 - p.window_frac_bits  # E = -140 raised to the floor
    c = int(F32.from_fraction(Fraction(2) ** 5))
    assert first_block_cut(p, tiny, tiny, c) == 5 - p.window_frac_bits


def test_no_window_no_cut():
    assert first_block_cut(resolve("exact", "fp16", "fp32"), _bits(F16, [1]), _bits(F16, [1]), 0) is None
