"""Plan catalogs: cuBLAS plans recorded at scale, stored in SQLite, looked up in well under a millisecond.

A catalog holds, for one GPU and library version, the plan of every recorded call, as runs of token counts
that share one plan: the forward and input-gradient products of a layer vary M (N and K fixed), the weight
gradient varies K (its reduction runs over the tokens; M and N fixed).  It is generated from raw device
recordings (``tcsmt record``: :mod:`tcsmt.hwcheck.record`; ``tools/device/record_plans.py``: kernel names,
cuBLASLt's numSplitsK and reductionScheme per call) by :func:`build` (``python -m tcsmt.library.catalog_build``),
never edited by hand.  Each recorded plan becomes a :class:`~tcsmt.library.plans.Plan` through the same conversion
as the plan tables (:class:`tcsmt.library.convert.ConvertContext`), or a refusal saying what is unknown.

Tables (``sqlite3``, read-only at run time):

* ``meta(key, value)``: ``key_format`` (:data:`KEY_FORMAT`), ``gpu`` (the name ``tcsmt.library.plan(gpu=)`` takes), ``arch``, ``device``, ``library``,
  ``stamp`` (JSON: GPU name, SM count, driver, torch, CUDA, cuBLAS, cuBLASLt:
  :data:`tcsmt.hwcheck.stamp.STAMP_FIELDS`), ``sources`` (JSON list);
* ``plans(id, fields)``: one row per distinct plan, ``fields`` the zlib-compressed JSON of a plan table's
  ``[[plans]]`` entry, or
  ``{"why": ...}`` for calls recorded without a usable plan (torch's refusal, an unknown slice rule, ...);
  compressed with the preset dictionary in meta ``plan_dict`` (base64) where the catalog has one
  (:func:`plan_dictionary`: the source and refusal texts the plans repeat; catalogs built before 2026-11-27, night,
  have none);
* ``families(id, key)``: the call families (:func:`family_text` of :meth:`Call.family_key`: the call without
  its shape);
* ``runs(family, vary, d1, d2, lo, hi, step, plan)``: the calls of family ``family`` whose varying dimensions
  (``vary``, :data:`VARIES`; (d1, d2) the others) are one of lo, lo + step, ..., hi run ``plan``.
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import json
import sqlite3
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tcsmt.errors import TcsmtError
from tcsmt.library.plans import BETA_KINDS, Call, Plan, call_from_entry, plan_from_fields

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE families (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE plans (id INTEGER PRIMARY KEY, fields BLOB NOT NULL);
CREATE TABLE runs (family INTEGER NOT NULL, vary TEXT NOT NULL, d1 INTEGER NOT NULL, d2 INTEGER NOT NULL,
                   lo INTEGER NOT NULL, hi INTEGER NOT NULL, step INTEGER NOT NULL, plan INTEGER NOT NULL,
                   PRIMARY KEY (family, vary, d1, d2, lo)) WITHOUT ROWID;
"""
VARIES = ("M", "K", "MN", "MK", "N")
"""What a run varies: M (forward and input-gradient products: (d1, d2) = (N, K)), K (weight gradients, the
reduction over the tokens: (d1, d2) = (M, N)), a sequence length in two dimensions at once (attention's
batched products: M = N = S with d1 = K, or M = K = S with d1 = N; d2 = 0), or N alone (a decode step's
scores q K^T over the KV length, and the rotary embedding's product over the positions: (d1, d2) = (M, K))."""


PLAN_DICT = "plan_dict"
"""The meta key of the plans' preset zlib dictionary (base64)."""
PLAN_DICT_BYTES = 32000
"""At most zlib's window (32 KiB) of dictionary."""


