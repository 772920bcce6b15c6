"""Do the H100's split-K rules hold at the plans the H200 picks where they differ from the H100's?  (evidence/library_plans.md,
"H200"; an experiment on committed files, not the h200 plan table.)

    python -m tools.library.h200_own_plans [-o evidence/h200_library_replay_own_plans.json]

Takes the H200 validation calls whose recorded plan (kernel names, split_k, cuBLASLt reductionScheme) differs from
the H100's for the same call and inputs, converts each with :func:`tcsmt.library.convert.convert` from the H200's
own recorded kernels and split_k, with the H100 plan file's split-K families (slice rule, reduction) and the H100
decisions, and replays its sampled H200 outputs (:func:`tcsmt.library.replay.replay_file`).  ``convert`` makes
one GPU's table from files of one GPU, so the H200 calls are passed under the H100 plan file's GPU name; the
table is only used here, never written to ``models/library``: ``gpu="h200"`` still refuses these calls.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from tcsmt.hwcheck.library_calls import CALL_FIELDS, make_inputs
from tcsmt.io.load import read_json
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.convert import convert
from tcsmt.library.families import plan_signature
from tcsmt.library.plans import Plan, load_table
from tcsmt.library.replay import replay_file, report

RESULTS = Path(__file__).resolve().parents[2] / "evidence"


def differing(v200: dict[str, Any], v100: dict[str, Any]) -> list[int]:
    """Indices of the H200 validation calls whose plan signature differs from the H100's (same call, same seed)."""
    theirs = {(*(c[k] for k in CALL_FIELDS), c["seed"]): plan_signature(c) for c in v100["calls"]}
    return [n for n, c in enumerate(v200["calls"])
            if theirs.get((*(c[k] for k in CALL_FIELDS), c["seed"])) != plan_signature(c)]


def own_plans(p100: dict[str, Any], v200: dict[str, Any], dec: dict[str, Any], idx: list[int]) -> dict[int, Plan]:
    """Plans of the calls ``idx`` of the H200 validation file from their own kernels and S, H100 families."""
    raw = {k: v for k, v in p100.items() if k != "calls"} | {"calls": []}
    calls = {"gpu": p100["gpu"], "cublas": v200["cublas"], "cublaslt": v200["cublaslt"], "torch": v200["torch"],
             "calls": [v200["calls"][n] for n in idx]}
    text = convert(raw, "h100_cublas_plans.json (families only)", "h200",
                   [("h200_library_validation.json (calls whose plan differs)", calls)], dec,
                   "h100_library_decisions.json", certain=False)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h200_own.toml"
        path.write_text(text)
        table = load_table(path)
    by_call = {tuple(getattr(p.call, k) for k in CALL_FIELDS): p for p in table.plans}
    out = {}
    for n in idx:
        p = by_call.get(tuple(v200["calls"][n][k] for k in CALL_FIELDS))
        if p is not None:
            out[n] = p
    return out


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              default=RESULTS / "h200_library_replay_own_plans.json", show_default=True)
def own_plans_cmd(out: Path) -> None:
    def load(name: str) -> Any:
        return read_json(RESULTS / name, "evidence file")

    p100, v100 = load("h100_cublas_plans.json.gz"), load("h100_library_validation.json.gz")
    v200, dec = load("h200_library_validation.json.gz"), load("h100_library_decisions.json")
    idx = differing(v200, v100)
    plans = own_plans(p100, v200, dec, idx)
    sub = {**v200, "calls": [v200["calls"][n] for n in idx]}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h200_library_validation.json"
        path.write_text(json.dumps(sub))
        results = replay_file(path, make_inputs, gpu="h200", plans={i: plans[n] for i, n in enumerate(idx) if n in plans})
        doc = report(path, results, ["H200 own kernels and split_k, H100 families and decisions (not a committed table)"],
                     "h200")
    doc["what"] = ("replay of the H200 validation calls whose recorded plan differs from the H100's, each under a plan "
                   "made from its own recorded kernels and split_k with the H100's split-K families and decisions "
                   "(tools/library/h200_own_plans.py); 'call' indexes the calls listed in 'calls_of_validation'")
    doc["command"] = "python -m tools.library.h200_own_plans"
    doc["calls_of_validation"] = idx
    doc["split_k_h200_h100"] = {str(n): [v200["calls"][n]["split_k"], v100["calls"][n]["split_k"]] for n in idx}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    t = doc["totals"]
    print(f"{len(idx)} calls whose plan differs: {t['replayed']} replayed, {t['checked']} outputs, {t['differ']} differ, "
          f"{t['no_plan']} without a plan; written {out}")


main = script_main(own_plans_cmd, "python -m tools.library.h200_own_plans")

if __name__ == "__main__":
    sys.exit(main())
