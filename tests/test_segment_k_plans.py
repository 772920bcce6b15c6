"""Plans of tf32 calls on cuBLAS's ``segment_k_on`` kernels made from their recorded launch words
(:mod:`tcsmt.hwcheck.segment_k_launch`, :func:`tcsmt.library.rules.segment_k_fields`,
:mod:`tcsmt.library.segment_k_eval`): the plan field from the capture to the catalog entry and back, the swamping and
tree probes' committed outputs evaluated under the plans their committed launch words make, the refusals, and the GPU
check (``evidence/library/h100_segment_k_samples.json.gz``, ``tools/device/segment_k_samples.py``) replayed."""
from __future__ import annotations

import base64
import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tcsmt.cli.explain_cmd import facts, render
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.record import Interner, plan_of, recording
from tcsmt.hwcheck.segment_k_launch import KEPT
from tcsmt.library.api import run, run_pairs
from tcsmt.library.lookup import Answer, parse_record_spec
from tcsmt.library.plans import call_from_entry, plan_from_fields
from tcsmt.library.recordings import raw_call, recorded_calls
from tcsmt.library.rules import checked_entry
from tcsmt.library.segment_k import launch_of_words, split_outputs
from tests.test_segment_k_rule import captures, launch_of
from tools.device.segment_k_probe import probe_a
from tools.device.segment_k_tree_probe import probe_a as tree_probe_a
from tools.library.segment_k_replay import plans_of_recording, recording_of_launch, replay_file

LIB = Path(__file__).resolve().parents[1] / "evidence" / "library"
FIELDS = ("op", "M", "N", "K", "batch", "a_dtype", "b_dtype", "out_dtype", "bias", "alpha", "beta", "tf32", "scale",
          "fast_accum", "a_t", "b_t")
TF32_ENTRY = {"op": "mm", "a_dtype": "float32", "out_dtype": "float32", "tf32": True, "split_k": 1, "epilogue": [],
              "in_round": "rne", "chain": {"arch": "hopper", "in_fmt": "tf32", "out_fmt": "fp32", "instr": "cublas"},
              "kernels": ["x"], "sources": ["t"]}


def _fields(spec: str) -> dict:
    c = parse_record_spec(spec)
    return {k: getattr(c, k) for k in FIELDS}


def _plan(spec: str, params: str = "h100_segment_k_params.json.gz"):
    cap = captures(params)[spec]
    ((_call, plan),) = plans_of_recording(recording_of_launch(_fields(spec), cap["name"], cap["grid"], cap["cluster"],
                                                              cap["words"], {}))
    assert not isinstance(plan, str), plan
    return plan


