"""The README's batch-invariance table: for each catalog model's layers on each GPU, whether a row's bits depend
on the token count (bf16 forward), and the counts where they change.

    python -m tools.library.invariance_table [--gpu h100 --gpu h200] [--tokens 1..16384] [--cache FILE.jsonl]
        [--readme README.md] [--json OUT.json] [--shard I/N]

Each distinct layer shape (N, K, bias, layout of ``models/library/model_layers.json``) is studied once per GPU
(:func:`tcsmt.library.invariance.study`), with a witness for each pair of plans on the two sides of a change
(a change counts only where its witness separates the two plans; one without is marked ``?``).  The results go
to ``--cache`` one line per shape as they finish, and a rerun reads them back, so an interrupted run loses
nothing it finished.  ``--readme`` replaces the table between the README's ``<!-- invariance-table -->``
markers; without it the table is printed.  A shape the catalogs do not cover is reported with the refusal.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from tcsmt.errors import TcsmtError
from tcsmt.io.progress import Progress
from tcsmt.io.trap import script_main
from tcsmt.library.invariance import layer_call, model_layers, study, witness

START, END = "<!-- invariance-table -->", "<!-- /invariance-table -->"
SHOWN = 6


def shape_key(gpu: str, r: dict[str, Any], lo: int, hi: int) -> str:
    return f"{gpu}:{r['N']}x{r['K']}:{'bias' if r['bias'] else 'nobias'}:{r['layout']}:{lo}..{hi}"


def one_shape(gpu: str, r: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """The study of one layer shape: plans, changes (each with whether a witness separates its two plans)."""
    call = layer_call(int(r["N"]), int(r["K"]), "bfloat16", bias=bool(r["bias"]), layout=r["layout"])
    try:
        st = study(call, gpu, lo, hi)
    except TcsmtError as exc:
        return {"refused": str(exc)}
    for i, j in st.pairs("adjacent"):
        witness(st, i, j)
    changes = [{"at": c.at, "from": c.before, "to": c.after, "shown": st.bits_change(c.before, c.after) is True,
                "what": c.what} for c in st.changes]
    return {"call": st.to_json()["call"], "plans": [c.summary() for c in st.classes],
            "counts": [c.counts for c in st.classes], "changes": changes,
            "witnesses": {f"{i}/{j}": (w.how if w else None) for (i, j), w in st.witnesses.items()}}


def cell(res: dict[str, Any]) -> tuple[str, str, str]:
    """(batch-invariant, plans, the counts where the bits change) for one table row."""
    if "refused" in res:
        return "not recorded", "", res["refused"].split("; the first: ")[-1].split(": ", 1)[-1].split(";")[0]
    ch = res["changes"]
    if not ch:
        return "yes", "1", ""
    shown = [c for c in ch if c["shown"]]
    marks = [f"{c['at']}" + ("" if c["shown"] else "?") for c in ch]
    text = ", ".join(marks[:SHOWN]) + (f", ... ({len(ch)} changes)" if len(ch) > SHOWN else "")
    verdict = "no" if shown else "?"
    return verdict, str(len(res["plans"])), text


def table(rows: list[dict[str, Any]], results: dict[str, dict[str, Any]], gpus: list[str], lo: int, hi: int) -> str:
    head = "| model | layer | N x K | " + " | ".join(f"{g.upper()}: invariant | plans | bits change at M =" for g in gpus)
    lines = [head + " |", "|" + "---|" * (3 + 3 * len(gpus))]
    for r in rows:
        cells = []
        for g in gpus:
            cells += list(cell(results[shape_key(g, r, lo, hi)]))
        shape = f"{r['N']} x {r['K']}" + (" + bias" if r["bias"] else "") + (" (Conv1D)" if r["layout"] == "conv1d" else "")
        lines.append(f"| {r['model']} | {r['layer']} | {shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@click.command(help=__doc__.split("\n\n")[0])
@click.option("--gpu", "gpus", multiple=True, default=("h100", "h200"), show_default=True)
@click.option("--tokens", default="1..16384", show_default=True)
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="results of finished shapes, one JSON line each (read back on a rerun)")
@click.option("--readme", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="replace the table between the markers of this file")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write every shape's result here")
@click.option("--progress", is_flag=True)
@click.option("--shard", default=None, metavar="I/N",
              help="study only the shapes left to do whose place in that list is I mod N, into --cache, and write no "
                   "table (N processes at once, then one run without --shard over their caches joined)")
def main_cmd(gpus: tuple[str, ...], tokens: str, cache: Path | None, readme: Path | None, json_file: Path | None,
             progress: bool, shard: str | None) -> int:
    from tcsmt.cli.invariance_cmd import parse_tokens

    lo, hi = parse_tokens(tokens)
    say = Progress(progress)
    rows = model_layers()["layers"]
    results: dict[str, dict[str, Any]] = {}
    if cache is not None and cache.exists():
        for line in cache.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                results[d["key"]] = d["result"]
    todo = list(dict.fromkeys(shape_key(g, r, lo, hi) for g in gpus for r in rows if shape_key(g, r, lo, hi) not in results))
    by_key = {shape_key(g, r, lo, hi): (g, r) for g in gpus for r in rows}
    if shard is not None:
        try:
            i, n_shards = (int(x) for x in shard.split("/"))
            if not 0 <= i < n_shards:
                raise ValueError
        except ValueError:
            raise TcsmtError(f"--shard takes I/N with 0 <= I < N, not {shard!r}") from None
        if cache is None:
            raise TcsmtError("--shard needs --cache (where the shard's results go)")
        todo = todo[i::n_shards]
    for n, key in enumerate(todo):
        g, r = by_key[key]
        res = one_shape(g, r, lo, hi)
        results[key] = res
        if cache is not None:
            with cache.open("a") as f:
                f.write(json.dumps({"key": key, "result": res}) + "\n")
        say(f"{n + 1} of {len(todo)}: {key}: " + ("refused" if "refused" in res else f"{len(res['plans'])} plans"))
    if shard is not None:
        click.echo(f"shard {shard}: {len(todo)} shapes studied into {cache}")
        return 0
    text = table(rows, results, list(gpus), lo, hi)
    if json_file is not None:
        from tcsmt.library.lookup import catalogs
        from tcsmt.library.plans import tables

        used = [{"catalog": c.name, "gpu": c.gpu, "library": c.library, **c.counts()} for c in catalogs()
                if c.gpu in gpus] + [{"table": Path(t.path).name, "gpu": t.gpu} for t in tables() if t.gpu in gpus]
        json_file.write_text(json.dumps({"tool": "python -m tools.library.invariance_table", "tokens": [lo, hi],
                                         "gpus": list(gpus), "plans_from": used, "shapes": results}, indent=1) + "\n")
    if readme is not None:
        doc = readme.read_text()
        if START not in doc or END not in doc:
            raise TcsmtError(f"{readme} has no {START} ... {END} markers")
        a, rest = doc.split(START, 1)
        _, b = rest.split(END, 1)
        readme.write_text(a + START + "\n" + text + "\n" + END + b)
        click.echo(f"table of {len(rows)} layers written into {readme}")
    else:
        click.echo(text)
    return 0


main = script_main(main_cmd, "python -m tools.library.invariance_table")

if __name__ == "__main__":
    sys.exit(main())
