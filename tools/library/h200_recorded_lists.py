"""The H200 confirmation's third round (``python -m tools.library.h200_confirm recorded-lists``): probe and validation
calls picked among the H200's catalog recordings at the split-K counts that ``h200_library_confirm.json`` has not
probed, each carrying the plan signature it was recorded with, which ``h200_confirm summary`` holds the device's run
against (:mod:`tools.library.h200_confirm`)."""
from __future__ import annotations

from typing import Any

from tcsmt.library.families import class_of
from tools.library.h200_confirm import config

PROBE_MAX_K = 32768
"""recorded-lists: the deepest probe call (a slice probe's launches grow with K / 16)."""


def _recorded_sig(c: dict[str, Any], name: str) -> dict[str, Any]:
    return {"kernels": list(c["kernels"]), "split_k": int(c["split_k"]), "lt_algo": list(c.get("lt_algo") or []),
            "file": name}


def lists_recorded(recordings: list[tuple[str, dict[str, Any]]], p100: dict[str, Any], confirmed: dict[str, Any]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(probe calls, validation calls): per family class of ``confirmed`` (``h200_library_confirm.json``: the classes
    of the H200's own plans) and split-K count S of the recordings' calls (torch's default settings, both layouts)
    that it has not probed, the recorded call of
    least work with M <= 256, N >= 16, K <= :data:`PROBE_MAX_K` to probe and the one of least work to sample (one of
    the first and last counts of each recorded run; none where no call can be probed); each carries ``recorded``
    (:func:`_recorded_sig`)."""
    from tcsmt.library.recordings import CALL_FIELDS, raw_call, recorded_calls, setting_of

    fams = p100["families"]
    probed = {name: set(e.get("probed_split_k", [])) for name, e in confirmed["classes"].items()}
    by_s: dict[tuple[str, int], list[tuple[dict[str, Any], str]]] = {}
    for name, rec in recordings:
        tables = rec["tables"]
        for tmpl, vary, ts, pid in recorded_calls(rec):
            plan = tables["plans"][pid]
            if int(plan[5] or 1) <= 1 or setting_of(rec, tmpl["a_dtype"]) != "default":
                continue
            if vary not in ("M", "K"):  # a sequence length: every dimension the template names by it
                vary = "".join(d for d in "MNK" if tmpl[d] == vary)
            for t in sorted({ts[0], ts[-1]}):
                c = raw_call(tmpl, vary, t, plan, tables)
                cls = class_of(c, fams)
                if c.get("torch_error") or cls not in probed or not cls.startswith("family") or \
                        int(c["split_k"]) in probed[cls]:
                    continue
                by_s.setdefault((cls, int(c["split_k"])), []).append((c, name))
    probes: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    fields = CALL_FIELDS  # with the layouts a_t, b_t
    n_groups = 0
    for (cls, _s), cs in sorted(by_s.items()):
        cs.sort(key=lambda x: ((x[0]["M"] + x[0]["N"]) * x[0]["K"], x[0]["M"], x[0]["N"], x[0]["K"]))
        fit = [x for x in cs if x[0]["M"] <= 256 and x[0]["N"] >= 16 and x[0]["K"] <= PROBE_MAX_K]
        for c, name in fit[:1]:
            probes.append({**{k: c.get(k) for k in fields}, "config": f"{cls} | {config(c)}",
                           "recorded": _recorded_sig(c, name)})
        c, name = cs[0]  # seeds and dists numbered over every group, as the H200 run of 2026-11-27 had them
        d = "normal" if c.get("out_dtype") == "float16" else ("wide", "cancel")[n_groups % 2]
        samples.append({**{k: c.get(k) for k in fields}, "dist": d, "seed": 7800 + n_groups, "class": cls,
                        "recorded": _recorded_sig(c, name)} if fit else {})
        n_groups += 1
    return probes, [e for e in samples if e]  # a sample alone confirms no family at an S: none without a probe
