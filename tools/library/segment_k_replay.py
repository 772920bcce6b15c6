"""Replay tf32 ``segment_k_on`` calls on the CPU under the plans their recorded launch words make, bit for bit.

    python -m tools.library.segment_k_replay evidence/library/h100_segment_k_samples.json.gz [--json OUT.json]

The file (``tools/device/segment_k_samples.py``) holds, per call, the recording of the call
(:func:`tcsmt.hwcheck.record.record_calls`: kernels, cuBLASLt's trace, the ``segment_k_on`` launch words) and the
output bits of the call run on inputs of :func:`tcsmt.hwcheck.library_calls.make_inputs` (seeded; rebuilt here) at
sampled positions, many of them in split tiles.  Each call's plan is made as a catalog makes it
(:func:`tcsmt.library.catalog_build.convert_one` under the shipped rules: the conversion, then
:func:`tcsmt.library.rules.checked_entry`, which reads the launch words), and each sample is evaluated with
:func:`tcsmt.library.run_pairs` at its output indices.  Prints per call: outputs compared, bit-exact, differing
(in split tiles and in whole ones); a refused call is listed with the reason.
"""
from __future__ import annotations

import gzip
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.api import run_pairs
from tcsmt.library.call_plans import ConvertContext
from tcsmt.library.catalog_build import convert_one
from tcsmt.library.plans import Plan, call_from_entry, plan_from_fields
from tcsmt.library.recordings import recorded_calls
from tcsmt.library.rules import make_context
from tcsmt.library.segment_k import split_outputs


@cache
def context(gpu: str) -> ConvertContext:
    """The shipped conversion rules of ``gpu`` (as ``catalog_build`` takes them by default)."""
    return make_context(gpu)[0]


def plans_of_recording(rec: dict[str, Any], gpu: str = "h100") -> list[tuple[dict[str, Any], Plan | str]]:
    """(call fields, its Plan or why it has none) for every call of a recording, converted as a catalog converts
    it."""
    ctx, out = context(gpu), []
    for tmpl, vary, ts, pid in recorded_calls(rec):
        for t in ts:
            entry = convert_one(ctx, rec.get("name", "recording"), tmpl, vary, t, rec["tables"]["plans"][pid],
                                rec["tables"])
            call = {**tmpl, **dict.fromkeys(vary, t)}
            if entry is None or "why" in entry:
                out.append((call, str((entry or {}).get("why", "torch refuses the call"))))
                continue
            shape = [int(call["M"]), int(call["N"]), int(call["K"]), int(call["batch"])]
            where = f"{rec.get('name')}: {call['op']} {shape}"
            out.append((call, plan_from_fields(entry, call_from_entry(entry, shape, where), gpu, "", "", where)))
    return out


def recording_of_launch(call: dict[str, Any], kernel: str, grid: list[int], cluster: list[int] | None,
                        words: dict[str, int], device: dict[str, Any]) -> dict[str, Any]:
    """A one-call recording (the format of :func:`tcsmt.hwcheck.record.recording`) of ``call`` (record fields) that
    ran ``kernel`` alone with this launch (its :data:`tcsmt.hwcheck.segment_k_launch.WORDS`), numSplitsK = 1: the
    shape a recording made since the launch words are kept has, for launches captured before
    (``evidence/library/h100_segment_k_params*.json.gz``)."""
    from tcsmt.hwcheck.record import FIELDS, PLAN_FIELDS, norm_call
    from tcsmt.hwcheck.segment_k_launch import KEPT

    launch = {**{k: words[k] for k in KEPT}, "grid": list(grid), "cluster": cluster}
    plan = [[0], [[384, 1, 1]], [cluster], [grid[2] if len(grid) > 2 else 1], [], 1, None, [], None, None, [None],
            [launch]]
    c = norm_call(call)
    return {"name": "launch", "setting": {"name": "default"}, "fields": list(FIELDS), "plan_fields": PLAN_FIELDS,
            "device": device, "tables": {"kernels": [kernel], "lt": [], "errors": [], "plans": [plan]},
            "tasks": [{"kind": "list", "id": 0, "n": 1, "calls": [[c[k] for k in FIELDS]], "rows": [[0, 0]]}]}


