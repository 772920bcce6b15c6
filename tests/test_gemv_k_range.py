"""The K-range rule of the GEMV kernels whose thread count is a template argument
(:func:`tcsmt.library.gemv_rules.k_range_order`): one order read at 4 or more K values applies between the smallest and
the largest of them, nowhere else, not where two orders were read, not where a probe found none or a fresh output
refuted it inside the range, and never for ``gemvx`` (its dealing follows the call's launch).  The entries below have
the form of ``models/library/<gpu>_gemv_orders.json.gz``; the last test reads the shipped tables, whose K values come
from the spread probes (``evidence/library/<gpu>_gemv_probes_k_spread.json.gz``)."""
from __future__ import annotations

import pytest

from tcsmt.library.gemv_rules import K_RANGE_READ, canonical_order, gemv_gaps, gemv_grain, gemv_orders, k_range_order


def entry(ks, lanes=4, lanes_are="template argument 4", grain="chunk64", reduce="fp32_forward", segment=0):
    e = {"lanes": lanes, "lanes_are": lanes_are, "grain": grain, "reduce": reduce, "K": list(ks), "K_probed": list(ks),
         "outputs_bit_exact": 96}
    if segment:
        e["segment"] = segment
    return e


def test_one_order_read_at_four_k_values_applies_between_them():
    read = [entry([2, 40, 96, 300])]
    e, why = k_range_order(read, [], 57)
    assert e is read[0] and why == ""
    for K in (2, 300):
        assert k_range_order(read, [], K)[0] is read[0]


@pytest.mark.parametrize("K", [1, 301, 5000])
def test_outside_the_range_read_is_refused(K):
    e, why = k_range_order([entry([2, 40, 96, 300])], [], K)
    assert e is None and "outside the K range its order was read over (2..300)" in why


def test_too_few_k_values_are_not_a_range():
    assert K_RANGE_READ == 4
    e, why = k_range_order([entry([2, 96, 300])], [], 57)
    assert e is None and "read at 3 K values" in why


def test_two_orders_are_not_a_range():
    read = [entry([2, 40]), entry([96, 300], reduce="halving")]
    e, why = k_range_order(read, [], 57)
    assert e is None and "2 orders read at different K" in why


def test_a_gap_inside_the_range_refuses_it():
    e, why = k_range_order([entry([2, 40, 96, 300])], [77], 57)
    assert e is None and "K = 77 inside the K range read" in why
    assert k_range_order([entry([2, 40, 96, 300])], [1000], 57)[0] is not None  # a gap outside does not


def test_gemvx_never_ranges():
    read = [entry([2, 40, 96, 300], lanes_are="blockDim.y")]
    assert k_range_order(read, [], 57) == (None, "")


def test_entries_of_one_order_count_their_k_values_together():
    read = [entry([2, 40]), entry([96, 300])]  # a probe entry and a scan entry of one order
    assert k_range_order(read, [], 57)[0] is not None


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_shipped_tables_range_only_over_template_kernels_without_gaps(gpu):
    table, gaps = gemv_orders(gpu), gemv_gaps(gpu)
    ranged = 0
    for key, read in table.items():
        ks = sorted({int(k) for e in read for k in e["K"]})
        mid = [k for k in range(ks[0] + 1, ks[-1]) if k not in ks][:1]
        if not mid:
            continue
        e, _why = k_range_order(read, gaps.get(key, []), mid[0])
        if e is not None:
            ranged += 1
            # the order is a template kernel's; an entry read with a block dim for its threads (a scan of the same
            # kernel, whose count the block equals) computes the same sum at each K it was read at
            assert str(e["lanes_are"]).startswith("template")
            for x in read:
                for k in x["K"]:
                    L, Lx = int(e["lanes"]), int(x["lanes"])
                    assert canonical_order(k, L, gemv_grain(e["grain"], k, L), e["reduce"], int(e.get("segment", 0))) \
                        == canonical_order(k, Lx, gemv_grain(x["grain"], k, Lx), x["reduce"], int(x.get("segment", 0)))
            assert len(ks) >= K_RANGE_READ and not [g for g in gaps.get(key, []) if ks[0] <= g <= ks[-1]]
    assert ranged > 0


def test_an_entry_read_where_orders_are_one_sum_joins_the_range():
    """At K = 2 every order of 16-bit products is one sum (gemv_orders picked 256 threads of one k each for the
    gemmSN_NN bf16 kernel there); it does not stop the kernel's template order from ranging over 2..96."""
    read = [entry([2], lanes=256, lanes_are="blockDim.x", grain="1"), entry([14, 33, 65, 96])]
    e, why = k_range_order(read, [], 50)
    assert e is read[1] and why == ""
    assert "outside the K range its order was read over (2..96)" in k_range_order(read, [], 97)[1]
