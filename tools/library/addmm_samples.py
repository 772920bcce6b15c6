"""Sampled outputs of ``addmm`` with beta = 1 (evidence/library_plans.md, "addmm with beta = 1"): the calls and the
decision of its epilogue.

    python -m tools.library.addmm_samples lists DIR                  # DIR/addmm_list.json, DIR/addmm_list_lt.json
    python -m tools.library.addmm_samples lists DIR --dist alpha     # alpha != 1 at beta = 1, and beta = 2
    python -m tools.library.addmm_samples lists DIR --dist beta      # alpha = 1 at beta = 0.75, -1.25, 0.3, -0.7
    python -m tools.library.addmm_samples lists DIR --dist beta_split  # alpha = 1, beta = 0.3, -0.7, y = -RN32(beta*C)
    python -m tools.library.addmm_samples lists DIR --dist gemv_bias   # linear + bias at M = 1 (GEMV kernels)
    python -m tools.library.addmm_samples lists DIR --dist wmma_bias   # linear + bias at M = 2..16 (sm80 WMMA kernels)
    (device) python3 tools/device/library_plans.py --out R --valid-list DIR/addmm_list.json     # sampled outputs
    python -m tools.library.addmm_samples ingest RAW_H100 RAW_H200 --command CMD  # -> evidence/library/addmm_beta1.json.gz
    python -m tools.library.addmm_samples verdicts       # -> evidence/library/addmm_beta1_verdicts.json

``lists`` reads the H100's recordings (torch's default settings and ``blas=cublaslt``) and groups every recorded ``addmm`` call with beta = 1 by what its plan can
depend on: dtypes, tf32, operand layouts (``a_t``, ``b_t``), a 1-D bias or a matrix C, alpha = 1 or not, the kernel
kind (nvjet kind, CUTLASS / xmma kernel), split-K or not and cuBLASLt's reductionScheme, and the backend setting
(torch's default, or ``blas=cublaslt``).  Per group it takes the cheapest recorded call with 256 or more outputs and
one at the 3/4 point of the group's sizes (4 Mi elements at most), each with alpha = beta = 1, the other input form (a 1-D bias for a matrix C and the reverse), and the
cheapest also with alpha = 0.5, beta = 1; inputs from ``tcsmt/hwcheck/library_calls.py`` (``make_inputs`` with the
call's ``dist`` and ``seed``: ``normal``, ``wide`` for the larger 16-bit ones, ``tf32_exact`` for float32).
``addmm_list_lt.json`` holds the calls of the ``blas=cublaslt`` groups (run in a process whose torch prefers
cuBLASLt).

``ingest`` keeps every sampled call of the device runs (RAW/r/valid_list.json: torch's default settings,
RAW/lt/valid_list.json: cuBLASLt preferred) with its GPU and setting, the kernel names as the plan files write them
and the traced reductionScheme; a split-K call whose slices the family's rule (what the decision's replay uses)
and its layout's confirmed rule (``models/library/h100_cublas13_rules.json``, ``layout_rules``) cut differently,
or whose layout no rule was read for, is kept with ``excluded`` (the reason), and the decision does not read it.
``verdicts`` replays every sampled call that is not excluded (the H100's, under the H100 plan file's families and
decisions) under each hypothesis of its epilogue and counts the agreeing outputs per class of calls (GPU, setting,
dtypes, bias or C, alpha, split-K, kernel kind, reduction): ``RN32(y + C)`` (alpha = 1; alpha = 0.5: the decided
form of alpha != 1, ``FFMA(alpha, y, RN32(beta*C))`` without split-K, ``FFMA(beta, C, RN32(alpha*y))`` with it),
``C as the initial accumulator`` of the first slice's K-chain (:func:`c_init_outputs`), and, for alpha = 1,
``RN_out(RN32(RN_out(y) + C))`` (the sum rounded to the output format first; :func:`rounded_first`).
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import re
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.hwcheck.plan_capture import kernel_name
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.evaluate import finish_numpy, fmt_of, inputs_to_chain, segment_operands, segment_sum, to_fp32
from tcsmt.library.families import family_of, grain_of
from tcsmt.library.plans import Plan
from tcsmt.library.rules import layout_tag as kernel_layout
from tcsmt.library.rules import read_rules
from tcsmt.sim.simulator import simulate_params
from tools.device import recordings as R
from tools.library.addmm_lists import (
    alpha_calls,
    beta_split_calls,
    cancel_calls,
    gemv_bias_calls,
    sample_calls,
    wmma_bias_calls,
)
from tools.library.layout_probes import RECORDINGS, REPO, layout_tag

EVIDENCE = REPO / "evidence" / "library" / "addmm_beta1.json.gz"

SETTINGS = ("default", "cublaslt")
MAX_ELEMS = 1 << 22
"""Largest operands + output of a sampled call (elements)."""
CANCEL_MAX_ELEMS = 1 << 25
"""The same for the ``c_cancel`` calls (the nvjet cooperative kernels run the larger token counts)."""


def kernel_kind(kernels: list[str]) -> str:
    """The kind of a plan's main kernel: ``nvjet_KIND`` or the kernel's name up to its tile shape."""
    ks = [k for k in kernels if "elementwise" not in k and "splitKreduce" not in k]
    if not ks:
        return "none"
    m = re.match(r"nvjet_sm90_([a-z]+)_", ks[0])
    if m:
        return f"nvjet_{m.group(1)}"
    return re.split(r"_\d+x\d+", ks[0])[0]


NVJET_EPILOGUE = re.compile(r"_((?:badd|bz|bx)(?:_splitK)?(?:_coop[AB])?(?:_bias)?)_[NT]{3}$")
"""The epilogue part of an nvjet kernel's name: ``badd`` (beta * C added), ``bz`` (beta = 0: a 1-D bias through
cuBLASLt's EPILOGUE_BIAS), ``bx`` (split-K: the splitKreduce kernel adds C), ``coopA`` / ``coopB`` (the cooperative
schedules), ``bias``."""


def nvjet_variant(kernels: list[str]) -> str:
    """The epilogue part of the main nvjet kernel's name (:data:`NVJET_EPILOGUE`), '' for other kernels."""
    for k in kernels:
        m = NVJET_EPILOGUE.search(k) if k.startswith("nvjet_") else None
        if m:
            return m.group(1)
    return ""