def plan_dictionary(texts: Iterable[str]) -> bytes:
    """A preset zlib dictionary for the plans' JSON texts: the ``sources`` lines and ``why`` texts they hold, each as
    JSON, those repeated most (count x length; ties by text) nearest the end (where zlib finds them cheapest), up to
    :data:`PLAN_DICT_BYTES`."""
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        fields = json.loads(text)
        counts.update(str(x) for x in fields.get("sources", []))
        if "why" in fields:
            counts[str(fields["why"])] += 1
    parts: list[bytes] = []
    size = 0
    for value, _n in sorted(counts.items(), key=lambda kv: (-kv[1] * len(kv[0]), kv[0])):
        part = json.dumps(value).encode()
        if size + len(part) <= PLAN_DICT_BYTES:
            parts.append(part)
            size += len(part)
    return b"".join(reversed(parts))


def pack_plan(text: str, zdict: bytes) -> bytes:
    """One plan's ``fields`` blob: its JSON, zlib level 9 with the preset dictionary ``zdict`` (none where empty)."""
    co = zlib.compressobj(9, zdict=zdict) if zdict else zlib.compressobj(9)
    return co.compress(text.encode()) + co.flush()


def unpack_plan(blob: bytes, zdict: bytes) -> dict[str, Any]:
    """A plan's fields from its blob (:func:`pack_plan`)."""
    do = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    out: dict[str, Any] = json.loads(do.decompress(blob) + do.flush())
    return out


