"""The K order of cuBLAS's CUDA-core GEMV kernels, read from FPRev swamping probes, as a table the catalog rules use.

    python -m tools.library.gemv_orders evidence/library/h100_gemv_probes.json.gz [MORE.json.gz ...] [--gpu h100]
        [--out models/library/h100_gemv_orders.json.gz] [--outputs 32] [--refuted-by FRESH_SAMPLES.json.gz ...]

Several probe files of one GPU (the same device name) are read as one run: their calls together.

The probes (``tools/device/gemv_probes.py``, run on the GPU through torch; method of Xie et al., "Revealing
Floating-Point Accumulation Orders in Software/Hardware Implementations", arXiv 2411.00442) give, for a call
whose kernel is one of :data:`GEMV` (``gemvx``, ``gemv2T_kernel_val``, ``gemv2N_kernel``, ``gemvNSP_kernel``, the
``gemmSN`` kernels), rows of the summation tree: for a leaf i and every j,
the number of k's in the subtree where i and j first meet (products +B at i, -B at j, ones in windows of 256
elsewhere: the ones outside that subtree survive).  Every candidate order below is checked against those rows
(integer logic) and then against the sampled outputs of random and probe inputs of the same call, evaluated bit for
bit by the plan the candidate makes (``tcsmt.library.evaluate``: the simt_ffma chain of ``models/hopper.toml`` per
thread, split-K slices for the threads, the reduction over them, RNE to the output format: the probe's own output
dtype, fp32 patterns for a bf16/fp16 -> fp32 call, :func:`out_dtype_of`), the latter for calls of K up to
:data:`OUTPUTS_MAX_K` (larger ones: their rows alone).

A candidate is (the block axis or template argument that counts the threads along K: L = blockDim.x, blockDim.y or
an integer template argument, :func:`lane_counts`; the threads' k's: ``1``, k in thread k mod L, ``4``, tiles of 4
k's round-robin, ``chunk64``, tiles of g = min(64, ceil(K/L)) k's dealt round-robin to the L threads, or
``slices``, one run of ceil(K/L) k's a thread (:func:`tcsmt.library.gemv_rules.gemv_grain`);
the tree over the L sums: ``halving`` or ``fp32_forward``; the thread's segment: 0, one chain over its k's, or n in
:data:`SEGMENTS`, a chain from +0 for every n of its k's, their sums added in order, as ``gemv2T_kernel_val`` sums
each block of 512 k's apart above K = 512, 32 a thread).  A kernel (full demangled name) with its block dims is
written to the table only where one candidate's plan fits every probe of it (rows and outputs) and no probe of it
contradicts (candidates that compute one sum at every probed K count as one: :func:`canonical_order`); the table lists the K values probed and the outputs compared.  ``K`` says where an entry applies: at
the K values probed, and nowhere else; ``calls`` lists the calls read ("K op batch M N b_t bias", :func:`call_shape`).
A kernel whose thread count is a block dim (``gemvx``) deals k's one by one or in tiles as each call's *shape*
decides, not its name, block and K: scans of other shapes at probed K values found the other dealing (bf16, block
[16, 32, 1], K = 426: tiles at 12 x 1 x 426 x 64 as probed, one by one at 24 x 1 x 426 x 64; 19 recorded calls at 9
of the tables' kernel, block and K points on each GPU, of 1,336 (H100) and 596 (H200) scanned at such points,
``evidence/library/<gpu>_gemv_scan_table.json.gz``), so the catalog rules apply such an entry to
its ``calls`` only (:func:`tcsmt.library.gemv_gemv_rules.dealt_per_call`).  ``--scan`` adds the calls of GEMV scans
(``tools/device/gemv_scan.py``) at which exactly one order fits (:func:`tools.library.gemv_scan_fit.add_scans`).  (The non-transposed kernels were first applied at any K, and then from the
smallest to the largest probed K: fresh H100 outputs refuted both, an fp16 ``gemvx`` with block [64, 8, 1] whose
order fits its probes at K = 580, 641, 8,483 and 16,383 gave 2 of 256 outputs of another order at K = 1,347,
``evidence/library/h100_catalog_samples.json``; which dealing a kernel uses changes with K.)  A kernel and block
whose probes no single order fits at every K get one entry per probed K where one fits there.
``--refuted-by`` reads fresh GPU outputs of calls the catalog answered (``tools/library/catalog_samples.py``): a GEMV
call whose samples differ from its plan takes the K of the order entry that plan used out of the table (an H200 fp16
``gemvx`` with block [4, 64, 1], its order probed at K = 128 and N = 6,281, gave 4 of 128 other outputs at N = 15,500
on inputs whose sum cancels, ``evidence/library/h200_catalog_samples_rebuilt.json.gz``).
Anything else stays refused.

Over 400 lines: the candidates, their integer rows, their plans evaluated on the sampled outputs and the refutation by
fresh outputs are one fit, each step reading the candidate form the others write.
"""
from __future__ import annotations

