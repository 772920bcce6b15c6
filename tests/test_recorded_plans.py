"""The rules GPU's recorded plan signatures that another GPU's catalog borrows (tcsmt.library.recordings), and the
draw of answered calls for the fresh GPU check (tools/library/catalog_samples.py pick).  Inputs: the committed
recordings (evidence/library/recordings/, tools/device/record_plans.py) and the shipped H100 catalog."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcsmt.errors import TcsmtError
from tcsmt.library.catalog_build import build_catalog
from tcsmt.library.lookup import answer, parse_record_spec
from tcsmt.library.plans import plans_dir
from tcsmt.library.recordings import RecordedPlans, read_recording, recorded_signature
from tcsmt.library.settings import parse_settings_key
from tools.library.catalog_samples import SWITCHABLE, pick

REC = Path(__file__).resolve().parents[1] / "evidence" / "library" / "recordings"


def test_signatures_of_a_recording_are_found_and_others_are_not():
    rec = read_recording(REC / "h100_rope.json.gz")
    plans = RecordedPlans([("h100_rope.json.gz", rec)])
    sigs = {recorded_signature(rec, pid) for pid in range(len(rec["tables"]["plans"]))}
    ran = [s for s in sigs if not s[3]]
    assert ran and all(plans.recorded_with(s) == "h100_rope.json.gz" for s in ran)
    kernels, S, scheme, refused = ran[0]
    assert plans.recorded_with((kernels, (S or 1) + 1, scheme, refused)) == ""  # another split-K count
    assert plans.recorded_with((("no_such_kernel",), S, scheme, refused)) == ""


def test_borrowing_recordings_need_the_plan_file_they_borrow_from(tmp_path):
    rec = read_recording(REC / "h200_rope.json.gz")
    theirs = read_recording(REC / "h100_rope.json.gz")
    with pytest.raises(TcsmtError, match="--same-as"):
        build_catalog([("h200_rope.json.gz", rec)], tmp_path / "c.sqlite", gpu="h200",
                      same_recordings=[("h100_rope.json.gz", theirs)])


def test_pick_draws_answered_calls_under_switchable_settings():
    calls = pick(plans_dir() / "h100_cublas13_catalog.sqlite", 12, seed=3)
    assert len(calls) == 12 and len({c["stratum"][0] + c["stratum"][1] for c in calls}) == 12
    for c in calls:
        call = parse_record_spec(c["spec"])
        assert set(parse_settings_key(call.settings)) <= SWITCHABLE
        assert answer(call, "h100", plans_dirs=()).plan is not None


def test_pick_before_keeps_only_calls_the_older_catalog_refuses(tmp_path):
    """``pick --before OLD``: an older catalog that refuses one run of a family whose runs interleave (step 4, other
    residues beside it) must keep exactly that run's calls; the run of the nearest start is not the one holding a
    count (the pick of 2026-11-27 took answered calls for refused ones that way)."""
    import sqlite3
    import zlib

    from tools.library.catalog_samples import _answered, _refused_in
    src = plans_dir() / "h100_cublas13_catalog.sqlite"
    old = tmp_path / "old.sqlite"
    old.write_bytes(src.read_bytes())
    db = sqlite3.connect(old)
    fam, d1, d2, lo, hi, step = db.execute(
        "SELECT a.family, a.d1, a.d2, a.lo, a.hi, a.step FROM runs a JOIN runs b ON a.family = b.family AND "
        "a.vary = b.vary AND a.d1 = b.d1 AND a.d2 = b.d2 AND b.lo > a.lo AND b.lo < a.hi AND a.step > 1 "
        "WHERE a.vary = 'M' LIMIT 1").fetchone()
    why = zlib.compress(json.dumps({"why": "refused for the test"}).encode())
    pid = db.execute("INSERT INTO plans (fields) VALUES (?)", (why,)).lastrowid
    db.execute("UPDATE runs SET plan = ? WHERE family = ? AND vary = 'M' AND d1 = ? AND d2 = ? AND lo = ?",
               (pid, fam, d1, d2, lo))
    db.commit()
    families, cls = _answered(db)
    fam_ids = {json.dumps(json.loads(k)): int(i) for i, k in db.execute("SELECT id, key FROM families")}
    family = families[fam]
    assert all(_refused_in(db, fam_ids, cls, family, "M", d1, d2, t) for t in range(lo, hi + 1, step))
    others = [t for t in range(lo + 1, hi) if (t - lo) % step and
              db.execute("SELECT 1 FROM runs WHERE family = ? AND vary = 'M' AND d1 = ? AND d2 = ? AND lo <= ? AND "
                         "hi >= ? AND (? - lo) % step = 0", (fam, d1, d2, t, t, t)).fetchone()]
    assert others and not any(_refused_in(db, fam_ids, cls, family, "M", d1, d2, t) for t in others)
