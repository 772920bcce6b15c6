"""Fresh random-shape calls (``tools/library/fresh_random.py``): the list holds only calls no shipped catalog holds, and
the committed GPU recording of it answers them as the committed GPU outputs say.

The recordings are ``evidence/library/recordings/<gpu>_fresh_random.json.gz`` (``tcsmt record --calls`` on the H100 and
the H200, 2026-11-28) and the outputs ``evidence/library/<gpu>_fresh_random_samples.json.gz``
(``tools/device/catalog_sample_run.py``); the catalog is built here from the recording as ``tcsmt record --recording``
builds it, and a handful of the cheapest sampled calls are replayed bit for bit."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tcsmt.errors import TcsmtError
from tcsmt.library.catalog_build import build_catalog, read_recording
from tcsmt.library.lookup import answer, parse_record_spec
from tools.library import fresh_random
from tools.library.catalog_samples import replay

REPO = Path(__file__).resolve().parents[1]
LIST = REPO / "tools" / "device" / "fresh_random_list.json"


def test_the_list_holds_fresh_calls_only():
    doc = json.loads(LIST.read_text())
    assert doc["drawn"] == 7000 and doc["torch_refuses"] == 705 and len(doc["all_calls"]) == 5812
    for spec in doc["all_calls"][::97]:
        call = parse_record_spec(spec)
        assert not fresh_random.held(call, "h100") and not fresh_random.held(call, "h200")
    sampled = {c["spec"] for c in doc["calls"]}
    assert len(doc["calls"]) == 600 and sampled <= set(doc["all_calls"])


def test_a_small_draw_repeats_the_recorders_generator():
    doc = fresh_random.fresh_list(20261128, 3, 6, ("h100",))
    full = json.loads(LIST.read_text())
    assert doc["drawn"] == 21
    assert [s for s in full["all_calls"] if s in set(doc["all_calls"])] == doc["all_calls"][:len(
        [s for s in full["all_calls"] if s in set(doc["all_calls"])])]


@pytest.fixture(scope="module", params=["h100", "h200"])
def recorded(request, tmp_path_factory):
    gpu = request.param
    rec = read_recording(REPO / "evidence" / "library" / "recordings" / f"{gpu}_fresh_random.json.gz")
    folder = tmp_path_factory.mktemp(f"{gpu}_fresh")
    build_catalog([("fresh", rec)], folder / f"{gpu}_fresh_random.sqlite", gpu=gpu)
    return gpu, str(folder)


def test_the_recording_answers_what_the_shipped_catalogs_refuse(recorded):
    gpu, folder = recorded
    spec = next(s for s in json.loads(LIST.read_text())["all_calls"] if s.startswith("mm ") and "tf32" not in s)
    call = parse_record_spec(spec)
    with pytest.raises(TcsmtError, match="no recorded cuBLAS plan"):
        answer(call, gpu, plans_dirs=())
    assert answer(call, gpu, plans_dirs=(folder,)).kind == "recorded catalog"


def _answered(spec: str, gpu: str, folder: str) -> bool:
    try:
        answer(parse_record_spec(spec), gpu, plans_dirs=(folder,))
        return True
    except TcsmtError:
        return False


def test_cheap_answered_sampled_calls_replay_bit_exact(recorded):
    gpu, folder = recorded
    raw = json.load(gzip.open(REPO / "evidence" / "library" / f"{gpu}_fresh_random_samples.json.gz", "rt"))
    by_size = sorted(raw["calls"], key=lambda c: (lambda x: x.M * x.N * x.K)(parse_record_spec(c["spec"])))
    cheap = [c for c in by_size if "tf32" not in c["spec"] and _answered(c["spec"], gpu, folder)][:12]
    res = replay({**raw, "calls": cheap}, gpu, (folder,))
    t = res["totals"]
    assert t["calls"] == t["answered"] == t["bit_exact_calls"] == 12 and t["outputs_differ"] == 0 and t["outputs"] > 0


def test_bad_reason_is_one_line(tmp_path, capsys):
    status = fresh_random.main(["refused", str(LIST), "--gpu", "h100", "--plans", str(tmp_path), "--reason", "(",
                                "-o", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert status == 2 and "--reason: not a regular expression" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()