def plan_dict_of(db: sqlite3.Connection) -> bytes:
    """The catalog's preset dictionary (b'' where it has none)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (PLAN_DICT,)).fetchone()
    return base64.b64decode(row[0]) if row else b""


def read_plans(db: sqlite3.Connection) -> dict[int, dict[str, Any]]:
    """Every plan of an open catalog by id."""
    zdict = plan_dict_of(db)
    return {int(pid): unpack_plan(blob, zdict) for pid, blob in db.execute("SELECT id, fields FROM plans")}


def fixed_dims(call: Call, vary: str) -> tuple[int, int]:
    """(d1, d2): the dimensions a run of ``vary`` keeps fixed, in M, N, K order (0 where there is one)."""
    fixed = [getattr(call, d) for d in "MNK" if d not in vary]
    padded = [*fixed, 0, 0]
    return padded[0], padded[1]


def call_at(family: list[Any], vary: str, d1: int, d2: int, t: int) -> Call:
    """The call of a catalog run's family key (:meth:`Call.family_key`, as :func:`family_text` stores it) at value
    ``t`` of its varying dimensions (:data:`VARIES`), (d1, d2) the others in M, N, K order (:func:`fixed_dims`).
    The key keeps whether alpha is 1 and the kind of beta (:func:`~tcsmt.library.plans.beta_kind`: 0, 1, other),
    not their values: the call gets alpha 2 where it is not 1 and beta 0, 1 or 2 by kind (one plan of the catalog
    answers every value of a kind)."""
    if vary not in VARIES:
        raise TcsmtError(f"a catalog run varies one of {', '.join(VARIES)}, not {vary!r}")
    op, batch, a, b, out, tf32, scale, fast, bias, alpha_not_1, beta_of_kind, a_t, b_t, settings = family
    fixed = iter((d1, d2))
    M, N, K = (t if d in vary else next(fixed) for d in "MNK")
    return Call(op, M, N, K, a, b, out, batch=batch, alpha=2.0 if alpha_not_1 else 1.0,
                beta=BETA_KINDS[int(beta_of_kind)], bias=bias, tf32=tf32, scale=scale, fast_accum=fast, a_t=a_t,
                b_t=b_t, settings=settings)


def family_text(call: Call) -> str:
    """The ``runs.family`` text of a call: its key without the shape (:meth:`Call.family_key`)."""
    return json.dumps(call.family_key(), separators=(",", ":"))


@dataclass(frozen=True)
class Hit:
    """What a catalog says of one call: its plan, or why it has none; with the run that covers it."""

    plan: Plan | None
    why: str
    run: tuple[str, int, int, int, int, int]
    """(vary, d1, d2, lo, hi, step): the recorded run of calls the answer comes from."""
    catalog: str

    def evidence(self) -> str:
        vary, d1, d2, lo, hi, step = self.run
        names = [d for d in "MNK" if d not in vary]
        fixed = ", ".join(f"{n} = {v}" for n, v in zip(names, (d1, d2)))
        var = " = ".join(vary)
        which = f"{var} = {lo}" if lo == hi else (f"{var} = {lo}..{hi}" + (f" step {step}" if step > 1 else ""))
        return f"recorded in {self.catalog}: the run {which} ({fixed}) shares this plan"


KEY_FORMAT = "2"
"""The family keys' format (meta ``key_format``): "2" keys beta by kind (0, 1, other:
:func:`~tcsmt.library.plans.beta_kind`); a catalog without it keyed beta as zero or not, so that its plans recorded
at beta = 2 also stood for beta = 1 and the reverse, and it is refused (record it again)."""


class Catalog:
    """One catalog file, opened read-only."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as exc:
            raise TcsmtError(f"cannot read plan catalog {self.path}: {exc}") from None
        for key in ("gpu", "arch", "library", "stamp"):
            if key not in meta:
                raise TcsmtError(f"plan catalog {self.path.name}: missing meta {key!r}")
        if meta.get("key_format") != KEY_FORMAT:
            raise TcsmtError(f"plan catalog {self.path.name}: call keys of format {meta.get('key_format', '1')}, "
                             f"not {KEY_FORMAT} (beta = 1 and other beta were one key): build or record it again")
        self.gpu: str = meta["gpu"]
        self.arch: str = meta["arch"]
        self.device: str = meta.get("device", "")
        self.library: str = meta["library"]
        self.stamp: dict[str, Any] = json.loads(meta["stamp"])
        self.sources: list[str] = json.loads(meta.get("sources", "[]"))
        self._zdict = plan_dict_of(self.db)
        self._plans: dict[int, dict[str, Any]] = {}

    @property
    def name(self) -> str:
        return self.path.name

    def counts(self) -> dict[str, int]:
        """Runs, distinct plans, and calls covered (each run's values counted)."""
        runs, calls = self.db.execute("SELECT COUNT(*), SUM((hi - lo) / step + 1) FROM runs").fetchone()
        plans = self.db.execute("SELECT COUNT(*) FROM plans").fetchone()[0]
        return {"runs": int(runs), "plans": int(plans), "calls": int(calls or 0)}

    def fields_of(self, pid: int) -> dict[str, Any]:
        """Plan ``pid``'s fields (a plan table entry, or {"why": ...})."""
        if pid not in self._plans:
            row = self.db.execute("SELECT fields FROM plans WHERE id = ?", (pid,)).fetchone()
            if row is None:
                raise TcsmtError(f"plan catalog {self.name}: run names plan {pid}, which it does not hold")
            self._plans[pid] = unpack_plan(row[0], self._zdict)
        return self._plans[pid]

    def find(self, call: Call) -> list[Hit]:
        """Every recorded run covering ``call`` (usually one)."""
        row = self.db.execute("SELECT id FROM families WHERE key = ?", (family_text(call),)).fetchone()
        if row is None:
            return []
        fam = row[0]
        rows = []
        for vary in VARIES:
            t = getattr(call, vary[0])
            if any(getattr(call, d) != t for d in vary):
                continue
            d1, d2 = fixed_dims(call, vary)
            rows += self.db.execute(
                "SELECT vary, d1, d2, lo, hi, step, plan FROM runs WHERE family = ? AND vary = ? AND d1 = ? AND "
                "d2 = ? AND lo <= ? AND hi >= ? AND (? - lo) % step = 0", (fam, vary, d1, d2, t, t, t)).fetchall()
        hits = []
        for vary, d1, d2, lo, hi, step, pid in rows:
            f = self.fields_of(pid)
            run = (vary, d1, d2, lo, hi, step)
            if "why" in f:
                hits.append(Hit(None, str(f["why"]).replace("{t}", str(getattr(call, vary[0]))), run,
                                self.name))
            else:
                plan = _plan(self.path, pid, json.dumps(f), self.gpu, self.library)
                hits.append(Hit(dataclasses.replace(plan, call=call), "", run, self.name))
        return hits

    def runs_of(self, call: Call, vary: str) -> list[tuple[int, int, int, int]]:
        """(lo, hi, step, plan id) of every run of ``call``'s family varying ``vary`` at its fixed dimensions, by
        lo."""
        row = self.db.execute("SELECT id FROM families WHERE key = ?", (family_text(call),)).fetchone()
        if row is None:
            return []
        d1, d2 = fixed_dims(call, vary)
        return [(int(a), int(b), int(c), int(d)) for a, b, c, d in self.db.execute(
            "SELECT lo, hi, step, plan FROM runs WHERE family = ? AND vary = ? AND d1 = ? AND d2 = ? ORDER BY lo",
            (row[0], vary, d1, d2))]

    def plan_of(self, pid: int) -> Plan | None:
        """The plan of plan row ``pid`` (its call a placeholder), or None for a refusal row."""
        f = self.fields_of(pid)
        return None if "why" in f else _plan(self.path, pid, json.dumps(f), self.gpu, self.library)

    def find_over(self, call: Call, lo: int, hi: int) -> dict[int, list[Hit]]:
        """:meth:`find` for ``call`` at every M in lo..hi (N, K and the family fixed), by M: one query for the
        whole range (the runs of token counts varying M, and the runs varying K at an M in the range)."""
        row = self.db.execute("SELECT id FROM families WHERE key = ?", (family_text(call),)).fetchone()
        if row is None:
            return {}
        rows = self.db.execute(
            "SELECT vary, d1, d2, lo, hi, step, plan FROM runs WHERE family = ? AND ((vary = 'M' AND d1 = ? AND "
            "d2 = ? AND lo <= ? AND hi >= ?) OR (vary = 'K' AND d1 >= ? AND d1 <= ? AND d2 = ? AND lo <= ? AND "
            "hi >= ? AND (? - lo) % step = 0))",
            (row[0], call.N, call.K, hi, lo, lo, hi, call.N, call.K, call.K, call.K)).fetchall()
        out: dict[int, list[Hit]] = {}
        for vary, d1, d2, rlo, rhi, step, pid in rows:
            run = (vary, d1, d2, rlo, rhi, step)
            if vary == "M":
                first = rlo if rlo >= lo else rlo + -(-(lo - rlo) // step) * step
                ms = range(first, min(rhi, hi) + 1, step)
            else:
                ms = range(d1, d1 + 1)
            f = self.fields_of(pid)
            base = None if "why" in f else _plan(self.path, pid, json.dumps(f), self.gpu, self.library)
            for m in ms:
                if base is None:
                    why = str(f["why"]).replace("{t}", str(m if vary == "M" else call.K))
                    out.setdefault(m, []).append(Hit(None, why, run, self.name))
                else:
                    out.setdefault(m, []).append(
                        Hit(dataclasses.replace(base, call=dataclasses.replace(call, M=m)), "", run, self.name))
        return out


@cache
def _plan(path: Path, pid: int, fields: str, gpu: str, library: str) -> Plan:
    """The Plan of one plan row, made once (its call is replaced by the caller's)."""
    raw = json.loads(fields)
    where = f"plan catalog {path.name}, plan {pid}"
    return plan_from_fields(raw, call_from_entry(raw, [1, 1, 1, 1], where), gpu, library, path.name, where)


@cache
def _open(path: str, version: tuple[int, int, int]) -> Catalog:
    return Catalog(Path(path))


def open_catalog(path: str) -> Catalog:
    """The catalog at ``path``, opened once per version of the file (its inode, size and modification time: a
    catalog built again, as the on-the-spot recorder does, is opened anew)."""
    try:
        st = Path(path).stat()
    except OSError as exc:
        raise TcsmtError(f"cannot read plan catalog {path}: {exc}") from None
    return _open(str(path), (st.st_ino, st.st_size, st.st_mtime_ns))


def catalogs_in(directory: Path) -> list[Catalog]:
    """The catalogs (``*.sqlite``) of one folder, in name order."""
    d = Path(directory)
    return [open_catalog(str(p)) for p in sorted(d.glob("*.sqlite"))] if d.is_dir() else []