import base64
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.evaluate import evaluate_pairs, fmt_of
from tcsmt.library.gemv_rules import GEMV_BLOCK_NAMED, GRAIN_RULES, canonical_order, gemv_grain, gemv_shape_text, products_exact
from tcsmt.library.plans import call_from_entry, plan_from_fields
from tcsmt.sim.simulator import to_bits
from tools.device.gemv_probes import BIG, ONE, random_bits, windowed_params

REPO = Path(__file__).resolve().parents[2]
GEMV = re.compile(r"(?:^|::|\s)(gemvx::kernel|gemv2T_kernel_val|gemmSN_(?:TN|NN)_kernel|gemv2N_kernel|gemvNSP_kernel)\b")
KERNEL_GRAINS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"(?:^|\s)gemvNSP_kernel<"), ("4",)),
    (re.compile(r""), tuple(r for r in GRAIN_RULES if r != "4")),
)
"""The dealings a kernel's candidates take (the first pattern its name matches): tiles of 4 for ``gemvNSP_kernel``
(its template's vector width: ``gemvNSP_kernel<..., 1, 32, 4, 1024, ...>``); the others for every other kernel, whose
launch parameters (``gemvx``: tile min(64, ceil(K/L)), stride 1 or L, :func:`tcsmt.library.gemv_rules.dealt_order`)
or probes read no tile of 4."""
TREES = ("halving", "fp32_forward")
SEGMENTS = (0, 8, 16, 32, 64, 128)
"""A thread's k's per chain before it restarts from +0 (0: never): the candidates the probes' rows choose from."""
FMT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
PATTERN_TYPE = {"float32": np.uint32}
"""The unsigned type of a dtype's bit patterns, inputs and outputs alike (bf16, fp16: uint16)."""


def out_dtype_of(result: dict[str, Any]) -> str:
    """The dtype of a probed call's outputs: the result's ``out_dtype`` (``apply_out_dtype`` runs), else a_dtype (the
    probes ran torch's default output before they could apply one, whatever a spec copied from a recorded call
    says)."""
    return str(result.get("out_dtype") or result["spec"]["a_dtype"])


def plan_raw(spec: dict[str, Any], L: int, g: int, tree: str, source: str, segment: int = 0) -> dict[str, Any]:
    """Plan fields of one probed call under a candidate order."""
    return {"op": spec["op"], "a_dtype": spec["a_dtype"], "out_dtype": spec["out_dtype"], "split_k": L,
            "grain": g, "slices": "interleaved", "reduce": tree, "epilogue": [], "segment": segment,
            "chain": {"arch": "hopper", "in_fmt": FMT[spec["a_dtype"]], "out_fmt": "fp32", "instr": "simt_ffma"},
            "sources": [source]}


