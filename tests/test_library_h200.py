"""The H200 cuBLAS plans (evidence/library_plans.md, "H200"): the committed
files carry their versions and the whole grid; the call-by-call comparison with the H100 table
(evidence/h200_vs_h100_plans.json) is what tools/library/plans_compare.py computes from the committed
plan files; the h200 plan table gives a plan only where the H200 recorded the H100's plan, and a one-line error
elsewhere.

Expected values: the recorded files evidence/h200_cublas_plans.json.gz and h100_cublas_plans.json.gz (cuBLAS
13.1.0 through torch 2.11.0+cu130 on each GPU); e.g. ``mm`` bf16 1x512x16384 traced numSplitsK=11 on the H200
and 9 on the H100, ``mm`` bf16 1024x1024x1024 the same kernel and no split on both.
"""
from __future__ import annotations

import pytest
from conftest import REPO, evidence_json

from tcsmt import TcsmtError
from tcsmt import library as L
from tcsmt.library.convert import convert
from tcsmt.library.plans import read_table_text
from tools.library import plans_compare as CMP

RESULTS = REPO / "evidence"


def _load(name: str) -> dict:
    return evidence_json(name)


def test_h200_files_carry_versions_and_the_grid() -> None:
    plans, val = _load("h200_cublas_plans.json.gz"), _load("h200_library_validation.json.gz")
    for d in (plans, val):
        assert d["gpu"] == "NVIDIA H200"
        assert (d["torch"], d["cuda"], d["cublas"], d["cublaslt"]) == ("2.11.0+cu130", "13.0", "130100", "130100")
        assert d["driver"] == "580.159.04"
    sizes = [1 << i for i in range(15)]
    grid = {(c["M"], c["N"], c["K"]) for c in plans["calls"]
            if c["op"] == "mm" and c["a_dtype"] == "bfloat16" and c["out_dtype"] == "bfloat16"}
    assert all((m, n, k) in grid for m in sizes for n in sizes for k in sizes)
    assert all(c["split_k"] is not None or "torch_error" in c for c in plans["calls"])
    assert len(val["calls"]) == 308 and all(c["deterministic"] for c in val["calls"])


def test_comparison_file_is_recomputed_from_the_plan_files() -> None:
    a, b = _load("h200_cublas_plans.json.gz"), _load("h100_cublas_plans.json.gz")
    mine = CMP.compare_tables(CMP.views(a["calls"], a["lt_algos"]), CMP.views(b["calls"], b["lt_algos"]), "h200", "h100")
    committed = _load("h200_vs_h100_plans.json")["plans"]
    for k in ("calls_in_both", "plan_same", "plan_differs", "same_per_aspect", "differs_in"):
        assert mine[k] == committed[k], k
    assert committed["plan_same"] == 22148 and committed["calls_in_both"] == 26470
    rows = {r[0]: r for r in committed["differing_calls"]}
    r = rows["mm bfloat16->bfloat16 1x512x16384"]
    assert (r[2], r[5]) == (11, 9)


@pytest.mark.slow  # regenerates a committed file from the evidence: run with -m slow when the converter, rules or evidence change
def test_h200_table_is_the_converters_output() -> None:
    """models/library/h200_cublas13_recorded.toml.gz: the H200 calls that recorded the H100's plan, with the H100's
    split-K rules and decisions (library_import --same-as), and the calls whose own plan belongs to a class confirmed
    on the H200 (--confirmed h200_library_confirm.json); nothing edited by hand."""
    names = ("h200_cublas_plans.json", "h200_library_validation.json", "h100_library_decisions.json",
             "h100_cublas_plans.json", "h100_library_validation.json", "h200_library_confirm.json")
    # the plan and validation files are kept gzipped; the table names every file by its JSON name
    raw, val, dec, p100, v100, conf = (_load(n + ".gz" if "cublas_plans" in n or "validation" in n else n) for n in names)
    probes = [(n, _load(f"library/{n}")) for n in ("h200_layout_probes.json", "h200_layout_probes_fresh.json")]
    text = convert(raw, names[0], "h200", [(names[1], val)], dec, names[2], [(names[3], p100), (names[4], v100)],
                   (names[5], conf), probes)
    assert text == read_table_text(REPO / "models" / "library" / "h200_cublas13_recorded.toml.gz")


@pytest.mark.slow  # regenerates a committed file from the evidence: run with -m slow when the converter, rules or evidence change
def test_h200_confirmations_are_recomputed_from_the_device_files() -> None:
    """evidence/h200_library_confirm.json is what `python -m tools.library.h200_confirm summary`
    computes from the committed H200 probes and validation samples (h200_library_confirm_{probes,samples}.json,
    recorded on the H200 with driver 580.159.04, torch 2.11.0+cu130, cuBLAS 13.1): every class of differing plans
    confirmed, every probe reading the H100 family's slice rule and reduction, every replayed output bit-exact."""
    from tools.library import h200_confirm as HC

    committed = _load("h200_library_confirm.json")
    mine = HC.summary(_load(HC.SAMPLES), _load(HC.PROBES), _load(HC.PLANS_H200), _load(HC.PLANS_H100),
                      _load("h100_library_decisions.json"))
    assert mine["classes"] == committed["classes"]
    assert (committed["gpu"], committed["driver"], committed["cublas"]) == ("NVIDIA H200", "580.159.04", "130100")
    split = [c for name, c in committed["classes"].items() if name.startswith("family")]
    assert len(split) == 2 and all(c["probes"] == c["probes_agree"] > 0 for c in split)
    assert all(c["confirmed"] and c["outputs"] > 0 and c["outputs_differ"] == 0 for c in committed["classes"].values())
    assert sum(committed["differing_calls_per_class"].values()) == 4322