def group_key(c: dict[str, Any], p: dict[str, Any], setting: str) -> tuple:
    """What an addmm call's plan can depend on (module docstring), the nvjet kernels' epilogue variant last."""
    S = int(p["split_k"] or 1)
    return (setting, c["a_dtype"], c["out_dtype"], bool(c.get("tf32")), bool(c.get("a_t")), bool(c.get("b_t")),
            bool(c.get("bias")), float(c["alpha"]) == 1.0, kernel_kind(p["kernels"]), str(layout_tag(p["kernels"])),
            S > 1, p["reduction_scheme"] or "", nvjet_variant(p["kernels"]))


def scan(gpu: str = "h100", rec_dir: Path = RECORDINGS,
         max_elems: int = MAX_ELEMS) -> dict[tuple, list[tuple[int, dict[str, Any]]]]:
    """Group -> (elements, call) of every recorded addmm call with beta = 1 of at most ``max_elems`` operand and
    output elements (token-count runs: their first two and last token counts)."""
    out: dict[tuple, list] = {}
    for path in sorted(rec_dir.glob(f"{gpu}_*.json.gz")):
        rec = R.load(str(path))
        setting = (rec.get("setting") or {}).get("name")
        if setting not in SETTINGS:
            continue

        def add(c: dict[str, Any], pid: int, rec: dict[str, Any] = rec, setting: str = str(setting),
                path: Path = path) -> None:
            if c["op"] != "addmm" or float(c["beta"]) != 1.0 or int(c.get("batch") or 1) != 1:
                return
            p = R.plan_dict(rec, pid)
            if p["torch_error"] or p["capture_error"] or not p["kernels"]:
                return
            n = c["M"] * c["N"] + c["M"] * c["K"] + c["K"] * c["N"]
            if n <= max_elems:
                out.setdefault(group_key(c, p, setting), []).append((n, {**c, "recorded": {
                    "kernels": p["kernels"], "split_k": p["split_k"], "reduction_scheme": p["reduction_scheme"],
                    "file": path.name}}))

        for task in rec["tasks"]:
            if task["kind"] == "mrange":
                if task["call"]["op"] != "addmm":
                    continue
                ms = R.task_values(task)
                pos = {t: i for i, t in enumerate(ms)}
                for r in R.iter_runs(task):
                    run = ms[pos[r[0]]:pos[r[1]] + 1]
                    for t in dict.fromkeys(run[:2] + run[-1:]):
                        add({**task["call"], task["vary"]: t}, r[2])
            else:
                for c, pid, _g, _w in R.iter_list(task, rec["fields"]):
                    add(c, pid)
    return out


