"""Plan catalogs: built from device recordings by the plan tables' own conversion, looked up by call.

The fixture ``tests/data/library/h100_recording_sample.json.gz`` is three tasks of the H100 recording
``evidence/library/recordings/h100_layers_16bit.json.gz`` (torch 2.11, cuBLAS 13.1; every token count 1..16384):
GPT-2's 768x768 weight gradient in bf16 (split-K S = 1, 2, 3 over the tokens), GPT-2's LM-head input gradient
(N = 768, K = 50257; S up to 64) and a 768x768 ``linear`` with bias.  The shipped catalogs
(``models/library/*.sqlite``) are checked whole: every run names a plan that loads, runs do not overlap, and every
split-K plan names the family its slice and reduction rules were read from.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import evidence_json

from tcsmt.errors import TcsmtError
from tcsmt.library.call_plans import ConvertContext
from tcsmt.library.catalog import (
    PLAN_DICT_BYTES,
    Catalog,
    catalogs_in,
    family_text,
    pack_plan,
    plan_dict_of,
    plan_dictionary,
    read_plans,
    unpack_plan,
)
from tcsmt.library.catalog_build import build, progressions, read_recording, recorded_calls, token_counts
from tcsmt.library.checks import make_call
from tcsmt.library.gemv_rules import gemv_orders
from tcsmt.library.lookup import answer
from tcsmt.library.plans import call_from_entry, plan_fields, plans_dir
from tcsmt.library.rules import kernel_key

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "data" / "library" / "h100_recording_sample.json.gz"
EVIDENCE = REPO / "evidence"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    raw, dec = evidence_json("h100_cublas_plans.json.gz"), evidence_json("h100_library_decisions.json")
    ctx = ConvertContext.make(raw, "h100_cublas_plans.json", None, (), dec, "h100_library_decisions.json")
    out = tmp_path_factory.mktemp("plans") / "h100_sample.sqlite"
    build([(SAMPLE.name, read_recording(SAMPLE))], ctx, out, ["test sample"])
    return Catalog(out)


def _recorded(rec: dict, op: str, vary: str) -> list[tuple[dict, int, int]]:
    """(template, token count, recorded split_k) of every recorded call of the sample task with op/vary."""
    out = []
    for tmpl, v, ts, pid in recorded_calls(rec):
        if tmpl["op"] == op and v == vary:
            out += [(tmpl, t, rec["tables"]["plans"][pid][5]) for t in ts]
    return out


def test_token_counts_and_progressions():
    assert token_counts("1-4+8x32") == [1, 2, 3, 4, 8, 16, 24, 32]
    assert len(token_counts("all")) == 16384 and token_counts("p2")[-1] == 16384
    assert progressions([1, 2, 3, 8, 16, 24, 25]) == [(1, 3, 1), (8, 24, 8), (25, 25, 1)]


def test_every_recorded_split_k_is_the_catalogs(catalog):
    """Each of the 16,384 recorded weight-gradient calls answers with the S cuBLASLt's trace recorded for it."""
    rec = read_recording(SAMPLE)
    calls = _recorded(rec, "mm", "K")
    assert len(calls) == 16384 and {s for _, _, s in calls} == {1, 2, 3}
    for tmpl, t, S in calls[::7]:
        c = make_call("mm", tmpl["M"], tmpl["N"], t, a_dtype="bfloat16", a_t=True)
        hits = catalog.find(c)
        assert len(hits) == 1 and hits[0].plan is not None, t
        assert hits[0].plan.split_k == S, t
        if S > 1:
            assert hits[0].plan.kernels[0].startswith("family "), hits[0].plan.kernels


def test_lm_head_input_gradient_uses_many_split_counts(catalog):
    rec = read_recording(SAMPLE)
    calls = _recorded(rec, "mm", "M")
    assert max(s for _, _, s in calls) == 64
    answered = 0
    for tmpl, t, S in calls[::97]:
        c = make_call("mm", t, tmpl["N"], tmpl["K"], a_dtype="bfloat16")
        (hit,) = catalog.find(c)
        if hit.plan is None:  # M = 1: a gemv split kernel whose slice rule no probe read
            assert t == 1 and "slice rule unknown" in hit.why, (t, hit.why)
            continue
        assert hit.plan.split_k == S
        answered += 1
    assert answered == len(calls[::97]) - 1


def test_runs_do_not_overlap_and_plans_load(catalog):
    check_catalog(catalog)


