"""What ``tcsmt identify`` produces and records: experiments, results, typed statuses, the JSON log.

:class:`Experiment` is one input run on the device; :class:`Result` the outcome of a run;
:class:`Log` writes ``experiments.json`` / ``result.json`` as the run goes; :func:`load_log` reads a
log back for ``--replay``.  The statuses are typed (:data:`Status`, :data:`Source`).
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from tcsmt.arith.formats import Format, get_format
from tcsmt.arith.values import format_value
from tcsmt.errors import TcsmtError
from tcsmt.identify.space import Hypothesis, HypothesisSpace, PathInfo
from tcsmt.io import files

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


def load_log(directory: str) -> dict[str, Any]:
    p = Path(directory)
    f = p / "experiments.json" if p.is_dir() else p
    try:
        doc = json.loads(f.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TcsmtError(f"cannot read identify log {f}: {exc}") from None
    if doc.get("schema") != SCHEMA:
        raise TcsmtError(f"{f} is not a tcsmt identify log (schema {doc.get('schema')!r}, expected {SCHEMA})")
    return doc