@click.group(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
def addmm_cmd() -> None:
    pass


@addmm_cmd.command("lists", help="write DIR/addmm_list.json and DIR/addmm_list_lt.json from the H100 recordings")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dist", type=click.Choice(["mixed", "c_cancel", "alpha", "beta", "beta_split", "gemv_bias", "wmma_bias"]),
              default="mixed",
              show_default=True,
              help="mixed: normal / wide / tf32_exact inputs (sample_calls); c_cancel: cancel_calls; alpha, beta: "
                   "alpha_calls; beta_split: beta_split_calls; gemv_bias, wmma_bias: gemv_bias_calls, wmma_bias_calls (no "
                   "recording read)")
def lists_cmd(out: Path, dist: str) -> int:
    if dist in ("alpha", "beta", "beta_split", "gemv_bias", "wmma_bias"):
        out.mkdir(parents=True, exist_ok=True)
        listed = {"beta_split": beta_split_calls, "gemv_bias": gemv_bias_calls, "wmma_bias": wmma_bias_calls}
        calls = listed[dist]() if dist in listed else alpha_calls(beta_list=dist == "beta")
        (out / "addmm_list.json").write_text(json.dumps(calls, indent=0) + "\n")
        click.echo(f"{out / 'addmm_list.json'}: {len(calls)} calls")
        return 0
    groups = scan(max_elems=MAX_ELEMS if dist == "mixed" else CANCEL_MAX_ELEMS)
    calls = sample_calls(groups) if dist == "mixed" else cancel_calls(groups)
    out.mkdir(parents=True, exist_ok=True)
    for name, setting in (("addmm_list.json", "default"), ("addmm_list_lt.json", "cublaslt")):
        mine = [c for c in calls if c["group"].startswith(setting + " |")]
        (out / name).write_text(json.dumps(mine, indent=0) + "\n")
        click.echo(f"{out / name}: {len(mine)} calls")
    for g in sorted(groups, key=str):
        click.echo(f"  {len(groups[g]):6d} recorded (sampled) calls: {' | '.join(str(x) for x in g)}")
    return 0


def _scheme(trace: list[str] | None) -> str | None:
    m = [x.group(1) for a in trace or [] for x in [re.search(r"reductionScheme=(\w+)", a)] if x]
    return m[0] if m else None


def excluded(c: dict[str, Any], families: dict[str, Any], rules: dict[tuple[str, str], dict]) -> str:
    """Why the decision does not read a sampled call ('' where it does): a split-K call whose layout no slice rule
    was read for, or whose family rule and layout rule cut K differently."""
    S = int(c.get("split_k") or 1)
    if S == 1:
        return ""
    fam = family_of({k: v for k, v in c.items() if k != "family"}, families, "call")
    if fam is None:
        return "split-K kernels of no family"
    from tcsmt.library.families import slice_rule_fields
    from tools.library.layout_judge import floored_starts
    K, a = c["K"], "float32" if c.get("tf32") else c["a_dtype"]
    old = floored_starts(K, S, grain_of(fam[1], K, "family"), 0)
    for t in {x for k in c["kernels"] for x in [kernel_layout(k)] if x}:
        rs = rules.get((fam[0], t))
        if not rs:
            return f"no slice rule read for family {fam[0]} in layout {t}"
        for key, rule in rs.items():
            f = slice_rule_fields({}, rule, K, a, "rule")
            if floored_starts(K, S, f["grain"], f["k_floor"]) != old:
                return f"family {fam[0]} in layout {t}: its rule {key} cuts K = {K} otherwise than the family's"
    return ""


def c_init_outputs(call: dict[str, Any], inputs: dict[str, np.ndarray], plan: Plan) -> list[int]:
    """The sampled outputs (in ``call['samples']`` order) if C (the matrix, or the 1-D bias broadcast over rows)
    were the initial accumulator of the first slice's K-chain (of its first segment, :meth:`Plan.segments`) and the epilogue added nothing: the other slices
    from +0, the partials reduced and converted as ``plan`` says (its epilogue dropped)."""
    iv = np.array([int(x[0]) for x in call["samples"]], dtype=np.int64)
    jv = np.array([int(x[1]) for x in call["samples"]], dtype=np.int64)
    out_fmt = fmt_of(call["out_dtype"])
    Cm = inputs["C"][iv, jv] if "C" in inputs else np.asarray(inputs["bias"]).reshape(-1)[jv]
    c32 = np.asarray(to_fp32(np.asarray(Cm), out_fmt)).astype(np.uint32)
    A, B = inputs["A"][iv], inputs["B"][:, jv]
    if plan.in_round:
        A, B = inputs_to_chain(plan, A), inputs_to_chain(plan, B)
    parts = []
    for s, ks in enumerate(plan.slice_ranges()):
        runs = []
        for n, (a, b) in enumerate(segment_operands(plan, A, B, ks)):  # the first segment of slice 0 starts from C
            init = c32 if s == 0 and n == 0 else np.zeros(len(iv), dtype=np.uint32)
            if a.shape[1] == 0:
                runs.append(init.astype(np.int64).reshape(-1, 1))
                continue
            # pairs: row n of a with column n of b (simulate_params takes B's columns as rows)
            part = simulate_params(plan.chain, np.ascontiguousarray(a), np.ascontiguousarray(b.T), init)
            runs.append(np.asarray(part).astype(np.int64).reshape(-1, 1))
        parts.append(segment_sum(runs))
    bare = dataclasses.replace(plan, epilogue=())
    return [int(x) for x in np.asarray(finish_numpy(bare, parts)).reshape(-1)]


