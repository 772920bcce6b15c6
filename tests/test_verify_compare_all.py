"""tcsmt verify --compare all: which pairs an architecture has, the one-word option, the shared rows (the same answers
as a fresh search), the output and the one-line errors."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt import verify as V
from tcsmt.cli import main
from tcsmt.cli.verify_cmd import spell_compare_all
from tcsmt.verify.compare import search_rows
from tcsmt.verify.compare_all import scheme_pairs, schemes_on
from tcsmt.verify.row_cache import RowCache
from tcsmt.verify.schemes import ALGOS


def test_pairs_per_architecture():
    # the README's table of every pair (benchmarks/results/bench_verify_compare_all_short_tuned_rows.txt): 6 pairs
    # on Volta and Turing (fp16 path only), 21 on CDNA1/CDNA2 (fp16 and bf16, no tf32), 36 on the others
    assert schemes_on("volta") == ["markidis", "markidis-full", "ootomo", "fp32"]
    assert schemes_on("cdna1") == ["markidis", "markidis-full", "ootomo", "fp32", "bf16x9", "bf16x9-large-first",
                                   "bf16x3"]
    assert schemes_on("hopper") == list(ALGOS)
    assert {a: len(scheme_pairs(a)) for a in ("volta", "turing", "cdna1", "cdna2", "ada", "cdna3")} == {
        "volta": 6, "turing": 6, "cdna1": 21, "cdna2": 21, "ada": 36, "cdna3": 36}
    assert ("markidis", "markidis-full") == scheme_pairs("volta")[0]  # ALGOS order, each pair once


def test_compare_all_is_one_word():
    assert spell_compare_all(["--compare", "all", "--arch", "volta"]) == ["--compare", "all", "all", "--arch", "volta"]
    assert spell_compare_all(["--arch", "volta", "--compare", "ALL"]) == ["--arch", "volta", "--compare", "all", "all"]
    assert spell_compare_all(["--compare=all"]) == ["--compare", "all", "all"]
    # the two-scheme form, a second word after all, and anything after -- are left as written
    for args in (["--compare", "ootomo", "markidis"], ["--compare", "all", "markidis"], ["--", "--compare", "all"]):
        assert spell_compare_all(args) == args


def test_round_rows_are_the_rows_drawn_in_order():
    # a family's round i is what its own stream gives on its i-th draw, whichever round is asked first
    def make(rng):
        return rng.integers(0, 1 << 20, (3, 2)).astype(np.uint32), rng.integers(0, 1 << 20, (3, 2)).astype(np.uint32)

    rng = np.random.default_rng(7)
    drawn = [make(rng) for _ in range(3)]
    rc = RowCache()
    for i in (2, 0, 1):
        a, b = rc.rows[rc.round_rows(("fam",), i, 7, make)]
        assert np.array_equal(a, drawn[i][0]) and np.array_equal(b, drawn[i][1])
    assert not rc.rows[rc.round_rows(("fam",), 0, 7, make)][0].flags.writeable  # shared: read-only


def test_shared_rows_give_the_answers_of_a_fresh_search():
    # cells answered only in the rounding rounds (the short tuned rows: tests/test_verify_compare.py, bf16x9 below
    # 2^-14 on CDNA2): with one cache for both, each gives the input a search of its own gives
    dom = V.parse_range("2^-36..2^-14")
    cache = RowCache()
    for other in ("markidis", "ootomo"):
        w, _ = search_rows("bf16x9", other, "cdna2", 2, dom, cache=cache)
        fresh, _ = search_rows("bf16x9", other, "cdna2", 2, dom)
        assert w is not None and fresh is not None and (w.a, w.b) == (fresh.a, fresh.b)
    assert any(k[0] == "round" for k in cache.rows)  # the rounds ran, and were shared


def test_cli_compare_all_on_one_range():
    # Volta, 1..2: all 12 cells found by the simulator search (README table of every pair; the bench file above)
    r = CliRunner().invoke(main, ["verify", "--compare", "all", "--arch", "volta", "--range", "1..2"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.startswith(("  markidis, ", "  markidis-full, ", "  ootomo, "))]
    assert len(rows) == 6 and all(line.count("found (") == 2 for line in rows)
    assert r.output.count("\nvolta, 1 <= |x| <= 2: ") == 12  # every found cell with its replayed input
    summary = r.output.strip().splitlines()[-1]
    assert summary.startswith("compare all: 12 cells on volta: 12 found (replayed), 0 proven impossible, 0 unanswered; ")


@pytest.mark.parametrize("args, says", [
    (["--compare", "all", "markidis"], "--compare all takes no scheme"),
    (["--compare", "markidis", "all"], "--compare all takes no scheme"),
    (["--compare", "all", "--arch", "nosuch"], "nosuch"),
    (["--compare", "all", "--arch", "volta", "--bound", "2^-4"], "--bound does not apply to --compare"),
    (["--compare", "all", "--arch", "volta", "--range", "1..70000"], "HI must be at most 65504"),
    (["--compare", "all", "--stats"], "choose one of --compare and --stats"),
])
def test_cli_compare_all_bad_input_is_one_line_and_exit_2(args, says):
    r = CliRunner().invoke(main, ["verify", *args])
    assert r.exit_code == 2, r.output
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