def test_lookup_through_a_plans_folder(catalog, monkeypatch):
    """$TCSMT_PLANS adds a folder of catalogs; a call it covers answers from it with the run as evidence; a layout
    it does not cover is refused with the recording command."""
    monkeypatch.setenv("TCSMT_PLANS", str(catalog.path.parent))
    ans = answer(make_call("mm", 768, 768, 5000, a_dtype="bfloat16", a_t=True, settings="default"), "h100")
    assert ans.kind == "recorded catalog" and "K = " in ans.evidence[0]
    with pytest.raises(TcsmtError, match="tcsmt record --call 'mm 768x768x5000 bfloat16'"):
        answer(make_call("mm", 768, 768, 5000, a_dtype="bfloat16"), "h100", stamp={"gpu_name": "NVIDIA H100 80GB HBM3"})
    with pytest.raises(TcsmtError, match="was recorded under gpu_name"):
        answer(make_call("mm", 768, 768, 5000, a_dtype="bfloat16", a_t=True), "h100", stamp={"gpu_name": "NVIDIA H200"})


def test_settings_are_part_of_the_key(catalog):
    c = make_call("mm", 768, 768, 5000, a_dtype="bfloat16", a_t=True, settings="blas=cublaslt")
    assert catalog.find(c) == []
    assert family_text(c) != family_text(make_call("mm", 768, 768, 5000, a_dtype="bfloat16", a_t=True))


def test_a_disagreeing_recording_is_refused(tmp_path):
    rec = read_recording(SAMPLE)
    other = json.loads(json.dumps(rec))
    for task in other["tasks"]:  # the same calls, each recorded with the next plan of the table
        task["runs"]["plan"] = [(p + 1) % len(other["tables"]["plans"]) for p in task["runs"]["plan"]]
    path = tmp_path / "other.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(other, f)
    raw = evidence_json("h100_cublas_plans.json.gz")
    ctx = ConvertContext.make(raw, "h100_cublas_plans.json")
    with pytest.raises(TcsmtError, match="disagree"):
        build([(SAMPLE.name, rec), (path.name, read_recording(path))], ctx, tmp_path / "x.sqlite", [])


def test_the_recorders_out_of_memory_is_not_torchs_answer(tmp_path):
    """A call whose capture ran out of device memory in the recorder's workers (what happened to the wide
    layers of evidence/library/recordings/h100_check_beyond_16384.json.gz) is 'not recorded', never 'torch
    refuses this call'."""
    rec = read_recording(SAMPLE)
    oom = json.loads(json.dumps(rec))
    oom["tables"]["errors"] = [*oom["tables"].get("errors", []), "OutOfMemoryError: CUDA out of memory."]
    err = len(oom["tables"]["errors"]) - 1
    oom["tables"]["plans"] = [[*p[:8], err, None] for p in oom["tables"]["plans"]]
    path = tmp_path / "oom.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(oom, f)
    raw = evidence_json("h100_cublas_plans.json.gz")
    ctx = ConvertContext.make(raw, "h100_cublas_plans.json")
    build([(path.name, read_recording(path))], ctx, tmp_path / "oom.sqlite", [])
    db = sqlite3.connect(tmp_path / "oom.sqlite")
    whys = {f["why"] for f in read_plans(db).values()}
    assert whys and all(w.startswith("not recorded: the recorder ran out of device memory") for w in whys)


def check_catalog(cat: Catalog) -> None:
    db = sqlite3.connect(f"file:{cat.path}?mode=ro", uri=True)
    plans = read_plans(db)
    for pid, f in plans.items():
        if "why" in f:
            assert f["why"], pid
            continue
        plan_fields(f, f"plan {pid}")
        call_from_entry(f, [1, 1, 1, 1], f"plan {pid}")
        if int(f.get("split_k", 1)) > 1:  # slices from a split-K family's rules, or a GEMV kernel's order read by probes
            gemv = {name for name, _block in gemv_orders(cat.gpu)}
            assert f["kernels"][0].startswith("family ") or kernel_key(f["kernels"][0]) in gemv, (pid, f["kernels"])
    open_runs: dict[tuple, list[tuple[int, int, int]]] = {}
    for fam, vary, d1, d2, lo, hi, step, pid in db.execute(
            "SELECT family, vary, d1, d2, lo, hi, step, plan FROM runs ORDER BY family, vary, d1, d2, lo"):
        assert pid in plans and lo <= hi and step >= 1 and (hi - lo) % step == 0
        key = (fam, vary, d1, d2)
        # runs of one family and fixed dims may interleave (residue classes), but no count is in two of them
        live = [r for r in open_runs.get(key, []) if r[1] >= lo]
        for r in live:
            assert not shares_a_count(r, (lo, hi, step)), (key, r, (lo, hi, step))
        open_runs[key] = [*live, (lo, hi, step)]


