"""Decide, from recorded outputs, the plan facts that the recorded plan file cannot say (evidence/h100_library_decisions.json).

    python -m tools.library.decide [--plans P] [--validation V] [-o evidence/h100_library_decisions.json]

The plan file (``h100_cublas_plans.json.gz``) records kernels, split-K counts and the families' slice and
reduction rules; it does not record the K-chain of the fp32 CUDA-core (SIMT) kernels, how float32 inputs of tf32 calls become tf32,
how CUTLASS kernels iterate
K inside a slice, or the epilogues of ``addmm``/``linear`` with bias, alpha and beta and of row-wise
``_scaled_mm``.  Each of those is a *question* here with a few hypotheses.  For each question in turn, every
hypothesis is turned into plans by the converter (:func:`tcsmt.library.convert.convert`, with the decisions
already made plus this hypothesis), and the validation calls it applies to are replayed on every sampled
output (:func:`tcsmt.library.replay.replay_call`, inputs from ``make_inputs``).  A hypothesis is decided
when it alone agrees with every sampled output of every such call, and at least one sample separates it
from each other hypothesis; otherwise the question stays open (no decision is written, the counts are).

The output file is what ``python -m tcsmt.library.convert ... --decisions FILE`` reads: ``decisions`` (match,
set, evidence) and ``questions`` (the counts of every hypothesis).
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import sys
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import click
import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.library_calls import make_inputs
from tcsmt.io import load
from tcsmt.io.trap import CONTEXT_SETTINGS, script_main
from tcsmt.library.convert import convert
from tcsmt.library.families import matches as _matches
from tcsmt.library.plans import Call, Plan, load_table
from tcsmt.library.replay import replay_call
from tcsmt.sim.inputs import read_json
from tools.library import chain_probe
from tools.library.decide_questions import NO_K_TILE, QUESTIONS

RESULTS = Path(__file__).resolve().parents[2] / "evidence"
LAYOUT_PROBES = tuple(RESULTS / "library" / f"h100_layout_probes{s}.json" for s in ("", "_fresh", "_kfloor2"))
"""The H100's layout probes: the slice rules bits read for the split-K families' operand layouts, which the
converter requires of a split-K plan (as the catalogs do, ``catalog_build --probes``)."""


@cache
def _layout_probes() -> tuple[tuple[str, dict[str, Any]], ...]:
    return tuple((p.name, json.loads(p.read_text())) for p in LAYOUT_PROBES)


def plans_for(raw: dict[str, Any], val: dict[str, Any], decisions: list[dict[str, Any]], val_name: str) -> dict:
    """Plan of every validation call (by Call.key()) under ``decisions``: the converter run on the validation
    calls with the plan file's families and the slice rules of :data:`LAYOUT_PROBES`."""
    text = convert(dict(raw, calls=[]), "h100_cublas_plans.json", None, [(val_name, val)],
                   {"gpu": raw["gpu"], "decisions": decisions}, "hypothesis", probe_files=_layout_probes())
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.toml"
        path.write_text(text)
        table = load_table(path)
    return table.by_key


def at_own_scalars(plan: Plan, c: dict[str, Any]) -> Plan:
    """``plan`` evaluating the sampled call ``c``'s own alpha and beta: plans are found by :meth:`Call.key`, which keeps
    alpha != 1 and beta's kind, not their values, so a plan found for one call may carry another's."""
    return dataclasses.replace(plan, call=dataclasses.replace(plan.call, alpha=float(c.get("alpha", 1.0)),
                                                              beta=float(c.get("beta", 0.0))))


def _call_of(c: dict[str, Any]) -> Call:
    return Call(c["op"], int(c["M"]), int(c["N"]), int(c["K"]), c["a_dtype"], c.get("b_dtype") or c["a_dtype"],
                c.get("out_dtype") or c["a_dtype"], int(c.get("batch", 1)), float(c.get("alpha", 1.0)),
                float(c.get("beta", 0.0)), bool(c.get("bias", False)), bool(c.get("tf32", False)), c.get("scale"),
                bool(c.get("fast_accum", False)))


def _c_init_replay(c: dict[str, Any], inputs: dict, plan: Plan) -> tuple[int, set[tuple]]:
    """(samples checked, the mismatching (batch, row, column)) of the ``c_init`` hypothesis on one call."""
    from tools.library.addmm_samples import c_init_outputs
    got = c_init_outputs(c, inputs, plan)
    bad = {(None, int(s[0]), int(s[1])) for s, g in zip(c["samples"], got) if g != int(str(s[-1]), 16)}
    return len(got), bad


