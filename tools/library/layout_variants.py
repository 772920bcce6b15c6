"""Compare the recorded plans of operand-layout variants with their row-major twins, and write which calls a
variant is answered for (:mod:`tcsmt.library.layouts`).

    python -m tools.library.layout_variants evidence/library/recordings/h100_layout_variants.json.gz --gpu h100
        [--json evidence/library/h100_layout_variants.json] [--shipped models/library/layout_variants.json]

The recording (``tools/device/record_plans.py run --list views:...``) holds each variant task (``view``) followed
by its twin, the same calls with row-major operands.  For every call the variant's plan (kernel names, split-K,
reduction scheme, cuBLASLt trace, other graph nodes, torch's refusal) is compared with the twin's.  The evidence
file lists every task with its counts and the calls that differ; the shipped file keeps, per GPU, the runs of
sequence lengths where every call was equal (nothing else is answered), replacing that GPU's earlier entries.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog_build import setting_of, token_counts
from tcsmt.library.catalog_runs import progressions
from tcsmt.library.layouts import VARIANTS

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "models" / "library" / "layout_variants.json"
PLAN_FIELDS = ("kernels", "blocks", "clusters", "grid_z", "other_nodes", "split_k", "reduction_scheme", "lt",
               "torch_error", "capture_error")
COMPARED = ("kernels", "other_nodes", "split_k", "reduction_scheme", "lt", "torch_error", "capture_error")
OPERANDS = {"a_": "A", "b_": "B"}
"""The recorder's view names: the operand's prefix, then the variant (``a_rows_interleaved``)."""


def _plans_by_count(rec: dict[str, Any], task: dict[str, Any]) -> dict[int, tuple]:
    tab = rec["tables"]
    ms = token_counts(task["ms"])
    pos = {t: i for i, t in enumerate(ms)}
    out: dict[int, tuple] = {}
    c = task["runs"]
    t_last = 0
    for gap, span, pid in zip(c["t_gap"], c["t_span"], c["plan"]):
        t_first = t_last + int(gap)
        t_last = t_first + int(span)
        p = dict(zip(PLAN_FIELDS, tab["plans"][pid]))
        view = (tuple(tab["kernels"][k] for k in p["kernels"]), json.dumps(p["other_nodes"]), p["split_k"],
                p["reduction_scheme"], tuple(json.dumps(tab["lt"][k], sort_keys=True) for k in p["lt"]),
                None if p["torch_error"] is None else tab["errors"][p["torch_error"]],
                None if p["capture_error"] is None else tab["errors"][p["capture_error"]])
        for t in ms[pos[t_first]:pos[t_last] + 1]:
            out[t] = view
    return out


def compare(rec: dict[str, Any], name: str, gpu: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the evidence document, the shipped entries of this GPU)."""
    tasks = rec["tasks"]
    rows, entries = [], []
    totals: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        raw = t.get("view")
        if not raw:
            continue
        operand, view = OPERANDS.get(raw[:2]), raw[2:]
        if operand is None or view not in VARIANTS:
            raise TcsmtError(f"{name}: task {i} has the unknown view {raw!r}")
        twin = tasks[i + 1] if i + 1 < len(tasks) else None
        if twin is None or twin.get("view") or twin["call"] != t["call"] or twin["ms"] != t["ms"]:
            raise TcsmtError(f"{name}: task {i} ({view}) is not followed by its row-major twin")
        pv, pt = _plans_by_count(rec, t), _plans_by_count(rec, twin)
        differ = sorted(m for m in pv if pv[m] != pt.get(m))
        equal = sorted(m for m in pv if pv[m] == pt.get(m))
        tot = totals.setdefault(view, [0, 0])
        tot[0] += len(pv)
        tot[1] += len(equal)
        call = {k: t["call"][k] for k in ("op", "M", "N", "K", "batch", "a_dtype", "out_dtype", "a_t", "b_t", "tf32")}
        rows.append({"view": raw, "call": call, "dtype": t.get("dtype"), "product": t.get("product"),
                     "token_counts": t["ms"], "calls": len(pv), "equal": len(equal), "differ": differ[:50],
                     "first_difference": None if not differ else
                     {"at": differ[0], "variant": list(pv[differ[0]]), "row_major": list(pt[differ[0]])}})
        if equal:
            entries.append({"variant": view, "operand": operand, "call": call,
                            "settings": setting_of(rec, call["a_dtype"]),
                            "equal": [list(x) for x in progressions(equal)],
                            "source": f"evidence/library/{gpu}_layout_variants.json, from {name}"})
    doc = {"what": "recorded plans of operand-layout variants against their row-major twins (kernels, other "
                   "graph nodes, split-K, reduction scheme, cuBLASLt trace, torch's refusal), call by call",
           "recording": name, "gpu": gpu, "device": (rec.get("device") or {}).get("gpu"),
           "compared_fields": list(COMPARED),
           "totals": {v: {"calls": n, "equal": e} for v, (n, e) in totals.items()}, "tasks": rows}
    return doc, entries


def _read(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise TcsmtError(f"cannot read {path}: {exc}") from None


_IN = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("recording", type=_IN)
@click.option("--gpu", required=True, help="the GPU the recording was made on (h100, h200)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the evidence file (default evidence/library/<gpu>_layout_variants.json)")
@click.option("--shipped", type=click.Path(dir_okay=False, path_type=Path), default=SHIPPED, show_default=True)
def layout_variants_cmd(recording: Path, gpu: str, json_out: Path | None, shipped: Path) -> int:
    doc, entries = compare(_read(recording), recording.name, gpu)
    out = json_out or REPO / "evidence" / "library" / f"{gpu}_layout_variants.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    ship: dict[str, Any] = json.loads(shipped.read_text()) if shipped.exists() else {}
    ship["what"] = ("calls whose operand layout variant (tcsmt.library.layouts) a recording showed planned like "
                    "its row-major twin; generated by python -m tools.library.layout_variants, never edited")
    ship.setdefault("gpus", {})[gpu] = entries
    ship["gpus"] = dict(sorted(ship["gpus"].items()))
    shipped.write_text(json.dumps(ship, indent=1) + "\n")
    for v, t in doc["totals"].items():
        print(f"{gpu} {v}: {t['equal']} of {t['calls']} calls planned as the row-major twin")
    print(f"written: {out}, {shipped} ({len(entries)} entries for {gpu})")
    return 0


main = script_main(layout_variants_cmd, "python -m tools.library.layout_variants")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
