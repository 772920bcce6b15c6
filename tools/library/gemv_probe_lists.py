"""The next GEMV probe list: calls at the ends of each GEMV kernel's recorded K range that its order was not read at.

    python -m tools.library.gemv_probe_lists --gpu G REC.json.gz [REC ...] -o SPECS.json [--per-variant 3]
        [--spread N] [--unread-only]

A GEMV kernel's K order (``models/library/<gpu>_gemv_orders.json.gz``, :mod:`tools.library.gemv_orders`) applies from
its smallest to its largest probed K only (:func:`tcsmt.library.gemv_rules.gemv_fields`).  This reads the recordings
(every call at M = 1 whose plan is one CUDA-core GEMV kernel, by kernel and block dims) and writes, for each
kernel and block whose recorded K values reach beyond its probed range (or that no probe read), the recorded calls (at any M: ``gemv_probes.py`` reads row 0)
at its smallest and largest recorded K, and one between where ``--per-variant`` asks for three, as
``tools/device/gemv_probes.py`` specs (a ``linear`` call with a bias keeps it: the probe's bias of zeros runs the
kernel cuBLAS picks for a bias and leaves every sum as it is): rows revealed at leaves 0, 1, K/2, K - 2, K - 1, two random-probe calls and
one random-input call each; each spec asks for the recorded call's output dtype (``apply_out_dtype``) and tf32
setting.  ``--spread N`` lists instead, for every kernel and block, up to N recorded K values no
probe read, evenly spaced by rank over its recorded K values: the probes that test whether one order holds over a
kernel's whole K range.  ``--unread-only`` keeps the kernels and blocks the GPU's order table holds nothing of (no
order, no undecided K): ``tools/device/<gpu>_gemv_probes_all_dtypes_list.json`` is ``--spread 8 --unread-only`` over the
GPU's recordings less the fresh random one.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.families import gemv_kernel, kernel_key
from tcsmt.library.gemv_rules import gemv_gaps, gemv_orders
from tcsmt.library.recordings import raw_call, read_recording, recorded_calls

PROBED_OPS = ("mm", "bmm", "linear")
"""What ``tools/device/gemv_probes.py`` makes: A = ones (1, K) (per batch), B in the call's layout."""


def iter_gemv_calls(recordings: list[tuple[str, dict[str, Any]]]) -> Iterator[tuple[tuple[str, tuple[int, ...]], dict[str, Any]]]:
    """((kernel, block), the call as the converter reads it) for every recorded call of the ops the probes run (no
    transposed A, not refused by torch) with bf16, fp16 or fp32 inputs that launched one GEMV kernel."""
    for _name, rec in recordings:
        tables = rec["tables"]
        for tmpl, vary, ts, pid in recorded_calls(rec):
            plan = tables["plans"][pid]
            ks = [tables["kernels"][k] for k in plan[0]]
            if len(ks) != 1 or not gemv_kernel(ks) or not plan[1] or tmpl["op"] not in PROBED_OPS or tmpl.get("a_t"):
                continue
            if vary not in ("M", "K"):  # a sequence length: every dimension the template names by it
                vary = "".join(d for d in "MNK" if tmpl[d] == vary)
            key = (kernel_key(ks[0]), tuple(int(x) for x in plan[1][0]))
            for t in ts:
                c = raw_call(tmpl, vary, t, plan, tables)
                if not c.get("torch_error") and c["a_dtype"] in ("bfloat16", "float16", "float32"):
                    yield key, c


def recorded_gemv_calls(recordings: list[tuple[str, dict[str, Any]]]) -> dict[tuple[str, tuple[int, ...]], dict]:
    """(kernel, block) -> {K: a recorded call (op, M, N, K, batch, dtypes, layout)} over the recordings (the first at
    each K: a kernel that runs several M, as the small-N ``gemmSN`` kernels do, is probed at one)."""
    out: dict[tuple[str, tuple[int, ...]], dict[int, dict[str, Any]]] = {}
    for key, c in iter_gemv_calls(recordings):
        out.setdefault(key, {}).setdefault(int(c["K"]), c)
    return out


def spread(values: list[int], n: int) -> list[int]:
    """Up to ``n`` of the sorted ``values`` evenly spaced by rank, the first and last among them."""
    if len(values) <= n:
        return list(values)
    return sorted({values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)}) if n > 1 else [values[0]]


def probe_list(gpu: str, recordings: list[tuple[str, dict[str, Any]]], per_variant: int,
               spread_over: int = 0, unread_only: bool = False) -> list[dict[str, Any]]:
    """The specs: module docstring."""
    table = gemv_orders(gpu)
    specs: list[dict[str, Any]] = []
    for (kernel, block), by_k in sorted(recorded_gemv_calls(recordings).items()):
        if unread_only and ((kernel, block) in table or (kernel, block) in gemv_gaps(gpu)):
            continue
        probed = sorted({k for e in table.get((kernel, block), []) for k in e["K_probed"]})
        ks = sorted(by_k)
        if spread_over:
            pick = spread([k for k in ks if k not in probed], spread_over)
        else:
            outside = [k for k in ks if not probed or k < probed[0] or k > probed[-1]]
            pick = sorted({*outside[:1], *outside[-1:], *([outside[len(outside) // 2]] if per_variant > 2 and outside
                                                          else [])})[:per_variant]
        for K in pick:
            c = by_k[K]
            specs.append({"op": c["op"], "M": int(c["M"]), "N": int(c["N"]), "K": K, "batch": int(c.get("batch") or 1),
                          "a_dtype": c["a_dtype"], "out_dtype": c.get("out_dtype") or c["a_dtype"],
                          "apply_out_dtype": True, "tf32": bool(c.get("tf32")), "a_t": False,
                          "b_t": bool(c.get("b_t")) or c["op"] == "linear", "bias": bool(c.get("bias")),
                          "variant": kernel[:160],
                          "blocks": [list(block)], "recorded_K": [ks[0], ks[-1]], "probed_K": probed,
                          "reveal_i": sorted({i for i in (0, 1, K // 2, K - 2, K - 1) if 0 <= i < K}),
                          "budget": 2000, "n_windowed": 2, "n_normal": 1})
    return specs


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recordings", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", required=True, help="whose GEMV order table (models/library/<gpu>_gemv_orders.json.gz)")
@click.option("--per-variant", type=click.IntRange(1, 3), default=3, show_default=True)
@click.option("--spread", "spread_over", type=click.IntRange(0, 64), default=0, show_default=True,
              help="instead: up to this many recorded K values of every variant not probed yet, evenly spaced by "
                   "rank over its recorded K values (the smallest and largest among them)")
@click.option("--unread-only", is_flag=True,
              help="only kernels and blocks the GPU's order table holds nothing of (no order, no undecided K)")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def gemv_probe_lists_cmd(recordings: tuple[Path, ...], gpu: str, per_variant: int, spread_over: int,
                         unread_only: bool, out: Path) -> int:
    recs = [(p.name, read_recording(p)) for p in recordings]
    specs = probe_list(gpu, recs, per_variant, spread_over, unread_only)
    out.write_text(json.dumps(specs, indent=0) + "\n")
    print(f"{len(specs)} probe calls of {len({s['variant'] + str(s['blocks']) for s in specs})} kernel variants "
          f"written to {out}")
    return 0


main = script_main(gemv_probe_lists_cmd, "python -m tools.library.gemv_probe_lists")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
