"""What the segment-K swamping probes say, tile by tile (``tools/device/segment_k_probe.py``; its docstring has the method).

    python -m tools.library.segment_k_probes evidence/library/h100_segment_k_probes.json.gz [--json OUT.json]

For every probed call: the kernel's output tiles (its name's ``tilesize<a>x<b>``: a along torch's N, b along M,
cuBLAS computing the column-major C^T), and for each tile the rows' verdicts: output (i, j) equal to the 1s after x_i
(one K-chain, or x_i in the first segment), else the end of the segment holding x_i, as the probe's sum says
(the 1s at or after that end survive).  Per call: the tiles split (some output differs from one K-chain), how the split
tiles cut K (the interval where the first segment ends: the largest x_i still in it, the smallest x_i past it; and
the ends read for the rest), and whether every split tile cuts alike.  Nothing here is a rule; it is what a rule must
reproduce.
"""
from __future__ import annotations

import base64
import collections
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.lookup import parse_record_spec
from tools.device.segment_k_probe import probe_x


def call_summary(item: dict[str, Any]) -> dict[str, Any]:
    """The tiles of one probed call and how its split tiles cut K (module docstring)."""
    call = parse_record_spec(item["spec"])
    cols = np.asarray(item["cols"])
    out = np.frombuffer(gzip.decompress(base64.b64decode(item["out"])), dtype=np.uint32)
    counts = out.reshape(call.M, len(cols)).view(np.float32).astype(np.int64)
    k8 = (call.K + 7) // 8
    xs = probe_x(call.M, call.K)
    kernel = next(k for k in item["kernels"] if "xmma" in k)
    tile_n, tile_m = map(int, re.search(r"tilesize(\d+)x(\d+)x", kernel).groups())
    one_chain = counts == (k8 - 1 - xs // 8)[:, None]
    cuts: dict[tuple[int, int], tuple] = {}
    for tm in range(-(-call.M // tile_m)):
        rows = slice(tm * tile_m, min(call.M, (tm + 1) * tile_m))
        for tn in range(-(-call.N // tile_n)):
            sel = (cols >= tn * tile_n) & (cols < (tn + 1) * tile_n)
            ok, x, c = one_chain[rows][:, sel], xs[rows], counts[rows][:, sel]
            if ok.all():
                continue
            past = ~ok.all(axis=1)
            first_past = int(x[past].min())
            inside = x[ok.all(axis=1) & (x < first_past)]
            ends = sorted({int(8 * (k8 - v)) for v in c[~ok].ravel()})
            cuts[(tn, tm)] = ((int(inside.max()) if inside.size else 0, first_past), tuple(ends))
    kinds = collections.Counter(cuts.values())
    grid = item.get("recorded_grid")
    return {"spec": item["spec"], "kernel": kernel, "tiles": [-(-call.N // tile_n), -(-call.M // tile_m)],
            "k_iterations": -(-call.K // 32), "grid": grid, "ctas": int(np.prod(grid[0])) if grid else None,
            "tiles_split": len(cuts), "cuts_alike": len(kinds) <= 1,
            "cuts": [{"first_segment_ends_in": list(k[0]), "ends_read": list(k[1]), "tiles": n}
                     for k, n in kinds.most_common()]}


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("probes", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def segment_k_probes_cmd(probes: Path, json_out: Path | None) -> int:
    with gzip.open(probes, "rt") as f:
        doc = json.load(f)
    calls = [call_summary(c) for c in doc["calls"]]
    for c in calls:
        cut = c["cuts"][0] if c["cuts"] else None
        print(f"{c['spec']:44s} tiles {c['tiles'][0]}x{c['tiles'][1]} I={c['k_iterations']} CTAs={c['ctas']} "
              f"split {c['tiles_split']}{'' if c['cuts_alike'] else ' (cut unalike)'}"
              + (f": first segment ends in {cut['first_segment_ends_in']}, ends {cut['ends_read']}" if cut else ""))
    res = {"what": "segment-K probes, tile by tile", "probes": str(probes), "stamp": doc.get("stamp"),
           "command": "python -m tools.library.segment_k_probes " + " ".join(sys.argv[1:]), "calls": calls,
           "calls_with_split_tiles": sum(1 for c in calls if c["tiles_split"]),
           "calls_cut_alike": sum(1 for c in calls if c["cuts_alike"])}
    if json_out is not None:
        json_out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


main = script_main(segment_k_probes_cmd, "python -m tools.library.segment_k_probes")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
