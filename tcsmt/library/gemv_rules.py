"""The K order of a call on cuBLAS's CUDA-core GEMV kernels, for the catalog rules (:func:`tcsmt.library.rules.checked_entry`).

The orders are the tables ``models/library/<gpu>_gemv_orders.json.gz`` (``python -m tools.library.gemv_orders``, from
FPRev probes and GEMV scans): per kernel and block dims, L threads that chain their k's by FFMA, dealt in tiles or one
by one, and the tree that joins the thread sums.  :func:`gemv_fields` turns one into plan fields where it is certain
for the call: at a ``gemvx`` call whose recording holds its launch words, by :func:`dealt_order` at any K; else at the
K values and (``gemvx``) the calls an entry was read on; at a kernel whose thread count is a template argument, by
the K-range rule (:func:`k_range_order`) between the K values one order was read at.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from tcsmt.io import load
from tcsmt.library.families import UNREAD_K_ORDER, kernel_key
from tcsmt.library.plans import TORCH_DTYPES, Call, Plan, plans_dir

GEMV_ORDERS = "{gpu}_gemv_orders.json.gz"
"""The K orders of the GEMV kernels read on a GPU (``models/library/``; ``tools/library/gemv_orders.py``)."""
_gemv_tables: dict[str, dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]]] = {}
_gemv_gaps: dict[str, dict[tuple[str, tuple[int, ...]], list[int]]] = {}
K_RANGE_READ = 4
"""The K-range rule (:func:`k_range_order`): fewest distinct K values at which one order of a kernel and block whose
thread count is a template argument must have been read before it applies at every K between the smallest and the
largest of them."""


def gemv_orders(gpu: str) -> dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]]:
    """The GEMV orders read on ``gpu``, by (kernel name, block dims): one entry, or one per probed K where no order
    held at every K (``tools/library/gemv_orders.py``); empty where none were read."""
    if gpu not in _gemv_tables:
        path = plans_dir() / GEMV_ORDERS.format(gpu=gpu)
        doc = load.read_json_object(path, "GEMV order table") if path.exists() else {}
        table: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
        for e in doc.get("orders", []):
            table.setdefault((kernel_key(str(e["kernel"])), tuple(int(x) for x in e["block"])), []).append(e)
        gaps: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for e in doc.get("not_decided", []):
            gaps.setdefault((kernel_key(str(e["kernel"])), tuple(int(x) for x in e["block"])), []).extend(
                int(k) for k in e["K"])
        _gemv_tables[gpu], _gemv_gaps[gpu] = table, gaps
    return _gemv_tables[gpu]


def gemv_gaps(gpu: str) -> dict[tuple[str, tuple[int, ...]], list[int]]:
    """The K values at which a probe of a GEMV kernel and block found no order, or fresh GPU outputs refuted the
    table's (``not_decided`` of the table), by (kernel name, block dims)."""
    gemv_orders(gpu)
    return _gemv_gaps[gpu]


def products_exact(a_dtype: str | None) -> bool:
    """Whether a GEMV call's products are exact in fp32, as :func:`canonical_order`'s merges of equal sums need: bf16
    and fp16 inputs (8 x 8 and 11 x 11 significand bits); not fp32 inputs, whose products FFMA rounds with the sum."""
    return a_dtype != "float32"