def shares_a_count(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Whether the progressions lo, lo + step, ..., hi of ``a`` and ``b`` have a common value."""
    (lo1, hi1, s1), (lo2, hi2, s2) = a, b
    first, last = max(lo1, lo2), min(hi1, hi2)
    return any(t >= first and (t - lo2) % s2 == 0
               for t in range(lo1 + -(-(first - lo1) // s1) * s1, last + 1, s1)[:s2])


def test_shares_a_count():
    assert shares_a_count((1, 9, 2), (3, 3, 1)) and not shares_a_count((1, 9, 2), (2, 10, 2))
    assert shares_a_count((8, 64, 8), (1, 100, 3)) and not shares_a_count((8, 16, 8), (17, 30, 1))


@pytest.mark.parametrize("path", sorted(plans_dir().glob("*.sqlite")), ids=lambda p: p.name)
def test_shipped_catalog_integrity(path):
    cat = Catalog(path)
    assert cat.stamp.get("gpu_name") and cat.stamp.get("cublas") and cat.gpu in ("h100", "h200")
    check_catalog(cat)


def test_shipped_catalogs_are_found():
    assert {c.gpu for c in catalogs_in(plans_dir())} <= {"h100", "h200"}


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_shipped_catalog_answers_its_recordings(gpu):
    """A sample of the calls of the committed recording behind each shipped catalog
    (``evidence/library/recordings/<gpu>_layers_16bit.json.gz``): the catalog covers each one, and where it has a plan,
    its S is the one cuBLASLt's trace recorded for that call."""
    from tcsmt.library.catalog_build import setting_of

    path = plans_dir() / f"{gpu}_cublas13_catalog.sqlite"
    rec_path = EVIDENCE / "library" / "recordings" / f"{gpu}_layers_16bit.json.gz"
    if not path.exists() or not rec_path.exists():
        pytest.skip("no shipped catalog or recording")
    cat, rec = Catalog(path), read_recording(rec_path)
    runs = list(recorded_calls(rec))
    planned = 0
    for tmpl, vary, ts, pid in runs[:: max(1, len(runs) // 400)]:
        t = ts[len(ts) // 2]
        dims = {d: (t if d in vary else tmpl[d]) for d in "MNK"}
        c = make_call(tmpl["op"], dims["M"], dims["N"], dims["K"], a_dtype=tmpl["a_dtype"], out_dtype=tmpl["out_dtype"],
                      bias=tmpl["bias"], beta=tmpl["beta"], a_t=tmpl["a_t"],
                      b_t=tmpl["b_t"] and tmpl["op"] not in ("linear", "scaled_mm"),
                      settings=setting_of(rec, tmpl["a_dtype"]))
        hits = cat.find(c)
        assert hits, c.label()
        for h in hits:
            if h.plan is not None:
                planned += 1
                assert h.plan.split_k == rec["tables"]["plans"][pid][5], c.label()
    assert planned > 300


def test_plans_are_stored_with_a_preset_dictionary():
    """The builder compresses each plan with a preset zlib dictionary made from the plans' own source and refusal texts
    (meta ``plan_dict``); a plan packs and unpacks to its fields with it and without one (catalogs built before it),
    and the shipped catalogs carry one that every plan decodes with (checked whole by test_shipped_catalog_integrity)."""
    texts = [json.dumps({"why": "K order of the gemvx kernel not read"}),
             json.dumps({"split_k": 8, "sources": ["rec: split_k 8 from cuBLASLt's trace", "K order read by probes"]}),
             json.dumps({"split_k": 4, "sources": ["rec: split_k 8 from cuBLASLt's trace"]})]
    zdict = plan_dictionary(texts)
    assert 0 < len(zdict) <= PLAN_DICT_BYTES and b"K order read by probes" in zdict
    for t in texts:
        assert unpack_plan(pack_plan(t, zdict), zdict) == json.loads(t)
        assert unpack_plan(pack_plan(t, b""), b"") == json.loads(t)
        assert len(pack_plan(t, zdict)) < len(pack_plan(t, b""))
    for gpu in ("h100", "h200"):
        db = sqlite3.connect(f"file:{plans_dir() / f'{gpu}_cublas13_catalog.sqlite'}?mode=ro", uri=True)
        assert len(plan_dict_of(db)) > 1000
