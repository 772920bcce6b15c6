"""Which K orders fit a GEMV scan (``tools/device/gemv_scan.py``): each scanned call against every candidate order.

    python -m tools.library.gemv_scan_fit points --gpu G REC.json.gz [REC ...] -o POINTS.json[.gz] [--per-variant 150]
    python -m tools.library.gemv_scan_fit table-points --gpu G REC.json.gz [REC ...] -o POINTS.json.gz
    python -m tools.library.gemv_scan_fit fit SCAN.json.gz [SCAN ...] [--json OUT.json]

``table-points`` lists the recorded calls at the order table's own kernel, block and K points, at other shapes than
the probed one (:func:`table_points`): the scans that showed a ``gemvx`` order depends on the call's shape.

``points`` lists recorded GEMV calls (at M = 1 or any M, one kernel, :func:`tools.library.gemv_probe_lists.
recorded_gemv_calls`) whose kernel, block and K the GPU's order table (``models/library/<gpu>_gemv_orders.json.gz``)
does not hold: up to ``--per-variant`` K values per kernel and block, spread evenly over its unprobed recorded K
values (seeded), as ``gemv_scan.py`` points.

``fit`` rebuilds every scanned call's probes (:func:`tools.device.gemv_scan.scan_params`) and computes, by integer
logic, the count each candidate order (:func:`tools.library.gemv_orders.candidates`' space: the thread axis, the
grain rule ``1`` or ``chunk64``, the tree ``halving`` or ``fp32_forward``, the segment) predicts for each kept
output: the window's k's (not i, j) outside the subtree where i and j first meet (:func:`window_counts`).  A call's
fitting candidates are those that predict every kept count; candidates that compute one sum at the call's K
(:func:`tools.library.gemv_orders.canonical_order`) count as one.  Printed: per kernel and block, each scanned K with
the fitting candidates, and a summary.
"""
from __future__ import annotations

import base64
import collections
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.gemv_rules import gemv_orders, products_exact
from tcsmt.library.recordings import read_recording
from tools.device.gemv_scan import scan_params
from tools.library.gemv_orders import SEGMENTS, TREES, Candidate, canonical_order, gemv_grain, grains_of, lane_counts
from tools.library.gemv_probe_lists import iter_gemv_calls, recorded_gemv_calls


