"""How much of what was recorded the plan catalogs answer: the README's coverage table, from the catalogs alone.

    python -m tools.library.catalog_coverage [--gpu h100 --gpu h200] [--json OUT.json]

Every recorded call of a catalog (``models/library/<gpu>_cublas13_catalog.sqlite``; each run counts its token
counts) is answered (its plan row holds a plan) or refused (a ``why``).  Rows group the calls by settings and
dtypes as the README's table does: all calls; the bf16 and fp16 calls under torch's default settings (every op:
the model layers' training products, attention, random shapes); bf16 -> fp32; tf32; each ``_scaled_mm`` kind;
bf16 under each setting; and the 16-bit calls under default settings split into linear-layer products
(``mm``, ``linear``, ``addmm``) and attention ``bmm``.  The reasons for the refused calls are counted too (first 90 characters).
"""
from __future__ import annotations

import collections
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.catalog import read_plans
from tcsmt.library.plans import plans_dir


def group_of(key: list[Any]) -> str:
    """The table row of a call family key (:meth:`tcsmt.library.plans.Call.family_key`)."""
    op, _batch, a, _b, out, tf32, scale, fast, *_rest, settings = key
    if op == "scaled_mm":
        dt = f"scaled_mm {a} -> {out}" + (" fast" if fast else "") + (" row-wise" if scale == "row" else "")
    elif tf32:
        dt = "tf32"
    else:
        dt = a if a == out else f"{a} -> {out}"
    return f"{dt}, settings {settings}"


def op_group_of(key: list[Any]) -> str | None:
    """The README's split of the 16-bit calls under default settings (``dtype, linear-layer products`` for ``mm``,
    ``linear``, ``addmm``; ``dtype, attention bmm`` for ``bmm``), or None for any other call."""
    op, _batch, a, _b, out, tf32, *_rest, settings = key
    if settings != "default" or tf32 or a != out or a not in ("bfloat16", "float16"):
        return None
    return f"{a}, {'attention bmm' if op == 'bmm' else 'linear-layer products'}, settings default"


def coverage(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TcsmtError(f"no plan catalog {path} (the shipped GPUs: h100, h200)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    refused = {i: f.get("why") for i, f in read_plans(db).items()}
    fams = {int(i): json.loads(k) for i, k in db.execute("SELECT id, key FROM families")}
    total: collections.Counter[str] = collections.Counter()
    answered: collections.Counter[str] = collections.Counter()
    why: collections.Counter[str] = collections.Counter()
    splits: set[str] = set()
    for fam, lo, hi, step, pid in db.execute("SELECT family, lo, hi, step, plan FROM runs"):
        n = (hi - lo) // step + 1
        g, split = group_of(fams[fam]), op_group_of(fams[fam])
        if split:
            splits.add(split)
        for grp in (g, split) if split else (g,):
            total[grp] += n
            if refused[pid] is None:
                answered[grp] += n
        if refused[pid] is not None:
            why[str(refused[pid])[:90]] += n
    db.close()
    rows = {g: {"answered": answered[g], "calls": total[g]} for g in sorted(total)}
    whole = [g for g in total if g not in splits]  # the op split counts calls its dtype row holds already
    return {"catalog": path.name, "answered": sum(answered[g] for g in whole), "calls": sum(total[g] for g in whole),
            "rows": rows,
            "refusals": dict(why.most_common(15))}


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the figures here")
def coverage_cmd(gpus: tuple[str, ...], json_out: str | None) -> None:
    """Count the recorded calls each shipped catalog answers, by dtype and settings."""
    doc = {}
    for g in gpus:
        c = coverage(plans_dir() / f"{g}_cublas13_catalog.sqlite")
        doc[g] = c
        print(f"{g}: {c['answered']:,} of {c['calls']:,} recorded calls answered ({100 * c['answered'] / c['calls']:.1f}%)")
        for name, r in c["rows"].items():
            print(f"  {name}: {r['answered']:,} of {r['calls']:,} ({100 * r['answered'] / r['calls']:.1f}%)")
        for w, n in c["refusals"].items():
            print(f"    refused {n:,}: {w}")
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=1) + "\n")


main = script_main(coverage_cmd, "python -m tools.library.catalog_coverage")

if __name__ == "__main__":
    sys.exit(main())
