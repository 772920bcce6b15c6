"""Solver time of the fp8 mma.sync queries (issue 14 item 3): discriminate and identify's separation queries.

    python benchmarks/bench_fp8.py [--timeout S] [--repeat N] [--solvers bitwuzla,staged]

Part 1 times ``tcsmt discriminate`` pairs on Hopper's e4m3 -> fp32 mma.sync path (the interleaved
32-product circuit); part 2 times identify's separation (:class:`tcsmt.identify_separate.Separator`)
of the Hopper model from ring-1 neighbours of it, once per solver choice: ``bitwuzla`` (bit-blasting
only, the old default) and ``staged`` (local search slice, then bit-blasting: the new default).  Every
query runs in one solver process (one core).  Prints medians; seconds include the solver start.
Timings depend on the machine and its load: note both with any number you quote.
"""
from __future__ import annotations

import argparse
import statistics
import time

from tcsmt.discriminate import discriminate
from tcsmt.identify_separate import Separator
from tcsmt.identify_space import HypothesisSpace, PathInfo

DISCRIMINATE = [
    ("hopper", "hopper:carry_bits=5", 32),  # proven equal: carry bits inert (static pass)
    ("hopper", "hopper:carry_bits=4", 32),
    ("hopper", "blackwell", 32),            # zero_sign / overflow_result: inert on this path
    ("hopper", "hopper:subnormal_out=false", 1),
    ("hopper", "hopper:c_round=rz", 1),
]
NEIGHBOURS = ["carry_bits=4", "carry_bits=3", "subnormal_out=False", "subnormal_c=False", "product_exponent=normalized",
              "block_round=rne", "extra_bits=3", "align=rne", "c_round=rz"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--solvers", default="bitwuzla,staged")
    args = ap.parse_args()
    solvers = args.solvers.split(",")
    print("| query | " + " | ".join(f"{s} (s)" for s in solvers) + " |")
    print("|---|" + "---|" * len(solvers))
    for m1, m2, k in DISCRIMINATE:
        cells = []
        for s in solvers:
            secs, status = [], ""
            for _ in range(args.repeat):
                o = discriminate([m1, m2], "e4m3", "fp32", "mma", k, solver=s, timeout=args.timeout)
                secs.append(o.seconds)
                status = o.status
            cells.append(f"{statistics.median(secs):.2f} ({status})")
        print(f"| discriminate {m1} {m2} --in e4m3 --out fp32 --k {k} | " + " | ".join(cells) + " |", flush=True)
    path = PathInfo("e4m3", "fp32", "fp32", "mma", 32, "m16n8k32")
    hyps = {h.name: h for h in HypothesisSpace.for_path(path, 1)}
    rep = hyps["blackwell = hopper"]
    seps = {s: Separator(path, s, args.timeout, readable=False) for s in solvers}
    for n in NEIGHBOURS:
        h = hyps.get(f"blackwell+{n}")
        if h is None:
            continue
        cells = []
        for s in solvers:
            secs, status = [], ""
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                st, _, k, _ = seps[s].separate(rep, h)
                secs.append(time.perf_counter() - t0)
                status = f"{st}, k = {k}"
            cells.append(f"{statistics.median(secs):.2f} ({status})")
        print(f"| identify: hopper vs +{n} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