def window_counts(K: int, L: int, g: int, tree: str, seg: int, i: np.ndarray, j: np.ndarray, w0: np.ndarray,
                  n: np.ndarray) -> np.ndarray:
    """Per probe p: the k's of the window [w0_p, w0_p + n_p) other than i_p, j_p that lie outside the subtree where
    i_p and j_p first meet, when thread (k // g) mod L chains its k's in order (restarting from +0 after every ``seg``
    of them, the segment sums added in order) and the L thread sums meet by ``tree``.  (Thread t's k's are the
    tiles q = k // g with q mod L = t; a k's place in its thread is (q // L) g + k mod g.)"""
    def place(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = k // g
        return q % L, (q // L) * g + k % g

    width = int(n.max())
    k = w0[:, None] + np.arange(width)[None, :]
    inside = (np.arange(width)[None, :] < n[:, None]) & (k != i[:, None]) & (k != j[:, None])
    k = np.minimum(k, K - 1)
    lane, pos = place(k)
    li, pi = place(i)
    lj, pj = place(j)
    same = (li == lj)[:, None]
    if seg:
        si, sj, sk = pi // seg, pj // seg, pos // seg
        same_seg = (si == sj)[:, None]
        chain = (lane == li[:, None]) & np.where(same_seg, (sk == si[:, None]) & (pos <= np.maximum(pi, pj)[:, None]),
                                                  sk <= np.maximum(si, sj)[:, None])
    else:
        chain = (lane == li[:, None]) & (pos <= np.maximum(pi, pj)[:, None])
    x = li ^ lj
    if tree == "halving":
        low = np.where(x == 0, 1, x & -x)
        apart = (lane % low[:, None]) == (li % low)[:, None]
    else:
        apart = lane <= np.maximum(li, lj)[:, None]
    subtree = np.where(same, chain, apart)
    return (inside & ~subtree).sum(axis=1)


def counts_of(result: dict[str, Any]) -> np.ndarray | None:
    if "counts" not in result:
        return None
    return np.frombuffer(base64.b64decode(result["counts"]), np.uint8).astype(np.int64)


def fitting(result: dict[str, Any], kernel: dict[str, Any]) -> list[tuple[Candidate, tuple]]:
    """(candidate, its canonical sum at K) for every candidate that predicts each kept count of the scanned call."""
    got = counts_of(result)
    s = result["spec"]
    K, P = int(s["K"]), int(s["batch"]) * int(s["N"])
    if got is None or K < 3:
        return []
    i, j, w0, n = (x[:len(got)] for x in scan_params(int(result["seed"]), K, P))
    out = []
    exact = products_exact(s.get("a_dtype"))  # scans ran 16-bit inputs (tools/device/gemv_scan.py)
    for axis, L in lane_counts(kernel).items():
        for rule in grains_of(kernel["name"]):
            for tree in TREES:
                if tree == "halving" and (L & (L - 1) or L <= 2):
                    continue
                g = gemv_grain(rule, K, L)
                for seg in SEGMENTS:
                    if (window_counts(K, L, g, tree, seg, i, j, w0, n) == got).all():
                        out.append(((axis, rule, tree, seg), canonical_order(K, L, g, tree, seg, exact)))
    return out


def add_scans(table: dict[str, Any], results: list[dict[str, Any]], names: str) -> dict[str, int]:
    """Add the scanned calls to an order ``table`` (:func:`tools.library.gemv_orders.order_table`'s): every scanned
    GEMV call (one kernel, K >= 3, counts kept) at which exactly one order fits (candidates that are one sum at its K
    count as one; of those, the one without a restart, then the first) joins the entry of its kernel, block and order
    made from scans, as a call (:func:`tools.library.gemv_orders.call_shape`) at its K.  A call that probes and scans
    (or two scans) give different orders leaves every entry and goes to ``not_decided``.  Returns counts."""
    from tools.library.gemv_orders import GEMV, call_shape, shape_order

    forms: dict[tuple[str, str, str], set[tuple]] = collections.defaultdict(set)
    for e in table["orders"]:  # the probes' calls, under the probed order
        L = int(e["lanes"])
        for c in e.get("calls", []):
            K = int(c.split()[0])
            g = gemv_grain(e["grain"], K, L)
            forms[(e["kernel"], json.dumps(e["block"]), c)].add(canonical_order(K, L, g, e["reduce"], int(e.get("segment", 0))))
    made: dict[tuple[str, str, Candidate], dict[str, Any]] = {}
    counts: collections.Counter[str] = collections.Counter()
    for r in results:
        ks = r.get("kernels") or []
        if r.get("skipped") or r.get("error") or len(ks) != 1 or not GEMV.search(ks[0]["name"]):
            counts["not one GEMV kernel"] += 1
            continue
        fits = fitting(r, ks[0])
        if len({f for _c, f in fits}) != 1:
            counts[f"{'no order' if not fits else 'several orders'} fit"] += 1
            continue
        cand, form = min(fits, key=lambda cf: (cf[0][3], cf[0]))
        block = json.dumps(ks[0]["block"])
        shape = call_shape(r["spec"], r.get("rows", 1))
        forms[(ks[0]["name"], block, shape)].add(form)
        axis, rule, tree, seg = cand
        e = made.setdefault((ks[0]["name"], block, cand), {
            "kernel": ks[0]["name"], "block": ks[0]["block"], "lanes": lane_counts(ks[0])[axis], "lanes_are": axis,
            "grain": rule, "reduce": tree, **({"segment": seg} if seg else {}), "K": [], "K_probed": [],
            "calls_probed": 0, "calls_scanned": 0, "rows_revealed": 0, "outputs_bit_exact": 0,
            "probes_fitted": 0, "calls": [], "scans": names})
        e["calls_scanned"] += 1
        e["probes_fitted"] += len(counts_of(r) if counts_of(r) is not None else [])
        e["calls"].append(shape)
        counts["one order fits"] += 1
    clash = {key for key, f in forms.items() if len(f) > 1}
    for e in list(table["orders"]) + list(made.values()):
        e["calls"] = [c for c in e.get("calls", []) if (e["kernel"], json.dumps(e["block"]), c) not in clash]
    table["not_decided"] += [{"kernel": k, "block": json.loads(b), "K": [int(c.split()[0])], "call": c,
                              "why": "probes and scans of this call fit different orders"} for k, b, c in sorted(clash)]
    for e in made.values():
        e["calls"] = sorted(set(e["calls"]), key=shape_order)
        e["K"] = sorted({int(c.split()[0]) for c in e["calls"]})
        if e["calls"]:
            table["orders"].append(e)
    counts["calls where probes and scans disagree"] = len(clash)
    return dict(counts)


def scan_points(gpu: str, recordings: list[tuple[str, dict[str, Any]]], per_variant: int,
                seed: int = 0) -> list[dict[str, Any]]:
    """The points: module docstring."""
    table = gemv_orders(gpu)
    rng = random.Random(seed)
    points = []
    for (kernel, block), by_k in sorted(recorded_gemv_calls(recordings).items()):
        probed = {k for e in table.get((kernel, block), []) for k in e["K"]}
        ks = sorted(k for k in by_k if k not in probed and k >= 3  # the scan makes a_dtype outputs (another
                    and by_k[k].get("out_dtype", by_k[k]["a_dtype"]) == by_k[k]["a_dtype"])  # kernel than fp32's)
        if len(ks) > per_variant:
            step = len(ks) / per_variant
            ks = sorted({ks[min(len(ks) - 1, int(n * step + rng.random() * step))] for n in range(per_variant)})
        for k in ks:
            c = by_k[k]
            points.append({"op": c["op"], "batch": int(c.get("batch", 1)), "N": int(c["N"]), "K": int(c["K"]),
                           "M": int(c.get("M", 1)), "a_dtype": c["a_dtype"], "out_dtype": c["a_dtype"],
                           "b_t": bool(c.get("b_t") or c["op"] == "linear"), "bias": bool(c.get("bias")),
                           "recorded_block": list(block)})
    return points


def table_points(gpu: str, recordings: list[tuple[str, dict[str, Any]]], table: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]],
                 per_point: int = 6) -> list[dict[str, Any]]:
    """Recorded 16-bit GEMV calls (a_dtype outputs, no transposed A) at the kernel, block and K points ``table``
    holds: per point, up to ``per_point`` of its call shapes (op, batch, N, layout, bias) spread over batch x N, each
    at its smallest and largest recorded M (``tools/device/gemv_scan_table_<gpu>.json.gz``, the H100's and H200's
    tables of 2026-11-27 before scans joined them)."""
    shapes: dict[tuple[tuple[str, tuple[int, ...]], int], dict[tuple, list[int]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for key, c in iter_gemv_calls(recordings):
        K = int(c["K"])
        if c.get("out_dtype", c["a_dtype"]) != c["a_dtype"] or not any(K in e["K"] for e in table.get(key, [])):
            continue
        group = (c["op"], int(c.get("batch", 1)), int(c["N"]), c["a_dtype"],
                 bool(c.get("b_t") or c["op"] == "linear"), bool(c.get("bias")))
        shapes[(key, K)][group].append(int(c.get("M", 1)))
    points = []
    for (key, K), groups in sorted(shapes.items()):
        items = sorted(groups.items(), key=lambda t: (t[0][1] * t[0][2], t[0]))
        if len(items) > per_point:
            items = [items[round(i * (len(items) - 1) / (per_point - 1))] for i in range(per_point)]
        for (op, b, N, dt, bt, bias), Ms in items:
            for M in sorted({min(Ms), max(Ms)}):
                points.append({"op": op, "batch": b, "N": N, "K": K, "M": M, "a_dtype": dt, "out_dtype": dt,
                               "b_t": bt, "bias": bias, "recorded_block": list(key[1])})
    return points


def read_scans(paths: list[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        try:
            with gzip.open(path, "rt") as f:
                data = json.load(f)
            names = data["kernel_names"]
            for r in data["results"]:
                for k in r.get("kernels") or []:
                    k["name"] = names[k["name"]]
                r["gpu"] = data["device"]["gpu"]
                out.append(r)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise TcsmtError(f"cannot read {path} as a gemv_scan.py run: {exc}") from None
    return out


def fit_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    by_key: dict[tuple[str, str], list[tuple[int, list]]] = collections.defaultdict(list)
    why: collections.Counter[str] = collections.Counter()
    for r in results:
        ks = r.get("kernels") or []
        if r.get("skipped") or r.get("error") or len(ks) != 1:
            why["skipped, failed or not one kernel"] += 1
            continue
        fits = fitting(r, ks[0])
        forms = {f for _c, f in fits}
        why[f"{min(len(forms), 2)} orders fit"] += 1
        by_key[(ks[0]["name"], json.dumps(ks[0]["block"]))].append((int(r["spec"]["K"]), sorted({c for c, _f in fits})))
    return {"calls": dict(why), "by_kernel": {f"{k[:160]} {b}": sorted(v) for (k, b), v in sorted(by_key.items())}}


@click.group(context_settings=CONTEXT_SETTINGS)
def cli() -> None:
    """GEMV K-order scans: the points to scan, and the orders that fit them."""


@cli.command("points")
@click.argument("recordings", type=click.Path(exists=True, dir_okay=False, path_type=Path), nargs=-1, required=True)
@click.option("--gpu", required=True)
@click.option("-o", "out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--per-variant", default=150, show_default=True)
def points_cmd(recordings: tuple[Path, ...], gpu: str, out: Path, per_variant: int) -> None:
    recs = [(p.name, read_recording(p)) for p in recordings]
    pts = scan_points(gpu, recs, per_variant)
    with (gzip.open if out.suffix == ".gz" else open)(out, "wt") as f:
        json.dump(pts, f, separators=(",", ":"))
    print(f"{len(pts)} points -> {out}")


@cli.command("table-points")
@click.argument("recordings", type=click.Path(exists=True, dir_okay=False, path_type=Path), nargs=-1, required=True)
@click.option("--gpu", required=True)
@click.option("-o", "out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def table_points_cmd(recordings: tuple[Path, ...], gpu: str, out: Path) -> None:
    pts = table_points(gpu, [(p.name, read_recording(p)) for p in recordings], gemv_orders(gpu))
    with (gzip.open if out.suffix == ".gz" else open)(out, "wt") as f:
        json.dump(pts, f, separators=(",", ":"))
    print(f"{len(pts)} points -> {out}")


@cli.command("fit")
@click.argument("scans", type=click.Path(exists=True, dir_okay=False, path_type=Path), nargs=-1, required=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def fit_cmd(scans: tuple[Path, ...], json_out: Path | None) -> None:
    rep = fit_report(read_scans(list(scans)))
    print(json.dumps(rep["calls"]))
    for key, rows in rep["by_kernel"].items():
        print(key)
        for K, cands in rows:
            print("   ", K, cands)
    if json_out:
        json_out.write_text(json.dumps(rep, indent=1) + "\n")


main = script_main(cli, "python -m tools.library.gemv_scan_fit")

if __name__ == "__main__":
    sys.exit(main())
