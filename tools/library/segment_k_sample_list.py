"""The calls of the GPU check of segment-K plans (``tools/device/segment_k_samples.py``).

    python -m tools.library.segment_k_sample_list [--out tools/device/segment_k_sample_list.json]

Drawn from the calls whose captured launches split tiles (S > 1 in ``evidence/library/h100_segment_k_params.json.gz``
and ``_fresh``) with at most :data:`MAX_ELEMENTS` input elements (the CPU rebuilds every input to replay them): each
such call once, its input distribution cycling through normal, wide and cancel; each ``linear`` call again with a
bias; and :data:`REPEATS` calls again under another distribution.  Seeds count up from :data:`SEED0`.
"""
from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import click

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.segment_k import launch_words

LIB = Path(__file__).resolve().parents[2] / "evidence" / "library"
MAX_ELEMENTS = 16_000_000
DISTS = ("normal", "wide", "cancel")
REPEATS = 8
SEED0 = 7100


def split_specs() -> list[str]:
    """The specs of the captured launches with S > 1 and at most :data:`MAX_ELEMENTS` input elements, smallest
    first (ties by spec)."""
    out = {}
    for name in ("h100_segment_k_params.json.gz", "h100_segment_k_params_fresh.json.gz"):
        with gzip.open(LIB / name, "rt") as f:
            doc = json.load(f)
        for r in doc["results"]:
            for node in r.get("nodes", []):
                if node["node"] == "kernel" and "segment_k_on" in doc["kernel_names"][node["name"]]:
                    if launch_words(bytes.fromhex(node["params"][0][2]))["segments"] > 1:
                        M, N, K = map(int, re.search(r" (\d+)x(\d+)x(\d+) ", r["spec"]).groups())
                        if M * K + K * N <= MAX_ELEMENTS:
                            out[r["spec"]] = M * K + K * N
    return sorted(out, key=lambda s: (out[s], s))


def sample_calls() -> list[dict[str, object]]:
    specs = split_specs()
    calls = [{"spec": s, "dist": DISTS[i % len(DISTS)]} for i, s in enumerate(specs)]
    calls += [{"spec": s.replace(" float32 ", " float32 bias=1 ", 1), "dist": "normal"}
              for s in specs if s.startswith("linear ")]
    calls += [{"spec": s, "dist": DISTS[(i + 1) % len(DISTS)]} for i, s in enumerate(specs[:REPEATS])]
    return [{**c, "seed": SEED0 + i} for i, c in enumerate(calls)]


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path(__file__).resolve().parents[1] / "device" / "segment_k_sample_list.json")
def segment_k_sample_list_cmd(out: Path) -> int:
    calls = sample_calls()
    out.write_text(json.dumps({"made_by": "python -m tools.library.segment_k_sample_list", "calls": calls},
                              indent=0) + "\n")
    print(f"{len(calls)} calls -> {out}")
    return 0


main = script_main(segment_k_sample_list_cmd, "python -m tools.library.segment_k_sample_list")

if __name__ == "__main__":
    sys.exit(main())