def rounded_first(call: dict[str, Any], inputs: dict[str, np.ndarray], plan: Plan) -> list[int]:
    """The sampled outputs if the reduced sum y were rounded to the output format, then C added in fp32 and the
    sum rounded to the output format again (``plan`` with its epilogue dropped gives y)."""

    from tcsmt.arith import semantics as sem
    from tcsmt.arith.formats import FP32
    from tcsmt.library.evaluate import _B, IEEE32, evaluate_pairs
    iv = np.array([int(x[0]) for x in call["samples"]], dtype=np.int64)
    jv = np.array([int(x[1]) for x in call["samples"]], dtype=np.int64)
    fo = fmt_of(call["out_dtype"])
    A, B = inputs["A"][iv], inputs["B"][:, jv]
    if plan.in_round:
        A, B = inputs_to_chain(plan, A), inputs_to_chain(plan, B)
    bare = dataclasses.replace(plan, epilogue=())
    y_out = np.asarray(evaluate_pairs(bare, A, B)).astype(np.int64)
    y = np.asarray(to_fp32(y_out, fo)).astype(np.int64) if fo != FP32 else y_out
    Cm = inputs["C"][iv, jv] if "C" in inputs else np.asarray(inputs["bias"]).reshape(-1)[jv]
    c32 = np.asarray(to_fp32(np.asarray(Cm), fo)).astype(np.int64)
    z = np.asarray(sem.add_rounded(_B, IEEE32, y, FP32, c32, FP32, FP32, "rne")).astype(np.int64)
    if fo != FP32:
        z = np.asarray(sem.convert(_B, z, FP32, fo, "rne")).astype(np.int64)
    return [int(x) for x in z]


@addmm_cmd.command("verdicts", help="count, per class of sampled addmm calls, the outputs each epilogue gives")
@click.option("--samples", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=EVIDENCE,
              show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              default=REPO / "evidence" / "library" / "addmm_beta1_verdicts.json", show_default=True)
@click.option("--every-gpu", is_flag=True,
              help="every GPU's calls (the H200's too, under the H100 plan file's families and decisions), the GPU "
                   "first in each class")