def test_the_launch_words_go_from_the_capture_to_the_plan_and_back():
    """A captured node's ``segment_k_launch`` is a plan field of the recording, read back by the catalog reader,
    turned into the entry's ``segment_k`` by the rules, kept through JSON, and loaded as the launch it was."""
    spec = "mm 1024x1024x4096 float32 tf32=1"
    cap = captures()[spec]
    words = {**{k: cap["words"][k] for k in KEPT}, "grid": cap["grid"], "cluster": cap["cluster"]}
    node = {"name": cap["name"], "full": cap["name"], "grid": cap["grid"], "block": [384, 1, 1],
            "cluster": cap["cluster"], "smem": 0, "segment_k_launch": words}
    rec = recording([_fields(spec)], [{"nodes": [{"type": "memset", "bytes": 4}, node], "lt": [], "err": None}],
                    {"name": "default"}, {}, "capture", "", [])
    assert plan_of({"nodes": [node], "lt": []}, {k: Interner() for k in ("kernels", "lt", "errors")})[0][11] == [words]
    rec = json.loads(json.dumps(rec))
    ((tmpl, vary, ts, pid),) = list(recorded_calls(rec))
    c = raw_call(tmpl, vary, ts[0], rec["tables"]["plans"][pid], rec["tables"])
    assert c["segment_k_launch"] == [words]
    entry = checked_entry(dict(TF32_ENTRY), {"op": "mm"}, [1024, 1024, 4096, 1], c["kernels"], "h100", "t",
                          segment_k=c["segment_k_launch"])
    assert "why" not in entry, entry
    entry = json.loads(json.dumps(entry))
    plan = plan_from_fields(entry, call_from_entry(entry, [1024, 1024, 4096, 1], "t"), "h100", "", "", "t")
    # the entry stores no problem (runs of token counts share it); the plan takes its call's, as recorded
    assert "mnk" not in entry["segment_k"] and plan.segment_k.from_call
    assert dataclasses.replace(plan.segment_k, from_call=False) == launch_of_words(words, cap["name"])
    assert plan.segment_k.segments == 15
    text = plan.describe()
    assert "8 of 128 output tiles split" in text and "split outputs (torch cols x rows)" in text
    shown = render(Answer(plan, "recorded"))
    assert "S = 15, 8 of 128 output tiles split" in shown and "[3808, 4096)" in shown
    got = facts(Answer(plan, "recorded"))["segment_k"]
    assert got["segments"] == 15 and got["segment_ends"][-1] == 4096 and len(got["split_outputs"]) == 8
    assert got["split_outputs"][0] == [0, 128, 768, 832]  # rows 0..127 x cols 768..831: nn, the kernel's m is N


def test_calls_without_the_words_are_refused_naming_tcsmt_record():
    spec = "mm 1024x1024x4096 float32 tf32=1"
    cap = captures()[spec]
    words = {**{k: cap["words"][k] for k in KEPT}, "grid": cap["grid"], "cluster": cap["cluster"]}
    for launches in (None, [None]):
        why = checked_entry(dict(TF32_ENTRY), {}, [1024, 1024, 4096, 1], [cap["name"]], "h100", "t",
                            segment_k=launches)["why"]
        assert "`tcsmt record`" in why and "\n" not in why
    other = checked_entry(dict(TF32_ENTRY), {}, [1024, 1024, 4160, 1], [cap["name"]], "h100", "t", segment_k=[words])
    assert "does not fit the call" in other["why"]
    bad = checked_entry(dict(TF32_ENTRY), {}, [1024, 1024, 4096, 1], [cap["name"]], "h100", "t",
                        segment_k=[{**words, "split_tiles": words["split_tiles"] + 1}])
    assert "disagree with the rule" in bad["why"]
    biased = checked_entry({**TF32_ENTRY, "epilogue": ["bias"]}, {}, [1024, 1024, 4096, 1], [cap["name"]], "h100",
                           "t", segment_k=[words])
    assert "epilogue" in biased["why"]
    off = checked_entry(dict(TF32_ENTRY), {}, [1024, 1024, 4096, 1], [cap["name"].replace("_on_", "_off_")],
                        "h100", "t")
    assert "why" not in off and "segment_k" not in off


def test_a_plan_needs_the_output_indices_and_its_own_problem():
    plan = _plan("mm 1024x1024x4096 float32 tf32=1")
    a, b = np.zeros((2, 4096), np.float32), np.zeros((4096, 2), np.float32)
    with pytest.raises(TcsmtError, match="rows="):
        run(plan, a, b)
    with pytest.raises(TcsmtError, match="rows="):
        run_pairs(plan, a, b)
    # a launch that names its problem (the recorded words) is refused for another call; a catalog entry's names
    # none and follows its plan's call (a run of token counts shares the host's choices)
    named = dataclasses.replace(plan, segment_k=dataclasses.replace(plan.segment_k, from_call=False))
    other = dataclasses.replace(named, call=dataclasses.replace(plan.call, K=2048))
    with pytest.raises(TcsmtError, match="does not fit this call"):
        run(other, a[:, :2048], b[:2048], rows=[0, 1], cols=[0, 1])
    follows = dataclasses.replace(plan, call=dataclasses.replace(plan.call, K=2048))
    assert (follows.segment_k.k, follows.segment_k.segments) == (2048, plan.segment_k.segments)