def canonical_order(K: int, L: int, g: int, tree: str, segment: int = 0,
                    exact_products: bool = True) -> tuple[str, tuple[tuple[tuple[int, ...], ...], ...]]:
    """The sum a candidate computes at K, as (tree, each thread's k's in chain order, cut into its segments), with the
    threads that hold no k dropped where that leaves the sum unchanged; two candidates with equal forms give the same
    bits.  With ``exact_products`` (16-bit inputs: a product of two bf16 or fp16 values is exact in fp32, and a chain
    from +0 never gives -0 under RNE, nor does a sum of such values), three forms are one sum:

    - a segment as long as the thread's k's is no restart, nor is a last segment of one k (adding a product alone from
      +0 and then to the thread's sum is the chain's one FFMA);
    - a thread with no k holds +0, so adding it changes nothing: ``halving`` over L threads whose upper half [L/2, L)
      is empty is ``halving`` over L/2 (its first level adds +0 to each lower thread), over 2 threads it is the one sum
      of ``fp32_forward``, which in turn does not change when its empty threads are dropped (so at K <= 8 the orders of
      8 and of 16 threads one k each are one sum: the probes cannot tell them apart there, and need not);
    - under ``fp32_forward``, threads of one k each that follow a first thread of one chain continue that chain: the
      first thread's sum plus an exact product, rounded once, is the chain's next FFMA (``gemv2N_kernel`` with one slice
      is one chain, and so is any candidate of single-k threads joined in order).

    Without it (fp32 inputs, whose products FFMA rounds with the sum), the form is the candidate's own structure: every
    thread in order, empty ones too, each cut into its segments."""
    def cut(ks: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        runs = [ks] if not segment or len(ks) <= segment else [ks[i:i + segment] for i in range(0, len(ks), segment)]
        if exact_products and len(runs) > 1 and len(runs[-1]) == 1:  # a last restart of one k is the chain's FFMA
            runs[-2:] = [runs[-2] + runs[-1]]
        return tuple(runs)

    tiles = -(-K // g)  # thread t takes tiles t, t + L, ... of g k's each, in order
    lanes = [tuple(k for q in range(t, tiles, L) for k in range(q * g, min(q * g + g, K))) for t in range(L)]
    if not exact_products:
        return tree, tuple(cut(x) for x in lanes)
    if tree == "halving":
        while len(lanes) > 2 and not any(lanes[len(lanes) // 2:]):
            lanes = lanes[: len(lanes) // 2]
        if len(lanes) > 2:
            return "halving", tuple(cut(x) for x in lanes)
    cuts = [cut(x) for x in lanes if x]
    while len(cuts) > 1 and len(cuts[0]) == 1 and len(cuts[1]) == 1 and len(cuts[1][0]) == 1:
        cuts[:2] = [((*cuts[0][0], *cuts[1][0]),)]  # a single-k thread after a one-chain first thread: its next FFMA
    return "fp32_forward", tuple(cuts) or (((),),)


GRAIN_RULES = ("1", "4", "chunk64", "slices")
"""How a GEMV kernel deals its k's to its L threads: ``1``, k to thread k mod L; ``4``, tiles of 4 k's round-robin
(the ``gemvNSP_kernel<..., 1, 32, 4, 1024, ...>`` kernels: rows of ``evidence/library/<gpu>_gemv_probes_all_dtypes.json.gz``
show 32 lanes each chaining runs of 4 consecutive k's, k's 128 apart in one lane); ``chunk64``, tiles of
min(64, ceil(K/L)) k's round-robin; ``slices``, one contiguous run of ceil(K/L) k's a thread (the bf16/fp16
``gemmSN_NN`` kernels: their probes at K = 311 and 332 read runs of 78 and 83 k's, beyond chunk64's 64)."""


def gemv_grain(rule: str, K: int, L: int) -> int:
    """The tile of k's each thread takes in turn under a dealing rule (:data:`GRAIN_RULES`)."""
    if rule == "1":
        return 1
    if rule == "4":
        return 4
    if rule == "slices":
        return -(-K // L)
    if rule == "chunk64":
        return min(64, -(-K // L))
    raise ValueError(f"unknown GEMV grain rule {rule!r} (rules: {', '.join(GRAIN_RULES)})")


def _form(e: dict[str, Any]) -> tuple[int, str, str, int]:
    return int(e["lanes"]), str(e["grain"]), str(e["reduce"]), int(e.get("segment", 0))


@lru_cache(maxsize=1 << 16)
def _sum_at(form: tuple[int, str, str, int], K: int, exact_products: bool = True) -> tuple:
    L, rule, tree, seg = form
    return canonical_order(K, L, gemv_grain(rule, K, L), tree, seg, exact_products)


def k_range_order(read: Sequence[dict[str, Any]], gaps: Sequence[int], K: int,
                  exact_products: bool = True) -> tuple[dict[str, Any] | None, str]:
    """(the entry whose order applies at ``K``, '') or (None, why not), by the K-range rule: where one order whose
    thread count is a template argument (``gemmSN``, ``gemv2T_kernel_val``: its dealing is fixed by its code
    (:data:`GRAIN_RULES`), not by the call's launch) is the sum every entry of ``read`` computes at
    every K it was read at (:func:`canonical_order`: an entry read at a small K may name another order that is one sum
    with it there), and those K values number :data:`K_RANGE_READ` or more (probes and scans), it applies at every K
    between the smallest and the largest of them where no probe found another order, or none, and no fresh output
    refuted it (``gaps``); ``exact_products``: the call's inputs are 16-bit (:func:`canonical_order`).  The probes behind it were spread over each kernel's recorded K range
    (``tools/library/gemv_probe_lists.py --spread``); fresh GPU outputs at K values between them check it
    (``evidence/library/<gpu>_fresh_gemv_samples.json.gz``)."""
    forms = sorted({_form(e) for e in read if str(e["lanes_are"]).startswith("template")},
                   key=lambda f: (-sum(len(e["K"]) for e in read if _form(e) == f), f))
    if not forms:
        return None, ""
    agreed = next((f for f in forms if all(_sum_at(f, int(k), exact_products) == _sum_at(_form(e), int(k), exact_products)
                                           for e in read for k in e["K"])), None)
    if agreed is None:
        return None, f"{len(forms)} orders read at different K"
    ks = sorted({int(k) for e in read for k in e["K"]})
    if len(ks) < K_RANGE_READ:
        return None, f"one order read at {len(ks)} K values (the K-range rule needs {K_RANGE_READ})"
    if not ks[0] <= K <= ks[-1]:
        return None, f"K = {K} outside the K range its order was read over ({ks[0]}..{ks[-1]})"
    inside = sorted({k for k in gaps if ks[0] <= k <= ks[-1]})
    if inside:
        return None, f"another order, or none, at K = {', '.join(map(str, inside[:5]))} inside the K range read"
    return max((e for e in read if _form(e) == agreed and str(e["lanes_are"]).startswith("template")),
               key=lambda e: len(e["K"])), ""


def gemv_fields(entry: dict[str, Any], plan: Plan, kernels: Sequence[str], blocks: Sequence[Sequence[int]] | None,
                gpu: str, dealing: Sequence[Any] | None = None) -> tuple[dict[str, Any], str]:
    """(the entry with the GEMV kernel's K order, '') or (entry, why not).

    The order (``tools/library/gemv_orders.py``): L threads each chain their k's by FFMA from +0 (tiles of g k's
    dealt round-robin: g = 1, ``chunk64``: g = min(64, ceil(K/L)), or ``slices``: g = ceil(K/L), :func:`gemv_grain`), as
    L split-K slices ``interleaved`` with
    grain g and the simt_ffma chain (with the entry's ``segment``: each thread's chain restarts from +0 after every
    ``segment`` of its k's and adds the restarts' sums in order, ``gemv2T_kernel_val`` above K = 512), their fp32
    sums joined by the entry's tree (``halving`` or ``fp32_forward``), then the call's epilogue and RNE to the output
    format.  An entry applies at the K values probed only (an fp16 ``gemvx`` whose order fits its probes at K = 580,
    641, 8,483 and 16,383 gave 2 of 256 outputs of another order at K = 1,347 on the H100:
    ``evidence/library/h100_catalog_samples.json``), except by the K-range rule (:func:`k_range_order`) at kernels
    whose thread count is a template argument.  The epilogue comes from the conversion, which gives a GEMV call
    one only where a decision naming GEMV kernels set it (:func:`tcsmt.library.call_plans.ConvertContext.entry`).

    ``dealing``: the recorded launch's [tile, stride] per kernel (``gemv_dealing`` of a recording,
    :data:`tcsmt.hwcheck.gemv_launch.GEMV_PARAMS`).  Where a ``gemvx`` call has it, the order is
    :func:`dealt_order`'s at any K, not only at the calls and K values an entry was read on."""
    probes = f"evidence/library/{gpu}_gemv_probes*.json.gz"
    if not blocks or len(kernels) != 1 or len(blocks) != 1:
        return entry, f"{len(kernels)} kernels with {len(blocks or ())} block shapes recorded: one GEMV kernel expected"
    read = gemv_orders(gpu).get((kernel_key(kernels[0]), tuple(int(x) for x in blocks[0])), [])
    name = kernel_key(kernels[0])
    short = UNREAD_K_ORDER.search(name.split("<")[0]) or UNREAD_K_ORDER.search(name)
    what = f"the {short.group(1) if short else 'GEMV'} kernel with block {list(blocks[0])}"
    if not read:
        return entry, f"K order of {what} not read (no probe of this kernel and block: {probes})"
    K = plan.call.K
    dealt = dealing[0] if dealing and len(dealing) == 1 else None
    if dealt is not None and any(dealt_per_call(e, max(e["K"])) for e in read):
        e, g, why = dealt_order(read, K, dealt, what)
        if why:
            return entry, why
        return _gemv_entry(entry, e, g, what, probes, f"; k's dealt as the call's launch parameters say (tile {dealt[0]}, "
                                                      f"stride {dealt[1]}: {'tiles' if g > 1 else 'one by one'})"), ""
    at_k = [e for e in read if K in e["K"]]
    if not at_k:
        ranged, why_not = k_range_order(read, gemv_gaps(gpu).get(
            (kernel_key(kernels[0]), tuple(int(x) for x in blocks[0])), []), K, products_exact(plan.call.a_dtype))
        if ranged is not None:
            ks = sorted({int(k) for e in read for k in e["K"]})
            g = gemv_grain(str(ranged["grain"]), K, int(ranged["lanes"]))
            return _gemv_entry(entry, ranged, g, what, probes,
                               f"; at K = {K} by the K-range rule (one order read at {len(ks)} K values from "
                               f"{ks[0]} to {ks[-1]}, none other inside)"), ""
        ks = sorted(k for e in read for k in e["K"])
        shown = ", ".join(map(str, ks[:8])) + (f", ... ({len(ks)} values)" if len(ks) > 8 else "")
        return entry, f"K order of {what} read at K = {shown} only ({probes})" + (f": {why_not}" if why_not else "")
    shape = gemv_call_shape(plan.call)
    at_shape = [e for e in at_k if not dealt_per_call(e, K) or shape in e.get("calls", ())]
    if not at_shape:
        return entry, (f"K order of {what} at K = {K} read for other calls only ({probes}, "
                       f"evidence/library/{gpu}_gemv_scan*.json.gz): this kernel deals k's to its threads one by one "
                       f"or in tiles as each call's shape decides, so an order applies to the calls it was read on")
    e = at_shape[0]
    g = gemv_grain(str(e["grain"]), K, int(e["lanes"]))
    return _gemv_entry(entry, e, g, what, probes, ""), ""


def _gemv_entry(entry: dict[str, Any], e: dict[str, Any], g: int, what: str, probes: str, how: str) -> dict[str, Any]:
    """``entry`` with the order of table entry ``e`` (threads, tree, segment) dealing tiles of ``g`` k's."""
    L = int(e["lanes"])
    seg = int(e.get("segment", 0))
    restart = f", each restarting from +0 after every {seg} of its k's (the restarts' sums added in order)" if seg else ""
    # CUDA-core FFMA on the inputs as they are: tf32 mode does not reach it (the fp32 probes ran with tf32 on, as the
    # recorded calls did, and their outputs are fp32 FFMA chains bit for bit)
    chain = {**dict(entry.get("chain") or {}), "in_fmt": TORCH_DTYPES[str(entry["a_dtype"])], "instr": "simt_ffma",
             "out_fmt": "fp32"}
    out = {**entry, "split_k": L, "grain": g, "slices": "interleaved", "remainder": "last", "reduce": e["reduce"],
           "chain": chain,
           "sources": [*entry.get("sources", []),
                       f"K order of {what} read by FPRev probes ({probes}, "
                       f"tools/library/gemv_orders.py): {L} threads ({e['lanes_are']}), tiles of {g} k's "
                       f"round-robin, FFMA chains{restart}, {e['reduce']} tree; {e['outputs_bit_exact']} sampled "
                       f"outputs bit-exact at K = {', '.join(map(str, e['K_probed']))}{how}"]}
    out.pop("k_tile", None)
    out.pop("k_floor", None)
    out.pop("segment", None)
    if seg:
        out["segment"] = seg
    return out


def dealt_order(read: Sequence[dict[str, Any]], K: int, dealing: Sequence[Any],
                what: str) -> tuple[dict[str, Any], int, str]:
    """(table entry, grain, '') or ({}, 0, why not): a ``gemvx`` call's order from its launch parameters.

    A ``gemvx`` kernel and block keep their threads (``lanes``, the block dim they are), their tree and segment at
    every K the probes and scans read with K > L (every such entry of ``read`` must say one); the launch's ``tile``
    is min(64, ceil(K/L)) and its ``stride`` says the dealing: 1, tiles of ``tile`` k's dealt round-robin (tile q to
    thread q mod L); L, k to thread k mod L (grain 1).  Read on 1,953 scanned calls of both GPUs (every scanned
    call's kept counts fit the order so made: ``evidence/library/<gpu>_gemv_params.json.gz``, the scans
    ``<gpu>_gemv_scan*.json.gz``); any other tile or stride is refused."""
    forms = {(str(e["lanes_are"]), int(e["lanes"]), str(e["reduce"]), int(e.get("segment", 0)))
             for e in read if max(e["K"]) > int(e["lanes"])}
    if len(forms) != 1:
        return {}, 0, f"threads or tree of {what} read differently at different K ({len(forms)} forms)"
    form = forms.pop()
    e = next(x for x in read if max(x["K"]) > int(x["lanes"]) and
             (str(x["lanes_are"]), int(x["lanes"]), str(x["reduce"]), int(x.get("segment", 0))) == form)
    L = form[1]
    try:
        tile, stride = (int(x) for x in dealing)
    except (TypeError, ValueError):
        return {}, 0, f"launch parameters of {what} recorded as {dealing!r}, not [tile, stride]"
    if tile != min(64, -(-K // L)) or stride not in (1, L):
        return {}, 0, (f"launch parameters of {what} (tile {tile}, stride {stride}) are not one of the two dealings "
                       f"read for its {L} threads at K = {K} (tile {min(64, -(-K // L))}, stride 1 or {L})")
    return e, (tile if stride == 1 else 1), ""


def gemv_shape_text(op: str, K: int, batch: int, M: int, N: int, b_t: bool, bias: bool) -> str:
    """A call as GEMV order tables list the calls they were read on: "K op batch M N b_t bias" (batch 1 but for
    ``bmm``; b_t 1 where B is the transposed view of an (N, K) tensor, 0 for ``linear``, which takes the weight
    itself)."""
    return f"{int(K)} {op} {int(batch) if op == 'bmm' else 1} {int(M)} {int(N)} {int(bool(b_t) and op != 'linear')} {int(bool(bias))}"


def gemv_call_shape(call: Call) -> str:
    """:func:`gemv_shape_text` of a call."""
    return gemv_shape_text(call.op, call.K, call.batch, call.M, call.N, call.b_t, call.bias)


def dealt_per_call(e: dict[str, Any], K: int) -> bool:
    """Whether an order entry holds only for the calls it was read on: a kernel whose thread count is a block dim
    (``gemvx``) deals k's to its threads one by one or in tiles of min(64, ceil(K/L)) as the call's shape decides, not
    its name, block and K (both dealings at one kernel, block and K on the H100 and the H200: e.g. the bf16 ``gemvx``
    with block [16, 32, 1] at K = 426, tiles for 12 x 1 x 426 x 64 and one by one for 24 x 1 x 426 x 64,
    ``evidence/library/<gpu>_gemv_scan_table.json.gz``); the dealings are one sum where K <= L.  A thread count fixed by
    the kernel's template arguments (``gemv2T_kernel_val``, ``gemmSN``) is not: its order holds at every call of the
    kernel, block and K."""
    return not str(e["lanes_are"]).startswith("template") and K > int(e["lanes"])


GEMV_BLOCK_NAMED = re.compile(r"kernel with block (\[[\d, ]+\])")
"""The block dims that :func:`gemv_fields` names for a GEMV call, in its plan's source line and in the reasons it refuses
one alike; group 1: the block (how ``tools/library/gemv_orders.py --refuted-by`` finds which entry a fresh call would
take, whether the shipped catalog answers it or not)."""
