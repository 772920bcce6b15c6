"""Time of one plan lookup (``tcsmt.library.explain``) over the shipped plan catalogs.

    python benchmarks/bench_library_lookup.py [--gpu h100] [--n 5000] [--seed 0]

Draws ``n`` calls of the catalog's layers (a recorded run's family, a random token count inside the run), looks
each up once after a warm-up (the first lookup opens the catalogs and loads the plan tables), and prints the
median, the 90th percentile and the maximum time per lookup, and the installed size of the catalogs.
"""
from __future__ import annotations

import json
import random
import sqlite3
import statistics
import sys
import time

import click

from tcsmt.io.options import NON_NEGATIVE_INT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.api import explain
from tcsmt.library.catalog import catalogs_in
from tcsmt.library.plans import plans_dir


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--gpu", default="h100", show_default=True)
@click.option("--n", type=POSITIVE_INT, default=5000, show_default=True)
@click.option("--seed", type=NON_NEGATIVE_INT, default=0, show_default=True)
def bench_cmd(gpu: str, n: int, seed: int) -> int:
    cats = [c for c in catalogs_in(plans_dir()) if c.gpu == gpu]
    if not cats:
        click.echo(f"no catalog of {gpu} in {plans_dir()}", err=True)
        return 2
    rng = random.Random(seed)
    calls = []
    for cat in cats:
        db = sqlite3.connect(f"file:{cat.path}?mode=ro", uri=True)
        fams = dict(db.execute("SELECT id, key FROM families"))
        rows = db.execute("SELECT family, vary, d1, d2, lo, hi, step FROM runs").fetchall()
        for fam, vary, d1, d2, lo, hi, step in rng.sample(rows, min(n, len(rows))):
            key = json.loads(fams[fam])
            op, batch, a, b, out, tf32, scale, fast, bias, _alpha1, _beta0, a_t, b_t, settings = key
            t = lo + step * rng.randrange((hi - lo) // step + 1)
            dims = dict(zip([d for d in "MNK" if d not in vary], (d1, d2)))
            dims.update({d: t for d in vary})
            calls.append(dict(op=op, M=dims["M"], N=dims["N"], K=dims["K"], batch=batch, a_dtype=a, b_dtype=b,
                              out_dtype=out, tf32=tf32, scale=scale, fast_accum=fast, bias=bias, a_t=a_t, b_t=b_t,
                              settings=settings))
    calls = calls[:n]

    def one(c: dict) -> float:
        t0 = time.perf_counter()
        try:
            explain(c["op"], c["M"], c["N"], c["K"], gpu=gpu, a_dtype=c["a_dtype"], b_dtype=c["b_dtype"],
                    out_dtype=c["out_dtype"], batch=c["batch"], tf32=c["tf32"], scale=c["scale"],
                    fast_accum=c["fast_accum"], bias=c["bias"], a_t=c["a_t"], b_t=c["b_t"], settings=c["settings"],
                    beta=1.0 if c["op"] == "addmm" and c["bias"] else 0.0)
        except Exception:  # a recorded refusal is a lookup too
            pass
        return time.perf_counter() - t0

    first = one(calls[0])
    times = sorted(one(c) for c in calls)
    size = sum(c.path.stat().st_size for c in cats)
    click.echo(f"{gpu}: {len(times)} lookups; first (opens the catalogs, loads the tables) {first * 1e3:.0f} ms; "
               f"median {statistics.median(times) * 1e6:.0f} us, p90 {times[int(0.9 * len(times))] * 1e6:.0f} us, "
               f"max {times[-1] * 1e6:.0f} us; catalogs {size / 2**20:.1f} MiB")
    return 0


main = script_main(bench_cmd, "python benchmarks/bench_library_lookup.py")

if __name__ == "__main__":
    sys.exit(main())