def _kept(item: dict) -> np.ndarray:
    M = parse_record_spec(item["spec"]).M
    return np.frombuffer(gzip.decompress(base64.b64decode(item["out"])), dtype=np.uint32).reshape(M, -1)


@pytest.mark.parametrize("probes, spec, params", [
    ("h100_segment_k_probes.json.gz", "mm 302x9728x2560 float32 tf32=1", "h100_segment_k_params.json.gz"),
    ("h100_segment_k_probes.json.gz", "mm 1528x6928x2776 float32 tf32=1", "h100_segment_k_params.json.gz"),
    ("h100_segment_k_probes_fresh.json.gz", None, "h100_segment_k_params_fresh.json.gz"),
    ("h100_segment_k_tree_probes.json.gz", None, "h100_segment_k_params.json.gz"),
])
def test_the_plans_give_the_probes_outputs(probes, spec, params):
    """The committed probe outputs (+L, -L and 1s: ``tools/device/segment_k_probe.py``, ``segment_k_tree_probe.py``)
    of calls whose tiles are split, evaluated through ``tcsmt.library.run`` under the plan their committed launch
    words make (the tf32 chain per segment, the tree join): up to 48 rows with split outputs and 16 with whole ones,
    every kept column, bit for bit.  Where no
    spec is named, the split call of the file with the most segments."""
    with gzip.open(LIB / probes, "rt") as f:
        items = json.load(f)["calls"]
    caps = captures(params)
    if spec is None:
        spec = max((it["spec"] for it in items if it["spec"] in caps),
                   key=lambda s: (caps[s]["words"]["segments"], s))
    item = next(it for it in items if it["spec"] == spec)
    call, plan = parse_record_spec(spec), _plan(spec, params)
    cols = np.asarray(item["cols"])
    mask = split_outputs(plan.segment_k, np.arange(call.M)[:, None], cols[None, :])
    rows = np.union1d(np.flatnonzero(mask.any(axis=1))[:48], np.flatnonzero(~mask.all(axis=1))[:16])
    make = tree_probe_a if "tree" in probes else probe_a
    A = make(call.M, call.K)[rows]
    B = np.full((call.K, len(cols)), 0x3F800000, dtype=np.uint32)
    got = np.asarray(run(plan, A, B, rows=rows, cols=cols)).astype(np.uint32)
    assert split_outputs(plan.segment_k, rows[:, None], cols[None, :]).any()
    np.testing.assert_array_equal(got, _kept(item)[rows], err_msg=spec)


@pytest.mark.parametrize("gpu", ["h100", pytest.param("h200", marks=pytest.mark.slow)])  # CI time: the H100's
def test_the_gpu_samples_replay_bit_for_bit(gpu):
    """The GPU check: 61 tf32 calls recorded with their launch words and run on seeded random inputs (normal, wide,
    cancel) on each GPU; the 50 that ran ``segment_k_on`` kernels (S = 2 to 15) gave 12,656 sampled outputs (10,335 of
    them in split tiles on the H100, 10,346 on the H200), and the 11 ``linear`` calls with a bias ran
    ``segment_k_off`` (1,056 outputs): replayed here for the calls of every S seen, the smallest of each (the whole
    file: ``python -m tools.library.segment_k_replay``, every output bit-exact,
    ``evidence/library/h200_segment_k_samples.json``)."""
    samples = LIB / f"{gpu}_segment_k_samples.json.gz"
    with gzip.open(samples, "rt") as f:
        doc = json.load(f)
    assert len(doc["calls"]) == 61 and not doc["failed"] and not doc["not_run"]
    plans = plans_of_recording(doc["recording"], gpu)
    on = {}
    for item in doc["calls"]:
        plan = plans[item["index"]][1]
        assert not isinstance(plan, str), plan
        if plan.segment_k is not None:
            call = plan.call
            size = call.M * call.K + call.K * call.N
            S = plan.segment_k.segments
            if S not in on or size < on[S][0]:
                on[S] = (size, item["spec"])
    assert sorted(on) == [2, 3, 4, 5, 11, 14, 15]
    rows = replay_file(samples, gpu, only={s for _, s in on.values()})
    assert all(r["differing"] == 0 and r["in_split_tiles"] > 0 and r["same_kernels"] and r["same_launch_words"]
               for r in rows), rows


