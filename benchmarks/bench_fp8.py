"""Solver time of the fp8 mma.sync queries (identify on the H100's fp8 paths): discriminate and identify's separation queries.

    python benchmarks/bench_fp8.py [--timeout S] [--repeat N] [--solvers bitwuzla,staged] [--parts 1,2,3]

Part 1 times ``tcsmt discriminate`` pairs on Hopper's e4m3 -> fp32 mma.sync path (the interleaved
32-product circuit); part 2 times identify's separation (:class:`tcsmt.identify.separate.Separator`)
of the Hopper model from ring-1 neighbours of it, once per solver choice: ``bitwuzla`` (bit-blasting
only, the old default) and ``staged`` (local search slice, then bit-blasting: the new default).  Part 3
times the separation of Hopper's e4m3 -> fp16 mma.sync model from the seven hypotheses that survived
the H100 run of 2026-11-24 at its budget (``SURVIVORS_F16``; they need the ``tie`` stage: a rounding
tie made by four products of one block).  Every query of ``bitwuzla`` and ``staged`` runs in one
solver process (one core); ``portfolio`` runs all of identify's stages side by side (six processes).
Prints medians; seconds include the solver start.
Timings depend on the machine and its load: note both with any number you quote.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from types import SimpleNamespace

import click

from tcsmt.arith.registry import resolve
from tcsmt.identify.separate import Separator
from tcsmt.identify.space import Hypothesis, HypothesisSpace, PathInfo
from tcsmt.io.options import POSITIVE_FLOAT, POSITIVE_INT
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.solve.discriminate import discriminate
from tcsmt.solve.inert import canonical

DISCRIMINATE = [
    ("hopper", "hopper:carry_bits=5", 32),  # proven equal: carry bits inert (static pass)
    ("hopper", "hopper:carry_bits=4", 32),
    ("hopper", "blackwell", 32),            # zero_sign / overflow_result: inert on this path
    ("hopper", "hopper:subnormal_out=false", 1),
    ("hopper", "hopper:c_round=rz", 1),
]
NEIGHBOURS = ["carry_bits=4", "carry_bits=3", "subnormal_out=False", "subnormal_c=False", "product_exponent=normalized",
              "block_round=rne", "extra_bits=3", "align=rne", "c_round=rz"]

SURVIVORS_F16 = [  # evidence/identify_h100_e4m3_f16_mma.json of 2026-11-24 (status budget), less the best
    {"extra_bits": "exact"}, {"align": "rne"}, {"align": "floor"}, {"product_exponent": "normalized"},
    {"carry_bits": 4, "product_exponent": "normalized"}, {"align": "rne", "product_exponent": "normalized"},
    {"align": "floor", "product_exponent": "normalized"},
]


def _median(fn, repeat: int) -> tuple[float, str]:
    secs, status = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        status = fn()
        secs.append(time.perf_counter() - t0)
    return statistics.median(secs), status


def part_f16(solvers: list[str], timeout: float, repeat: int) -> None:
    path = PathInfo("e4m3", "fp16", "fp16", "mma", 32, "m16n8k32")
    p = resolve("hopper", "e4m3", "fp16", "mma")
    rep = Hypothesis(canonical(p), "hopper", (0,), 0)
    seps = {s: Separator(path, s, timeout, readable=False) for s in solvers}
    for ch in SURVIVORS_F16:
        h = Hypothesis(canonical(dataclasses.replace(p, **ch)), str(ch), (1,), 1)
        cells = []
        for s in solvers:
            def one(s=s, h=h) -> str:
                st, _, k, _ = seps[s].separate(rep, h)
                return f"{st}, k = {k}"
            med, status = _median(one, repeat)
            cells.append(f"{med:.2f} ({status})")
        name = ",".join(f"{k}={v}" for k, v in ch.items())
        print(f"| identify e4m3 -> fp16: hopper vs +{name} | " + " | ".join(cells) + " |", flush=True)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--timeout", type=POSITIVE_FLOAT, default=30.0, show_default=True, help="seconds per solver query")
@click.option("--repeat", type=POSITIVE_INT, default=1, show_default=True, help="runs per query (the median is printed)")
@click.option("--solvers", default="bitwuzla,staged", show_default=True)
@click.option("--parts", default="1,2,3", show_default=True, help="which tables: 1 discriminate, 2 identify e4m3 -> fp32, "
              "3 identify e4m3 -> fp16")
def bench_cmd(**options: object) -> None:
    _main(SimpleNamespace(**options))


def _main(args: SimpleNamespace) -> None:
    solvers = args.solvers.split(",")
    parts = args.parts.split(",")
    print("| query | " + " | ".join(f"{s} (s)" for s in solvers) + " |")
    print("|---|" + "---|" * len(solvers))
    for m1, m2, k in DISCRIMINATE if "1" in parts else []:
        cells = []
        for s in solvers:
            secs, status = [], ""
            for _ in range(args.repeat):
                o = discriminate([m1, m2], "e4m3", "fp32", "mma", k, solver=s, timeout=args.timeout)
                secs.append(o.seconds)
                status = o.status
            cells.append(f"{statistics.median(secs):.2f} ({status})")
        print(f"| discriminate {m1} {m2} --in e4m3 --out fp32 --k {k} | " + " | ".join(cells) + " |", flush=True)
    if "3" in parts:
        part_f16(solvers, args.timeout, args.repeat)
    if "2" not in parts:
        return
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


main = script_main(bench_cmd, "python benchmarks/bench_fp8.py")

if __name__ == "__main__":
    sys.exit(main())