def subtree_sizes(K: int, L: int, g: int, tree: str, i: int, segment: int = 0) -> np.ndarray:
    """For every j: the number of k's under the node where leaves i and j first meet (-1 at j = i), when thread
    (k // g) mod L chains its k's in order (restarting from +0 after every ``segment`` of them, the segment sums
    added in order) and the L sums meet by ``tree``."""
    k = np.arange(K, dtype=np.int64)
    q = k // g  # k's tile: thread q mod L takes it, after the q // L tiles of g k's it took before
    lane, pos = q % L, (q // L) * g + k % g
    count = np.bincount(lane, minlength=L)
    out = np.empty(K, dtype=np.int64)
    same = lane == lane[i]
    if segment:  # the same segment: its chain; another: the serial sum of segments, after the later one
        seg, s_i = pos // segment, pos[i] // segment
        within = same & (seg == s_i)
        out[within] = np.maximum(pos[within], pos[i]) + 1 - segment * s_i
        apart = same & (seg != s_i)
        out[apart] = np.minimum(count[lane[i]], segment * (np.maximum(seg[apart], s_i) + 1))
    else:
        out[same] = np.maximum(pos[same], pos[i]) + 1
    # another thread b: the node where threads a = lane[i] and b meet, one size per thread (indexed by b)
    lanes, a = np.arange(L), int(lane[i])
    if tree == "halving":  # they meet at the offset of their lowest differing bit; the group: lanes = a mod it
        x = lanes ^ a
        low = np.where(x == 0, 1, x & -x)  # b = a: unused (j in a's own thread is counted above)
        meet = ((lanes[None, :] % low[:, None]) == (a % low)[:, None]).astype(np.int64) @ count
    else:  # serial from thread 0: the node after thread max(a, b)
        meet = np.cumsum(count)[np.maximum(lanes, a)]
    out[~same] = meet[lane[~same]]
    out[i] = -1
    return out


def revealed(result: dict[str, Any]) -> dict[int, np.ndarray]:
    rows = {}
    for i, text in result.get("reveal", {}).items():
        c = np.frombuffer(base64.b64decode(text), np.int16).astype(np.int64)
        sub = len(c) - c
        sub[int(i)] = -1
        rows[int(i)] = sub
    return rows


def _bits(values: np.ndarray, fmt: str) -> np.ndarray:
    return np.asarray(to_bits(values, fmt_of(fmt), "probe input")).astype(PATTERN_TYPE.get(fmt, np.uint16))


def sampled_inputs(result: dict[str, Any], n: int) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(kind, A rows (m, K), B columns (K, m), GPU outputs (m,)) of the first ``n`` outputs of every sampled call."""
    s = result["spec"]
    dt, b, K, N = s["a_dtype"], s["batch"], s["K"], s["N"]
    bits = PATTERN_TYPE.get(out_dtype_of(result), np.uint16)
    out = []
    for rec in result.get("normal", []):
        rng = np.random.default_rng(rec["seed"])
        M = int(result.get("rows", 1))  # rows of A the probe ran (older runs: 1, whatever the spec's M); row 0 kept
        a = random_bits(rng, dt, (b, M, K) if s["op"] == "bmm" else (M, K)).reshape(b, M, K)[:, 0, :]
        B = random_bits(rng, dt, (b, K, N))
        got = np.frombuffer(base64.b64decode(rec["out"]), bits)
        m = min(n, len(got))
        o = np.arange(m)
        out.append(("random", a[o // N], np.ascontiguousarray(B[o // N, :, o % N].T), got[:m]))
    for rec in result.get("windowed", []):
        i, j, w0, ln = windowed_params(rec["seed"], K, b * N)
        got = np.frombuffer(base64.b64decode(rec["out"]), bits)
        m = min(n, len(got))
        k = np.arange(K)[None, :]
        val = np.where((k >= w0[:m, None]) & (k < (w0 + ln)[:m, None]), ONE[dt], 0.0)
        val = np.where(k == i[:m, None], BIG[dt], val)
        val = np.where(k == j[:m, None], -BIG[dt], val)
        if K == 1:
            val = np.full_like(val, ONE[dt])
        out.append(("probe", _bits(np.ones((m, K)), dt), _bits(val.T, dt), got[:m]))
    return out


def lane_counts(kernel: dict[str, Any]) -> dict[str, int]:
    """The thread counts a kernel may split K over: its block dims x and y, and the integer template arguments
    after its compute type (gemv2T_kernel_val<..., float, 128, 16, 2, 2, ...>; gemv2N_kernel<..., float, 128, S, 4,
    4, 1, ...>, whose S is the count of contiguous K slices its probes read)."""
    out = {"blockDim.x": int(kernel["block"][0]), "blockDim.y": int(kernel["block"][1])}
    m = re.search(r"float, ((?:\d+, )+)", kernel["name"])
    for v in (m.group(1).split(", ")[:-1] if m else []):
        out.setdefault(f"template argument {v}", int(v))
    return out


Candidate = tuple[str, str, str, int]
"""(the axis counting the threads, the grain rule, the tree, the segment): module docstring."""


def grains_of(kernel: str) -> tuple[str, ...]:
    """The dealings the candidates of a kernel (its demangled name) take: :data:`KERNEL_GRAINS`."""
    return next(rules for pattern, rules in KERNEL_GRAINS if pattern.search(kernel))


def candidates(result: dict[str, Any]) -> list[Candidate]:
    """The (thread count, grain rule, tree, segment) candidates whose trees give the probed call's revealed rows (with
    two threads the two trees are one sum: only fp32_forward is kept)."""
    s, rows = result["spec"], revealed(result)
    fits = []
    for axis, L in lane_counts(result["kernels"][0]).items():
        for rule in grains_of(result["kernels"][0]["name"]):
            for tree in TREES:
                if tree == "halving" and (L & (L - 1) or L <= 2):
                    continue
                g = gemv_grain(rule, s["K"], L)
                for seg in SEGMENTS:
                    if rows and all((subtree_sizes(s["K"], L, g, tree, i, seg) == v).all() for i, v in rows.items()):
                        fits.append((axis, rule, tree, seg))
    return fits


def canonical_of(result: dict[str, Any], cand: Candidate) -> tuple:
    """The candidate's sum at the probed call's K (:func:`canonical_order`)."""
    axis, rule, tree, seg = cand
    K, L = result["spec"]["K"], lane_counts(result["kernels"][0])[axis]
    return canonical_order(K, L, gemv_grain(rule, K, L), tree, seg, products_exact(result["spec"]["a_dtype"]))


OUTPUTS_MAX_K = 4096
"""Sampled outputs are evaluated at K up to this (the exact simulator runs an FFMA chain k by k: about 3 ms a step
here, half a minute per candidate at K = 16,383); a call of larger K is judged by its revealed rows alone."""


def differing(result: dict[str, Any], cand: Candidate, n: int) -> tuple[int, int]:
    """(outputs that differ, outputs compared) of the call's samples under the candidate's plan; (0, 0) beyond
    :data:`OUTPUTS_MAX_K`."""
    s = result["spec"]
    if s["K"] > OUTPUTS_MAX_K:
        return 0, 0
    axis, rule, tree, seg = cand
    L = lane_counts(result["kernels"][0])[axis]
    out_dtype = out_dtype_of(result)
    raw = plan_raw({**s, "out_dtype": out_dtype}, L, gemv_grain(rule, s["K"], L), tree, "candidate", seg)
    plan = plan_from_fields(raw, call_from_entry(raw, [1, s["N"], s["K"], s["batch"]], "probe"), "h100", "", "",
                            "probe")
    bad = total = 0
    for _kind, a, b, got in sampled_inputs(result, n):
        y = evaluate_pairs(plan, a, b)
        bad += int((np.asarray(y).astype(got.dtype) != got).sum())
        total += len(got)
    return bad, total


def decide(kernel: str, block: str, results: list[dict[str, Any]], n: int,
           progress=None) -> tuple[dict[str, Any] | None, str]:
    """(the order table's entry for these probed calls of one kernel and block, '') where exactly one candidate's
    plans fit every probe (several that are one sum at every probed K, :func:`canonical_order`, count as one); (None,
    why not) where none or several do; (None, '') where no call revealed rows."""
    common = None
    for r in results:  # calls probed for outputs only (no rows revealed) check the candidates of the others
        if r.get("reveal"):
            c = set(candidates(r))
            common = c if common is None else common & c
    if common is None:
        return None, ""
    fitting = []
    judged: dict[tuple[int, tuple], tuple[int, int]] = {}  # candidates that are one sum at a call's K: judged once
    # where several are one sum: the one without a restart first, then a thread count the kernel's template fixes
    # before a block dim equal to it (a template kernel deals its k's by its code, at every call: the K-range rule)
    for cand in sorted(common, key=lambda c: (c[3], not c[0].startswith("template"), c)):
        counts = []
        for n_r, r in enumerate(results):
            key = (n_r, canonical_of(r, cand))
            if key not in judged:
                judged[key] = differing(r, cand, n)
            counts.append(judged[key])
        if progress:
            progress(f"{kernel[:60]} {block} {cand}: {counts}")
        if all(bad == 0 for bad, _ in counts):
            fitting.append((cand, sum(t for _, t in counts)))
    lanes = lane_counts(results[0]["kernels"][0])
    plans = {tuple(canonical_of(r, c) for r in results) for c, _ in fitting}
    if len(plans) != 1:
        return None, ("no candidate fits every probe" if not plans else
                      f"{len(plans)} candidates fit and differ at the probed K")
    (axis, rule, tree, seg), total = fitting[0]
    ks = sorted({r["spec"]["K"] for r in results})
    return {"kernel": kernel, "block": json.loads(block), "lanes": lanes[axis], "lanes_are": axis, "grain": rule,
            "reduce": tree, **({"segment": seg} if seg else {}), "K": ks, "K_probed": ks, "calls_probed": len(results),
            "rows_revealed": sum(len(r.get("reveal") or {}) for r in results), "outputs_bit_exact": total,
            "calls": sorted({call_shape(r["spec"], r.get("rows", 1)) for r in results}, key=shape_order)}, ""


def call_shape(spec: dict[str, Any], rows: int) -> str:
    """The call a probe or scan ran, as the table lists it: "K op batch M N b_t bias" (b_t 1 where B is the transposed
    view of an (N, K) tensor; ``linear`` takes the weight itself: 0), M the rows of A the GPU ran."""
    return gemv_shape_text(str(spec["op"]), int(spec["K"]), int(spec.get("batch", 1)), int(rows), int(spec["N"]),
                           bool(spec.get("b_t")), bool(spec.get("bias")))


def shape_order(shape: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in shape.split())


def order_table(probes: dict[str, Any], name: str, n: int, progress=None) -> dict[str, Any]:
    """The table: one entry per GEMV kernel and block dims that one candidate fits everywhere."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in probes["results"]:
        ks = r.get("kernels") or []
        if len(ks) != 1 or not GEMV.search(ks[0]["name"].split("<")[0] + " " + ks[0]["name"]):
            continue
        by_key.setdefault((ks[0]["name"], json.dumps(ks[0]["block"])), []).append(r)
    entries, left = [], []
    for (kernel, block), results in sorted(by_key.items()):
        entry, why = decide(kernel, block, results, n, progress)
        by_k = sorted({r["spec"]["K"] for r in results})
        if entry is None and why and len(by_k) > 1:  # no order at every K: one per probed K (applies there only)
            for k in by_k:
                e_k, why_k = decide(kernel, block, [r for r in results if r["spec"]["K"] == k], n, progress)
                if e_k is not None:
                    entries.append({**e_k, "K": [k]})
                elif why_k:
                    left.append({"kernel": kernel, "block": json.loads(block), "K": [k], "why": why_k})
        elif entry is not None:
            entries.append(entry)
        elif why:
            left.append({"kernel": kernel, "block": json.loads(block), "K": by_k, "why": why})
    return {"format": "tcsmt GEMV K orders, v1", "made_by": "python -m tools.library.gemv_orders " + name,
            "device": probes["device"], "method": __doc__.split("\n\n")[1], "orders": entries, "not_decided": left}


def _recorded_block(call: Any, gpu: str) -> str | None:
    """The GEMV block dims the shipped catalog of ``gpu`` recorded for ``call`` (JSON text), or None."""
    from tcsmt.library.lookup import catalogs
    for cat in catalogs():
        if cat.gpu != gpu:
            continue
        for hit in cat.find(call):
            texts = [*hit.plan.sources] if hit.plan is not None else [hit.why]
            for t in texts:
                m = GEMV_BLOCK_NAMED.search(t)
                if m:
                    return json.dumps(json.loads(m.group(1)))
    return None


def refuting(raw_paths: list[Path], gpu: str, table: dict[str, Any]) -> dict[tuple[str, str, int], str]:
    """(kernel, block, K) -> what refuted it: the GEMV calls (K up to :data:`OUTPUTS_MAX_K`, no epilogue) of fresh
    sampled-output files (``tools/device/catalog_sample_run.py``) whose samples differ from the order ``table`` holds
    for their kernel, block (as the catalog of ``gpu`` recorded it) and K.  Each call is evaluated under the new
    table's order itself, not the shipped catalog's plan: a catalog built from a table without the refuted K refuses
    the call, and asking it would bring the refuted order back.  A file made on another GPU refutes this one's entry
    where this GPU recorded the same kernel and block (the same code)."""
    from tcsmt.hwcheck.library_calls import make_inputs
    from tcsmt.library.replay import replay_call
    from tcsmt.library.rules import kernel_key
    from tools.library.catalog_samples import sampled_call
    out: dict[tuple[str, str, int], str] = {}
    for path in raw_paths:
        try:
            with gzip.open(path, "rt") as f:
                raw = json.load(f)
            items = raw["calls"]
            if not isinstance(items, list) or not all(
                    isinstance(i, dict) and {"spec", "dist", "seed", "samples", "kernels"} <= set(i) for i in items):
                raise ValueError("'calls' is not a list of sampled calls (spec, dist, seed, samples, kernels)")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TcsmtError(f"{path}: not a file of tools/device/catalog_sample_run.py ({exc})") from None
        for item in items:
            gemv = [k for k in item.get("kernels") or [] if GEMV.search(k)]
            call, vc = sampled_call(item)
            if len(gemv) != 1 or call.K > OUTPUTS_MAX_K or call.alpha != 1.0 or call.beta != 0.0 or call.bias:
                continue
            key = kernel_key(gemv[0])
            at_k = [e for e in table["orders"] if kernel_key(e["kernel"]) == key and call.K in e["K"]]
            block = _recorded_block(call, gpu) if at_k else None
            for e in at_k:
                if json.dumps(e["block"]) != block:
                    continue
                L = int(e["lanes"])
                spec = {"op": call.op, "a_dtype": call.a_dtype, "out_dtype": call.out_dtype}
                fields = plan_raw(spec, L, gemv_grain(e["grain"], call.K, L), e["reduce"], "refutation check",
                                  int(e.get("segment", 0)))
                plan = plan_from_fields(fields, call, gpu, "", "", "refutation check")
                r = replay_call(vc, make_inputs(vc, int(item["seed"])), plan)
                if r.mismatches:
                    out[(e["kernel"], block, call.K)] = (
                        f"refuted at K = {call.K} by fresh GPU outputs: {item['spec']} ({item['dist']} inputs, seed "
                        f"{item['seed']}), {len(r.mismatches)} of {r.checked} samples differ ({path.name})")
    return out


def drop_refuted(table: dict[str, Any], refuted: dict[tuple[str, str, int], str]) -> None:
    """Take the refuted K values out of the table's entries (an entry left with none goes) into ``not_decided``."""
    kept = []
    for e in table["orders"]:
        hits = {k: why for (kernel, block, k), why in refuted.items()
                if e["kernel"].startswith(kernel) and json.dumps(e["block"]) == block and k in e["K"]}
        for k, why in sorted(hits.items()):
            table["not_decided"].append({"kernel": e["kernel"], "block": e["block"], "K": [k], "why": why})
        e["K"] = [k for k in e["K"] if k not in hits]
        e["calls"] = [c for c in e.get("calls", []) if int(c.split()[0]) not in hits]
        if e["K"]:
            kept.append(e)
    table["orders"] = kept


def write_table(path: Path, table: dict[str, Any]) -> None:
    """The table as gzip-compressed JSON (lists of numbers and strings on one line; no time stamp in the gzip header,
    so the same table gives the same bytes)."""
    text = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
                  json.dumps(table, indent=1), flags=re.S)
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
        g.write((text + "\n").encode())