def test_checked_forms_are_the_forms_the_gpu_checks_covered():
    """``segment_k_checked.CHECKED_FORMS`` is the set of launch forms of the calls whose GPU outputs the rule gave: the probed
    calls (their launch words in the params files: the H100's and the H200's calls of every recorded form and of every
    recorded end of the split tiles in the narrower last panels) and the sampled calls of both GPUs; and
    ``CHECKED_TAILS`` the (panel width, left-over) of the probed calls whose split tiles end in those panels.  The
    fresh call whose outputs differed under the first cut (``h100_catalog_samples_segment_k.json``: ``mm 13824x5120x991``
    A transposed) is of a form probed since, its left-over (W = 8, 6 rows) among the tails."""
    from tcsmt.library.segment_k import KERNEL_FORM, launch_form, launch_words, tail_of
    from tcsmt.library.segment_k_checked import CHECKED_FORMS, CHECKED_TAILS

    pairs = (("h100_segment_k_probes.json.gz", "h100_segment_k_params.json.gz"),
             ("h100_segment_k_probes_more.json.gz", "h100_segment_k_params.json.gz"),
             ("h100_segment_k_probes_fresh.json.gz", "h100_segment_k_params_fresh.json.gz"),
             ("h100_segment_k_tree_probes.json.gz", "h100_segment_k_params.json.gz"),
             ("h100_segment_k_tree_probes.json.gz", "h100_segment_k_params_fresh.json.gz"),
             ("h200_segment_k_probes_forms.json.gz", "h200_segment_k_params_forms.json.gz"),
             ("h200_segment_k_probes_tails.json.gz", "h200_segment_k_params_tails.json.gz"),
             ("h200_segment_k_probes_large.json.gz", "h200_segment_k_params_large.json.gz"))
    forms, tails = set(), set()
    for probes, params in pairs:
        with gzip.open(LIB / probes, "rt") as fh:
            specs = {c["spec"] for c in json.load(fh)["calls"]}
        with gzip.open(LIB / params, "rt") as fh:
            d = json.load(fh)
        for r in d["results"]:
            for n in r.get("nodes", []) if r["spec"] in specs else []:
                name = d["kernel_names"][n["name"]] if isinstance(n.get("name"), int) else str(n.get("name"))
                if "segment_k_on" in name:
                    w = launch_words(bytes.fromhex(n["params"][0][2]))
                    m = KERNEL_FORM.search(name)
                    assert m is not None
                    forms.add((m.group(1), int(m.group(2)), int(m.group(3)), w["swizzle_log"], w["raster_along_m"],
                               int(n["grid"][1]), w["cluster_cols"]))
                    tail = tail_of(launch_of({"name": name, "grid": n["grid"], "words": w}))
                    if tail:
                        tails.add(tail)
    for gpu in ("h100", "h200"):
        with gzip.open(LIB / f"{gpu}_segment_k_samples.json.gz", "rt") as fh:
            doc = json.load(fh)
        for _call, plan in plans_of_recording(doc["recording"], gpu):
            if not isinstance(plan, str) and plan.segment_k is not None:
                m = KERNEL_FORM.search(plan.kernels[0])
                assert m is not None
                forms.add(launch_form(plan.segment_k, m.group(1)))
    assert forms == CHECKED_FORMS and tails == CHECKED_TAILS
    assert ("nt", 128, 256, 3, 1, 2, 1) in CHECKED_FORMS and (8, 6) in CHECKED_TAILS