def replay_samples(plan: Plan, inputs: dict[str, np.ndarray], samples: list[list[Any]]) -> dict[str, Any]:
    """Compare the samples ``[i, j, "0x.."]`` of one call with ``plan``'s outputs on ``inputs`` (make_inputs')."""
    iv = np.array([int(s[0]) for s in samples], dtype=np.int64)
    jv = np.array([int(s[1]) for s in samples], dtype=np.int64)
    want = np.array([int(str(s[2]), 16) for s in samples], dtype=np.int64)
    A = inputs["A"]
    Bc = inputs["B"] if "B" in inputs else inputs["weight"].T
    kw = {"bias": np.asarray(inputs["bias"]).reshape(-1)[jv]} if "bias" in plan.epilogue else {}
    got = np.asarray(run_pairs(plan, A[iv], Bc[:, jv], **kw, rows=iv, cols=jv)).astype(np.int64).reshape(-1)
    split = split_outputs(plan.segment_k, iv, jv) if plan.segment_k is not None else np.zeros(len(iv), bool)
    bad = got != want
    return {"compared": len(iv), "bit_exact": int((~bad).sum()), "differing": int(bad.sum()),
            "in_split_tiles": int(split.sum()), "differing_in_split": int((bad & split).sum()),
            "first_differing": [[int(iv[k]), int(jv[k]), f"0x{int(want[k]):08x}", f"0x{int(got[k]):08x}"]
                                for k in np.flatnonzero(bad)[:4]]}


def replay_file(path: Path, gpu: str = "h100", only: set[str] | None = None) -> list[dict[str, Any]]:
    """Every call run of a samples file (those whose spec is in ``only``, where given): its replay under the plan its
    recording makes, or the reason it has none."""
    from tcsmt.hwcheck.library_calls import make_inputs

    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    plans = plans_of_recording(doc["recording"], gpu)
    out = []
    for item in doc["calls"]:
        if only is not None and item["spec"] not in only:
            continue
        call, plan = plans[int(item["index"])]
        rec_plan = doc["recording"]["tables"]["plans"][_plan_id(doc["recording"], int(item["index"]))]
        recorded = [w for w in (rec_plan[11] if len(rec_plan) > 11 else []) if w]
        captured = [k["segment_k_launch"] for k in item.get("captured", []) if k.get("segment_k_launch")]
        row: dict[str, Any] = {"spec": item["spec"], "dist": item["dist"], "seed": item["seed"],
                               "same_kernels": _same_names(item),
                               "same_launch_words": recorded == captured}
        if isinstance(plan, str):
            out.append({**row, "refused": plan})
            continue
        vc = {**{k: call[k] for k in ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias",
                                      "alpha", "beta", "tf32", "scale", "fast_accum", "a_t", "b_t")},
              "dist": item["dist"]}
        la = plan.segment_k
        out.append({**row, "segments": la.segments if la else None,
                    **replay_samples(plan, make_inputs(vc, int(item["seed"])), item["samples"])})
    return out


def _plan_id(rec: dict[str, Any], index: int) -> int:
    """The plan index of call ``index`` of a one-list recording."""
    return int(rec["tasks"][0]["rows"][index][1])


def _same_names(item: dict[str, Any]) -> bool:
    """Whether the kernels the profiler saw run are the recorded ones (the profiler's names may carry the
    parameter list the recording's drop)."""
    from tcsmt.hwcheck.plan_capture import kernel_name

    ran = [kernel_name(k) for k in item["kernels"] if not k.startswith(("Memset", "Memcpy"))]  # (not kernels)
    return sorted(ran) == sorted(item["recorded_kernels"])


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.argument("samples", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--gpu", default="h100")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def segment_k_replay_cmd(samples: Path, gpu: str, json_out: Path | None) -> int:
    rows = replay_file(samples, gpu)
    for r in rows:
        if not (r["same_kernels"] and r["same_launch_words"]):
            print(f"{r['spec']}: the run's kernels or launch words are not the recording's "
                  f"(kernels {r['same_kernels']}, words {r['same_launch_words']})")
        if "refused" in r:
            print(f"{r['spec']} ({r['dist']}): refused: {r['refused'][:160]}")
        else:
            print(f"{r['spec']} ({r['dist']}, S = {r['segments']}): {r['compared']} compared, {r['bit_exact']} "
                  f"bit-exact, {r['differing']} differing ({r['in_split_tiles']} in split tiles, "
                  f"{r['differing_in_split']} of them differing)")
    done = [r for r in rows if "refused" not in r]
    total = {k: sum(r[k] for r in done) for k in ("compared", "bit_exact", "differing", "in_split_tiles",
                                                  "differing_in_split")}
    print(f"{len(done)} calls replayed, {len(rows) - len(done)} refused: {total}")
    if json_out is not None:
        json_out.write_text(json.dumps({"command": "python -m tools.library.segment_k_replay " + " ".join(sys.argv[1:]),
                                        "total": total, "calls": rows}, indent=1) + "\n")
    return 0


main = script_main(segment_k_replay_cmd, "python -m tools.library.segment_k_replay")

if __name__ == "__main__":
    sys.exit(main())