def read_probes(paths: list[Path]) -> tuple[dict[str, Any], str]:
    """The probe files as one (their results together; the first file's device) and their names as the command
    line gives them; TcsmtError where a file cannot be read or was made on another GPU than the first."""
    merged: dict[str, Any] = {}
    names = []
    for path in paths:
        try:
            with gzip.open(path, "rt") as f:
                data = json.load(f)
            gpu = str(data["device"]).split("'gpu': ")[1].split(",")[0]
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise TcsmtError(f"cannot read {path}: {exc}") from None
        if not merged:
            merged, first_gpu = {**data, "results": list(data["results"])}, gpu
        elif gpu != first_gpu:
            raise TcsmtError(f"{path}: probed on {gpu}, not on {first_gpu} as {paths[0]}")
        else:
            merged["results"] += data["results"]
        names.append(str(path.relative_to(REPO) if path.is_absolute() else path))
    return merged, " ".join(names)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("probes", type=click.Path(exists=True, dir_okay=False, path_type=Path), nargs=-1, required=True)
@click.option("--gpu", default="h100", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--outputs", default=32, show_default=True, help="sampled outputs compared per sampled call")
@click.option("--refuted-by", "refuted_by", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              help="fresh sampled outputs (tools/device/catalog_sample_run.py): a GEMV call whose samples differ "
                   "from the table's own order at its kernel, block and K takes that K out of the table (refuted)")
@click.option("--scan", "scans", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              help="GEMV scans (tools/device/gemv_scan.py): each scanned call where one order fits joins the table "
                   "as a call of its kernel, block and K (tools/library/gemv_scan_fit.py)")
def gemv_orders_cmd(probes: tuple[Path, ...], gpu: str, out: Path | None, outputs: int,
                    refuted_by: tuple[Path, ...], scans: tuple[Path, ...]) -> None:
    from tools.library.gemv_scan_fit import add_scans, read_scans

    def rel(p: Path) -> str:
        return str(p.relative_to(REPO) if p.is_absolute() else p)

    data, names = read_probes(list(probes))
    made = (names + f" --gpu {gpu}" + "".join(f" --refuted-by {rel(p)}" for p in refuted_by)
            + "".join(f" --scan {rel(p)}" for p in scans))
    table = order_table(data, made, outputs, progress=lambda m: print(m, file=sys.stderr, flush=True))
    drop_refuted(table, refuting(list(refuted_by), gpu, table))
    if scans:
        scanned = read_scans(list(scans))
        other = sorted({str(r["gpu"]) for r in scanned} - {table["device"]["gpu"]})
        if other:
            raise TcsmtError(f"scans made on {', '.join(other)}, not on {table['device']['gpu']} as the probes")
        print(add_scans(table, scanned, " ".join(rel(p) for p in scans)), file=sys.stderr)
    out = out or REPO / "models" / "library" / f"{gpu}_gemv_orders.json.gz"
    write_table(out, table)
    print(f"{len(table['orders'])} kernel/block orders written to {out}; {len(table['not_decided'])} not decided")


main = script_main(gemv_orders_cmd, "python -m tools.library.gemv_orders")

if __name__ == "__main__":
    sys.exit(main())