def decide(raw: dict[str, Any], val: dict[str, Any], val_name: str, log=print,
           more: dict[str, Any] | None = None, more_name: str = "",
           probe: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None, probe_name: str = "",
           earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run every question in order; returns the decision file's object.  ``earlier`` (a decision file of the same
    plan, validation and probe files): the questions asked of the validation calls and of the probe are taken from it
    as they were answered there (their entries and decisions) instead of replayed; only the questions ``on`` more
    run."""
    decisions: list[dict[str, Any]] = []
    report = []
    if more is not None:
        runs = [r for r in more.get("runs", []) if r.get("gpu") == raw["gpu"]]
        same = all(r.get(k) == raw.get(k) for r in runs for k in ("torch", "cublas", "cublaslt"))
        if not runs or not same:
            raise TcsmtError(f"{more_name}: no run on {raw['gpu']} with its plan file's torch, cuBLAS and cuBLASLt")
        more = dict(more, gpu=raw["gpu"], **{k: runs[0].get(k) for k in ("torch", "cuda", "cublas", "cublaslt")},
                    calls=[c for c in more["calls"] if c.get("gpu") == raw["gpu"] and "excluded" not in c])
    if probe is not None and probe[0].get("gpu") != raw["gpu"]:
        raise TcsmtError(f"{probe_name}: a probe of {probe[0].get('gpu')}, not of {raw['gpu']}")
    kept = {e["question"]: e for e in (earlier or {}).get("questions", [])}
    kept_decisions = {d["evidence"].split(": '", 1)[0]: d for d in (earlier or {}).get("decisions", [])}
    for q in QUESTIONS:
        on_more, on_probe = q.get("on") == "more", q.get("on") == "probe"
        if earlier is not None and not on_more:
            if q["question"] not in kept:
                raise TcsmtError(f"the earlier decision file has no question {q['question']!r}: run without it")
            report.append(dict(kept[q["question"]], match=q["match"]))
            if q["question"] in kept_decisions:
                # the question's match may have narrowed since (beta's kind): every call it was decided on must fit
                # the new one, which the decision then takes
                src = probe[0] if q.get("on") == "probe" and probe is not None else val
                unfit = [n for n in kept[q["question"]].get("calls", []) if not _matches(src["calls"][n], q["match"])]
                if unfit:
                    raise TcsmtError(f"{q['question']!r}: {len(unfit)} of the calls it was decided on do not fit its "
                                     f"match now: run without --earlier")
                decisions.append(dict(kept_decisions[q["question"]], match=q["match"]))
            log(f"{q['question']}: as in the earlier decision file")
            continue
        if (on_more and more is None) or (on_probe and probe is None):
            continue
        src, src_name = (more, more_name) if on_more else (probe[0], probe_name) if probe and on_probe else \
            (val, val_name)
        assert src is not None
        calls = [(n, c) for n, c in enumerate(src["calls"]) if _matches(c, q["match"])]
        first = next(iter(q["hypotheses"].values()))
        plan_maps: dict[str, dict] = {}
        tiled = next((h for h in q["hypotheses"].values() if h and h != NO_K_TILE and "k_tile_regex" in h), None)
        for name, setting in q["hypotheses"].items():
            plan_setting = first if setting and setting.get("c_init") else tiled if setting == NO_K_TILE else setting
            extra = [] if plan_setting is None else [{"match": q["match"], "set": plan_setting, "evidence": "hypothesis"}]
            plan_maps[name] = plans_for(raw, src, decisions + extra, src_name)
            if setting == NO_K_TILE:
                plan_maps[name] = {k: [dataclasses.replace(p, k_tile=0) for p in ps] for k, ps in plan_maps[name].items()}
        results = {name: {"calls": 0, "samples": 0, "agree": 0} for name in q["hypotheses"]}
        outputs: dict[str, dict[tuple, bool]] = {name: {} for name in q["hypotheses"]}
        # call by call, every hypothesis on one set of inputs, which is then dropped (a call's operands can take
        # hundreds of MB: keeping every call's would not fit)
        for n, c in calls:
            inputs: dict | None = None
            for name, setting in q["hypotheses"].items():
                found: list[Plan] = plan_maps[name].get(_call_of(c).key(), [])
                if on_more or on_probe:  # the same call fields may be sampled under two settings or layouts: the plan
                    # of its own kernels
                    found = [p for p in found if list(p.kernels) == list(c["kernels"])]
                if not found:
                    continue
                plan = at_own_scalars(found[0], c)
                res, ok = results[name], outputs[name]
                res["calls"] += 1
                if on_probe and probe is not None:
                    agree_at = chain_probe.replay(c, probe[1], plan)
                    ok.update({(n, i): bool(v) for i, v in enumerate(agree_at)})
                    res["samples"] += agree_at.size
                    res["agree"] += int(agree_at.sum())
                    continue
                if inputs is None:
                    inputs = make_inputs(c, int(c["seed"]))
                if setting and setting.get("c_init"):
                    checked, bad = _c_init_replay(c, inputs, plan)
                    for s in c["samples"]:
                        idx = (None, *s[:-1])
                        ok[(n, *idx)] = idx not in bad
                    res["samples"] += checked
                    res["agree"] += checked - len(bad)
                    continue
                r = replay_call(c, inputs, plan)
                if r.run_error:
                    continue
                bad = {(m[0], m[1], m[2]) for m in r.mismatches}
                for s in c["samples"]:
                    idx = tuple(s[:-1]) if len(s) == 4 else (None, *s[:-1])
                    ok[(n, *idx)] = idx not in bad
                res["samples"] += r.checked
                res["agree"] += r.checked - len(r.mismatches)
        for name, r in results.items():
            log(f"{q['question']}: {name}: {r['agree']} of {r['samples']} sampled outputs of {r['calls']} calls agree")
        full = [h for h, r in results.items() if r["samples"] and r["agree"] == r["samples"]]
        decided = None
        if len(full) == 1:
            h = full[0]
            separating = {o: sum(1 for k, v in outputs[o].items() if not v and outputs[h].get(k))
                          for o in results if o != h}
            if all(n > 0 for n in separating.values()):
                decided = h
        entry = {"question": q["question"], "match": q["match"], "hypotheses": results, "decided": decided,
                 "sets": sorted({k for h in q["hypotheses"].values() if h for k in h}), "calls": [n for n, _ in calls]}
        report.append(entry)
        if decided is not None and q["hypotheses"][decided] not in (None, NO_K_TILE) and not q["hypotheses"][decided].get("c_init"):
            ev = (f"{q['question']}: '{decided}' agrees with {results[decided]['agree']} of "
                  f"{results[decided]['samples']} sampled outputs of {results[decided]['calls']} "
                  f"{'probe' if q.get('on') == 'probe' else 'validation'} calls ("
                  f"{src_name}); " + "; ".join(f"'{h}' {r['agree']} of {r['samples']}" for h, r in results.items()
                                               if h != decided) + " (python -m tools.library.decide)")
            decisions.append({"match": q["match"], "set": q["hypotheses"][decided], "evidence": ev})
    return {"gpu": raw["gpu"], "torch": raw.get("torch"), "cublas": raw.get("cublas"),
            "cublaslt": raw.get("cublaslt"), "made_by": "python -m tools.library.decide",
            "method": __doc__.split("\n\n")[1].replace("\n", " "), "decisions": decisions, "questions": report}


MORE = [RESULTS / "library" / f"{name}.json.gz" for name in (
    "addmm_beta1", "addmm_beta1_cancel", "addmm_alpha", "addmm_beta", "addmm_beta_split", "gemv_bias_samples",
    "wmma_bias_samples", "tf32_bias_samples", "k_iteration_samples", "sm80_xmma_tf32_samples")]
"""The sampled calls the questions ``on`` more are asked of (what evidence/h100_library_decisions.json was made from)."""


def read_more(paths: Sequence[Path]) -> dict[str, Any] | None:
    """The sampled-call files ``paths`` as one (their runs and calls joined; None for none)."""
    extra = None
    for path in paths:
        with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
            doc_more = json.load(f)
        extra = doc_more if extra is None else dict(extra, runs=extra["runs"] + doc_more["runs"],
                                                    calls=extra["calls"] + doc_more["calls"])
    return extra


_IN_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command(context_settings=CONTEXT_SETTINGS, help=__doc__.split("\n")[0])
@click.option("--plans", type=_IN_FILE, default=RESULTS / "h100_cublas_plans.json.gz", show_default=True)
@click.option("--validation", type=_IN_FILE, default=RESULTS / "h100_library_validation.json.gz", show_default=True)
@click.option("--more", type=_IN_FILE, multiple=True,
              help="sampled calls of the questions 'on' more (evidence/library/addmm_beta1.json.gz, "
                   "addmm_beta1_cancel.json.gz; repeat: their runs and calls joined)")
@click.option("--probe", type=_IN_FILE, default=None,
              help="whole calls of the questions 'on' probe (evidence/library/h100_sm75_cutlass_chain_probe.json)")
@click.option("--earlier", type=_IN_FILE, default=None,
              help="a decision file made from the same plan, validation and probe files: its answers to the "
                   "questions of the validation calls and of the probe are kept, only the questions 'on' more run")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path),
              default=RESULTS / "h100_library_decisions.json", show_default=True)
def library_decide_cmd(plans: Path, validation: Path, more: tuple[Path, ...], probe: Path | None, earlier: Path | None,
                       out: Path) -> int:
    raw, val = read_json(plans), read_json(validation)
    extra = read_more(more)
    prior = json.loads(earlier.read_text()) if earlier is not None else None
    doc = decide(raw, val, load.document_name(validation), more=extra, more_name=" + ".join(p.name for p in more),
                 probe=chain_probe.load(probe) if probe else None, probe_name=probe.name if probe else "",
                 earlier=prior)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}: {len(doc['decisions'])} decisions")
    return 0


main = script_main(library_decide_cmd, "python -m tools.library.decide")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
