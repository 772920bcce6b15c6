"""Hostile inputs by class: no input may crash, hang, exhaust memory or write outside its place.

Each class of ``tests/hostile_cases.py`` (malformed files, runaway sizes, special files, time limits, names
from files, API arguments, weak messages) generates its variants and plays them in one child process
(few processes: the suite stays within its CPU budget) under a 4 GB address-space limit, each case under
its own time limit.  Every case must end as it expects: exit status 2 with exactly one ``tcsmt: error:``
line naming the file, field or limit (no traceback), exit 1 with one line, a one-line TcsmtError from the
API, or a check that holds; within its time limit; with no file left outside ``generated/`` of its working
directory; and no process of the class may outlive it.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MEMORY_CAP = 4 << 30
CLASS_SECONDS = 600
#: the fewest cases each class must generate (a generator that stops generating fails here)
MINIMUM = {"files": 250, "sizes": 150, "special": 80, "time": 6, "names": 6, "api": 55, "messages": 25}


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.fixture(scope="module", params=sorted(MINIMUM))
def played(request, tmp_path_factory):
    cls = request.param
    sandbox = tmp_path_factory.mktemp(f"hostile-{cls}")
    out = sandbox.parent / f"{sandbox.name}.json"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "CI": "true"}
    proc = subprocess.Popen([sys.executable, str(HERE / "hostile_cases.py"), cls, str(sandbox), str(out)],
                            preexec_fn=_cap, start_new_session=True, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=CLASS_SECONDS)
    finally:
        leftover = _group_alive(proc.pid)
        if leftover:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"the {cls} runner failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return cls, json.loads(out.read_text()), leftover


def _group_alive(pgid: int) -> bool:
    """Whether any process of the runner's session is still there (its solver children included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _problem(rec: dict) -> str | None:
    """What is wrong with one played case (None: it ended as it should)."""
    if rec["leaked"]:
        return f"wrote outside generated/: {rec['leaked'][:3]}"
    if rec["status"] == "timeout":
        return f"did not end within its {rec['limit']} s"
    if rec["within"] is not None and rec["seconds"] > rec["within"]:
        return f"took {rec['seconds']} s, more than the {rec['within']} s its time limit allows"
    expect = rec["expect"]
    if expect in ("error", "exit1", "ok"):
        want = {"error": 2, "exit1": 1, "ok": 0}[expect]
        out = (rec.get("stderr") or "") + (rec.get("stdout") or "")
        if rec.get("exception") or "Traceback" in out:
            return f"traceback: {(rec.get('exception') or out)[-600:]}"
        if rec["status"] != want:
            return f"exit status {rec['status']}, not {want}: {out[-400:]}"
        if expect == "ok":
            return None
        lines = [ln for ln in (rec.get("stderr") or "").splitlines() if ln.strip()]
        if len(lines) != 1:
            return f"{len(lines)} lines on stderr, not one: {lines[:4]}"
        line = lines[0]
        if expect == "error" and not line.startswith("tcsmt: error: "):
            return f"not a tcsmt error line: {line[:200]}"
    elif expect == "tcsmt_error":
        if rec["status"] != "TcsmtError":
            return f"{rec['status']}: {rec.get('message', rec.get('value', ''))[-600:]}"
        line = rec["message"]
        if "\n" in line:
            return f"a message of several lines: {line[:300]!r}"
    else:  # "true": a check that must hold
        return None if rec["status"] == "returned" and rec.get("returned_true") else \
            f"{rec['status']}: {rec.get('value', rec.get('message', ''))[-600:]}"
    missing = [n for n in rec["needles"] if n not in line]
    if missing:
        return f"the line does not name {missing}: {line[:300]}"
    present = [n for n in rec["absent"] if n in line]
    if present:
        return f"the line says {present}: {line[:300]}"
    return None


def test_every_hostile_case_ends_as_it_should(played):
    cls, records, leftover = played
    assert len(records) >= MINIMUM[cls], f"{cls}: only {len(records)} cases generated"
    problems = [f"{r['name']}: {p}" for r in records if (p := _problem(r))]
    assert not problems, f"{cls}: {len(problems)} of {len(records)} cases failed:\n" + "\n".join(problems[:40])
    assert not leftover, f"{cls}: processes outlived the runner"