def test_h200_probes_of_the_catalog_recordings_cover_their_split_counts() -> None:
    """The third H200 run (2026-11-27, `h200_confirm recorded-lists` over the H200 catalog recordings, appended by
    `ingest --add`): one probe per split-K count S of the recorded nvjet calls that the grid's probes had not read, each
    carrying the recorded plan signature, each traced at that S, its slice starts the family's rule."""
    from tools.library import h200_confirm as HC

    fams = _load(HC.PLANS_H100)["families"]
    probes = [p for p in _load(HC.PROBES)["probes"] if p.get("recorded")]
    by_class: dict[str, set[int]] = {}
    for p in probes:
        cls = p["config"].split(" | ")[0]
        S = p["recorded"]["split_k"]
        assert p["lt_split_k"] == S and p["starts"] == HC._rule_starts(fams[cls.removeprefix("family ")], p["K"], S)
        by_class.setdefault(cls, set()).add(S)
    assert by_class == {"family nvjet_sm90_16bit_splitK": {5, 7, 9, 10, 13},
                        "family nvjet_sm90_fp8_splitK": {4, 5, 8, 11}}


def test_h200_decode_layers_on_newly_probed_split_counts_are_answered() -> None:
    """LLaMA-2 13B's down projection at 1 token (linear bf16 1 x 5120 x 13824) runs the nvjet 16-bit split-K family
    at S = 5 on the H200 (h200_layers_16bit recording), an S its probes read only in the third run: answered now."""
    p = L.plan("linear", 1, 5120, 13824, gpu="h200", a_dtype="bfloat16")
    assert p.split_k == 5 and p.gpu == "h200"


def test_h200_plan_where_the_h200_recorded_the_h100_plan() -> None:
    kw = {"a_dtype": "bfloat16"}
    p200, p100 = L.plan("mm", 1024, 1024, 1024, gpu="h200", **kw), L.plan("mm", 1024, 1024, 1024, gpu="h100", **kw)
    assert p200.gpu == "h200" and p200.split_k == p100.split_k and p200.kernels == p100.kernels
    assert any("same kernels, split_k and reductionScheme" in s for s in p200.sources)


def test_h200_own_plan_where_its_class_was_confirmed() -> None:
    """mm bf16 1x512x16384: the H200 traced numSplitsK = 11, the H100 9; the nvjet 16-bit split-K family was
    confirmed on the H200, so gpu="h200" has the H200's own plan (S = 11, the family's 64-wide chunks)."""
    p200 = L.plan("mm", 1, 512, 16384, gpu="h200", a_dtype="bfloat16")
    p100 = L.plan("mm", 1, 512, 16384, gpu="h100", a_dtype="bfloat16")
    assert (p200.split_k, p100.split_k) == (11, 9) and p200.grain == p100.grain == 64
    assert any("confirmed on this GPU" in s for s in p200.sources)


@pytest.mark.parametrize("args, kw, what", [
    (("scaled_mm", 256, 256, 256), dict(a_dtype="float8_e4m3fn", b_dtype="float8_e5m2", out_dtype="bfloat16",
                                        scale="tensor"),
     "class 'no split: nvjet_sm90_rqtst' was not confirmed"),  # other nvjet kernels on the H200, class unsampled
    (("mm", 3, 5, 7), dict(a_dtype="bfloat16"), "no recorded cuBLAS plan"),      # recorded on neither GPU
])
def test_h200_refuses_where_its_plan_is_not_confirmed_or_not_recorded(args, kw, what) -> None:
    with pytest.raises(TcsmtError, match=what) as exc:
        L.plan(*args, gpu="h200", **kw)
    assert "\n" not in str(exc.value)


def test_h200_replays_as_committed() -> None:
    """The committed replays (python -m tcsmt.library.replay on h200_library_validation.json): under the h200
    table every replayed output is bit-exact (300 calls: the 70 whose H200 plan differs from the H100's included;
    refused: 6 e4m3 x e5m2 calls of an unconfirmed class and the 2 fp32 calls the H100 table refuses too); under
    the H100 table every differing output lies in a call whose H200 trace has another numSplitsK than the H100's
    for the same call and inputs."""
    own = _load("h200_library_replay.json")
    assert own["plan_tables"] == ["h200_cublas13_recorded.toml"]
    assert (own["totals"]["replayed"], own["totals"]["checked"], own["totals"]["differ"]) == (300, 82640, 0)
    h100 = _load("h200_library_replay_h100_plans.json")
    assert h100["totals"]["checked"] == 84176 and h100["totals"]["differ"] == 2076
    v200, v100 = _load("h200_library_validation.json.gz")["calls"], _load("h100_library_validation.json.gz")["calls"]
    assert all(v200[n]["seed"] == v100[n]["seed"] for n in range(len(v200)))
    assert {f["call"] for f in h100["findings"]} <= {n for n in range(len(v200))
                                                     if v200[n]["split_k"] != v100[n]["split_k"]}


def test_h100_rules_at_the_h200_own_plans_as_committed() -> None:
    """evidence/h200_library_replay_own_plans.json (python -m tools.library.h200_own_plans): the
    H200 validation calls whose plan differs, under their own kernels and S with the H100 families: no output
    differs, and the calls with another S than the H100's are among them."""
    own = _load("h200_library_replay_own_plans.json")
    assert own["totals"]["replayed"] == 76 and own["totals"]["checked"] == 20864 and own["totals"]["differ"] == 0
    other_s = [n for n, (s200, s100) in own["split_k_h200_h100"].items() if s200 != s100]
    assert len(other_s) == 21
