"""What ``tcsmt identify`` produces and records: experiments, results, typed statuses, the JSON log.

:class:`Experiment` is one input run on the device; :class:`Result` the outcome of a run;
:class:`Log` writes ``experiments.json`` / ``result.json`` as the run goes; :func:`load_log` reads a
log back for ``--replay``.  The statuses are typed (:data:`Status`, :data:`Source`).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.params import MAX_K
from tcsmt.arith.values import format_value
from tcsmt.errors import TcsmtError
from tcsmt.identify.space import FACTOR_NAMES, Hypothesis, HypothesisSpace, PathInfo
from tcsmt.io import files, load
from tcsmt.io.limits import EXPERIMENTS, shown

SCHEMA = "tcsmt.identify/1"

Status = Literal["identified", "undecided", "none", "budget"]
"""identified: one class (proven equal); undecided: equivalence proofs timed out; none: no survivor;
budget: the experiment budget or time limit ended the run first."""
Source = Literal["solver", "random", "validation"]
"""Where an experiment's input came from: a solver query, the simulator's random search, or the
random validation rows."""
LogStatus = Literal["identified", "undecided", "none", "budget", "running"]


class Target(Protocol):
    """What identify needs from a device: its path, a label, and one-instruction dot products."""

    path: PathInfo
    label: str

    def run(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray: ...

    def info(self) -> dict[str, Any]: ...


@dataclass
class Experiment:
    """One input run on the device, its output, and what it did to the survivors."""

    a: list[int]
    b: list[int]
    c: int
    d: int
    pair: tuple[str, str] = ("", "")
    k_free: int = 0
    solver_seconds: float = 0.0
    candidates: int = 1
    before: int = 0
    after: int = 0
    predicted: dict[str, int] = field(default_factory=dict)  # a few survivors' outputs (for the counterexample)
    source: Source = "solver"  # solver, random (simulator search after a solver timeout), validation

    def as_json(self, fin: Format, fc: Format, fout: Format) -> dict[str, Any]:
        return {
            "a": [hex_of(fin, x) for x in self.a], "b": [hex_of(fin, x) for x in self.b], "c": hex_of(fc, self.c),
            "d": hex_of(fout, self.d),
            "a_values": [value_of(fin, x) for x in self.a], "b_values": [value_of(fin, x) for x in self.b],
            "c_value": value_of(fc, self.c), "d_value": value_of(fout, self.d),
            "pair": list(self.pair), "k_free": self.k_free, "solver_seconds": round(self.solver_seconds, 3),
            "source": self.source, "candidates": self.candidates, "survivors_before": self.before, "survivors_after": self.after,
            "predicted": {k: hex_of(fout, v) for k, v in self.predicted.items()},
        }


@dataclass
class Result:
    """The outcome of an identification."""

    status: Status
    path: PathInfo
    target: str
    space: HypothesisSpace
    experiments: list[Experiment]
    survivors: list[Hypothesis]
    classes: list[list[Hypothesis]]  # survivors grouped by proven equivalence; classes[0] holds the best rank
    undecided: list[tuple[str, str]]
    hypotheses_checked: int
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)
    log_dir: str = ""
    validation: dict[str, Any] = field(default_factory=dict)
    stopped: str = ""
    """Why the run stopped before its own end: "" (it did not), or "time limit" (the --time-limit passed)."""

    @property
    def best(self) -> Hypothesis | None:
        return self.classes[0][0] if self.classes else None


# ------------------------------------------------------------------ helpers
def hex_of(fmt: Format, bits: int) -> str:
    return f"0x{int(bits):0{fmt.hex_digits}x}"


def value_of(fmt: Format, bits: int) -> str:
    return format_value(fmt.to_fraction(int(bits)))


# ------------------------------------------------------------------ the log
class Log:
    """The JSON record of a run in ``directory`` (rewritten after every experiment)."""

    def __init__(self, directory: str | None, meta: dict[str, Any]):
        self.dir = Path(directory) if directory else None
        self.meta = meta
        if self.dir is not None:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TcsmtError(f"cannot create {self.dir}: {exc}") from None

    def write(self, name: str, doc: dict[str, Any]) -> None:
        if self.dir is None:
            return
        files.replace_file(self.dir / name, json.dumps(doc, indent=1) + "\n")  # atomic, regular files only


def run_meta(target_label: str, path: PathInfo, space: HypothesisSpace, info: dict[str, Any],
          settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "target": target_label,
        "device": info,
        "path": {"in_fmt": path.in_fmt, "out_fmt": path.out_fmt, "c_fmt": path.c_fmt, "instr": path.instr,
                 "instr_k": path.instr_k, "instr_shape": path.instr_shape, "label": path.label},
        "space": space.describe(),
        "settings": settings,
    }


def experiments_doc(meta: dict[str, Any], path: PathInfo, exps: list[Experiment], status: LogStatus) -> dict[str, Any]:
    fin, fc, fout = get_format(path.in_fmt), get_format(path.c_fmt), get_format(path.out_fmt)
    return {**meta, "status": status, "experiments": [e.as_json(fin, fc, fout) for e in exps]}


@dataclass
class LoggedRun:
    """An identify log read back (:func:`load_log`): what :func:`tcsmt.identify.replay` re-applies, and the
    result the run recorded (``status``; ``survivors`` and ``hypotheses`` from ``result.json`` where the log
    has one, else None)."""

    file: str
    path: PathInfo
    radius: int | None
    factors: dict[str, list[Any]]
    named_points: list[str]
    experiments: list[Experiment]
    target: str
    device: dict[str, Any]
    status: str
    survivors: int | None = None
    hypotheses: int | None = None


FACTOR_VALUES = 64
"""Values of one factor of a logged space."""


def load_log(directory: str) -> LoggedRun:
    """The identify log in ``directory`` (its ``experiments.json``; or that file itself), every field checked
    through :mod:`tcsmt.io.load`: regular files only, patterns of the path's widths, K products per
    experiment.  A one-line TcsmtError names the file and the field."""
    if not isinstance(directory, (str, os.PathLike)) or not str(directory) or "\0" in str(directory):
        raise TcsmtError(f"cannot read identify log {load.name_of(str(directory))}: not a directory or file name")
    p = Path(directory)
    f = p / "experiments.json" if load.is_directory(p) else p
    try:
        doc = load.document(f, "identify log")
    except TcsmtError as exc:
        raise TcsmtError(f"cannot read identify log: {exc}") from None
    schema = doc.get("schema")
    if schema is None or schema.value != SCHEMA:
        raise TcsmtError(f"{doc.file} is not a tcsmt identify log (schema {shown(None if schema is None else schema.value, 40)}, "
                         f"expected {SCHEMA})")
    pm = doc["path"]
    fmts = {}
    for key in ("in_fmt", "out_fmt", "c_fmt"):
        try:
            fmts[key] = get_format(pm[key].as_str(40))
        except TcsmtError as exc:
            raise pm[key].error(str(exc)) from None
    path = PathInfo(fmts["in_fmt"].name, fmts["out_fmt"].name, fmts["c_fmt"].name, pm["instr"].as_str(200),
                    pm["instr_k"].as_int(1, MAX_K), pm["instr_shape"].as_str(200) if pm.has("instr_shape") else "")
    sp = doc["space"]
    radius = sp.get("radius")
    factors: dict[str, list[Any]] = {}
    for name, vals in sp["factors"].as_dict().items():
        if name not in FACTOR_NAMES:
            raise vals.error(f"not a factor of the space (known: {', '.join(FACTOR_NAMES)})")
        out: list[Any] = []
        for v in vals.as_list(FACTOR_VALUES, 1):
            if isinstance(v.value, bool) or isinstance(v.value, str):
                out.append(v.as_str(40) if isinstance(v.value, str) else v.value)
            else:
                out.append(v.as_int(-MAX_K, MAX_K))
        factors[name] = out
    named = sp.get("named_points")
    fin, fc, fout = fmts["in_fmt"], fmts["c_fmt"], fmts["out_fmt"]
    exps = []
    for e in doc["experiments"].as_list(EXPERIMENTS):
        a = [x.as_hex(fin.storage_bits, fin.name) for x in e["a"].as_list(path.instr_k, path.instr_k)]
        b = [x.as_hex(fin.storage_bits, fin.name) for x in e["b"].as_list(path.instr_k, path.instr_k)]
        pair = e.get("pair")
        names = pair.as_str_list(2, 2, 100_000) if pair is not None else ["", ""]
        k_free = e.get("k_free")
        exps.append(Experiment(a, b, e["c"].as_hex(fc.storage_bits, fc.name), e["d"].as_hex(fout.storage_bits, fout.name),
                               (names[0], names[1]), k_free.as_int(0, path.instr_k) if k_free is not None else 0))
    device = doc.get("device")
    status = doc.get("status")
    run = LoggedRun(str(f), path, radius.as_int(0, len(FACTOR_NAMES)) if radius is not None else None, factors,
                    named.as_str_list(10_000, 0, 1000) if named is not None else [], exps,
                    doc["target"].as_str(1000) if doc.has("target") else "",
                    {k: n.value for k, n in device.as_dict().items()} if device is not None else {},
                    status.as_str(40) if status is not None else "")
    result = f.parent / "result.json"
    if f.name == "experiments.json" and os.path.lexists(result):
        res = load.document(result, "identify result")
        if res.has("survivors"):
            run.survivors = res["survivors"].as_int(0)
        if res.has("hypotheses_checked"):
            run.hypotheses = res["hypotheses_checked"].as_int(0)
        if res.has("status"):
            run.status = res["status"].as_str(40)
    return run