def verdicts_cmd(samples: Path, out: Path, every_gpu: bool) -> int:
    from tcsmt.hwcheck.library_calls import make_inputs
    from tcsmt.library.replay import replay_call
    from tools.library.decide import _call_of, at_own_scalars, plans_for
    raw = load.read_json(REPO / "evidence" / "h100_cublas_plans.json.gz", "recorded plan file")
    decisions = json.loads((REPO / "evidence" / "h100_library_decisions.json").read_text())["decisions"]
    with gzip.open(samples, "rt") as f:
        doc = json.load(f)
    calls = [c for c in doc["calls"] if (every_gpu or c["gpu"] == raw["gpu"]) and "excluded" not in c]
    src = dict(doc, gpu=raw["gpu"], **{k: raw.get(k) for k in ("torch", "cuda", "cublas", "cublaslt")}, calls=calls)
    h1 = {"match": {"op": "addmm", "alpha": 1.0, "beta": 1.0}, "set": {"epilogue": ["beta_c"]}, "evidence": "h"}
    by_key = plans_for(raw, src, [*decisions, h1], samples.name)
    table: dict[str, dict[str, Any]] = {}
    for c in calls:
        found = [p for p in by_key.get(_call_of(c).key(), []) if list(p.kernels) == list(c["kernels"])]
        if not found:
            continue
        plan = at_own_scalars(found[0], c)
        inputs = make_inputs(c, int(c["seed"]))
        want = [int(str(s[-1]), 16) for s in c["samples"]]
        r = replay_call(c, inputs, plan)
        got = {"decided form" if c["alpha"] != 1.0 else "RN32(y + C)": len(want) - len(r.mismatches),
               "C as the initial accumulator": sum(g == w for g, w in zip(c_init_outputs(c, inputs, plan), want))}
        if c["alpha"] == 1.0:
            got["RN_out(RN32(RN_out(y) + C))"] = sum(g == w for g, w in zip(rounded_first(c, inputs, plan), want))
        key = " | ".join(str(x) for x in ((c["gpu"],) if every_gpu else ()) + (
                                          c["setting"], c["a_dtype"], c["out_dtype"], "bias" if c["bias"] else "C",
                                          f"alpha={c['alpha']}", f"S={'>1' if int(c['split_k'] or 1) > 1 else 1}",
                                          kernel_kind([k for k in c["kernels"] if "elementwise" not in k]),
                                          plan.reduce if plan.split_k > 1 else "-"))
        if nvjet_variant(c["kernels"]):
            key += " | " + nvjet_variant(c["kernels"])
        e = table.setdefault(key, {"calls": 0, "samples": 0, "agree": {}, "kernels": set()})
        e["calls"] += 1
        e["samples"] += len(want)
        e["kernels"] |= {k for k in c["kernels"] if "elementwise" not in k}
        for h, n in got.items():
            e["agree"][h] = e["agree"].get(h, 0) + n
    for e in table.values():
        e["kernels"] = sorted(e["kernels"])[:4]
        e["all_agree"] = sorted(h for h, n in e["agree"].items() if n == e["samples"])
    res = {"what": f"per class of sampled addmm calls with beta = 1 ({samples.name}, "
                   f"{'every GPU' if every_gpu else 'the H100'}'s), the sampled outputs each epilogue hypothesis gives",
           "made_by": "python -m tools.library.addmm_samples verdicts" + (f" --samples {samples.name} --every-gpu"
                                                                          if every_gpu else ""),
           "method": __doc__.split("``verdicts``", 1)[1].split("\n\n")[0].strip(), "classes": table}
    out.write_text(json.dumps(res, indent=1) + "\n")
    for k, e in sorted(table.items()):
        click.echo(f"{k}: {e['samples']} samples; " + ", ".join(f"{h} {n}" for h, n in e["agree"].items()))
    return 0


@addmm_cmd.command("ingest", help="write evidence/library/addmm_beta1.json.gz from the device runs' sampled outputs")
@click.argument("raws", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--command", "device_command", required=True, help="the device command that made the runs")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=EVIDENCE, show_default=True)
@click.option("--what", default="sampled outputs of torch.addmm with beta = 1 (alpha = 1, and alpha = 0.5), a 1-D bias "
                                "or a matrix C, per recorded kernel class", show_default=True,
              help="what the calls are (the file's 'what')")
def ingest_cmd(raws: tuple[Path, ...], device_command: str, out: Path, what: str) -> int:
    rules_doc = read_rules()[0]
    families = rules_doc["families"]
    rules: dict[tuple[str, str], dict] = {}
    for f, t, key, rule in rules_doc["layout_rules"]:
        rules.setdefault((f, t), {})[key] = rule
    calls, runs = [], []
    for raw in raws:
        for sub, setting in (("r", "default"), ("lt", "blas=cublaslt")):
            path = raw / sub / "valid_list.json"
            if not path.exists():
                continue
            doc = json.loads(path.read_text())
            runs.append({k: doc.get(k) for k in ("gpu", "torch", "cuda", "cublas", "cublaslt", "driver")}
                        | {"setting": setting, "calls": len(doc["calls"]), "rejected": len(doc["rejected"])})
            for c in doc["calls"]:
                e = {k: v for k, v in c.items() if k not in ("recorded", "split_k_source")}
                e.update(gpu=doc["gpu"], setting=setting, kernels=[kernel_name(k) for k in c["kernels"]],
                         reduction_scheme=_scheme(c.get("lt_algo")))
                why = excluded(e, families, rules)
                if why:
                    e["excluded"] = why
                calls.append(e)
    doc = {"what": what, "runs": runs, "command": device_command,
           "generator": "tcsmt/hwcheck/library_calls.py: make_inputs(call, seed); sample_positions(call, seed)",
           "method": __doc__.split("\n\n", 1)[1].strip(), "calls": calls}
    with gzip.open(out, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    n_ex = sum(1 for c in calls if "excluded" in c)
    click.echo(f"wrote {out}: {len(calls)} calls ({n_ex} excluded)")
    return 0


main = script_main(addmm_cmd, "python -m tools.library.addmm_samples")

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
