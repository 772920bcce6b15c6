"""The search of ``tcsmt identify``: settings, the state of one run, and the experiment loop.

:class:`Settings` holds what the caller chose; :class:`SearchState` what the loop carries from round
to round (survivors, experiments, the equivalence bookkeeping of the current best survivor,
validation); :class:`Search` runs the rounds (see :mod:`tcsmt.identify` for the algorithm).
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tcsmt.arith.formats import get_format
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.identify.report import result_json, short_input
from tcsmt.identify.result import Experiment, Log, Result, Source, Status, Target, experiments_doc, run_meta, value_of
from tcsmt.identify.search import random_rows, random_separating
from tcsmt.identify.separate import Row, Separator, split_score
from tcsmt.identify.space import Hypothesis, HypothesisSpace, PathInfo
from tcsmt.sim.simulator import simulate_params

Say = Callable[[str], None]


@dataclass(frozen=True)
class Settings:
    """What one identification run was asked to do (the CLI's options)."""

    radius: int | None = 2
    max_experiments: int = 30
    solver: str = "auto"
    timeout: float = 60.0
    """seconds per solver query for the last, hardest pairs (and equivalence proofs)"""
    quick_timeout: float = 10.0
    """seconds per solver query while many hypotheses survive"""
    time_limit: float = 1800.0
    candidates: int = 2
    readable: bool = False
    seed: int = 0
    validate_rows: int = 512

    def check(self) -> None:
        if self.max_experiments < 1:
            raise TcsmtError("--max-experiments must be at least 1")
        if self.candidates < 1:
            raise TcsmtError("--candidates must be at least 1")

    def logged(self) -> dict[str, Any]:
        """The settings as the log records them."""
        return {"radius": self.radius, "max_experiments": self.max_experiments, "solver": self.solver,
                "timeout": self.timeout, "quick_timeout": self.quick_timeout, "candidates": self.candidates,
                "readable": self.readable, "seed": self.seed}


@dataclass
class SearchState:
    """What the loop carries between rounds."""

    alive: list[Hypothesis]
    exps: list[Experiment] = field(default_factory=list)
    rep_key: tuple | None = None
    equiv: set[tuple] = field(default_factory=set)
    """keys proven equivalent to the current representative"""
    hard: set[tuple] = field(default_factory=set)
    """quick query and random search failed: retried with the full timeout"""
    undecided: dict[tuple, str] = field(default_factory=dict)
    """not decided with the full timeout either"""
    validation: dict[str, Any] = field(default_factory=dict)
    validations: int = 0

    def representative(self) -> Hypothesis:
        """The best-ranked survivor (a new one resets the equivalence bookkeeping)."""
        self.alive.sort(key=lambda h: h.rank)
        rep = self.alive[0]
        if rep.key != self.rep_key:
            self.rep_key, self.equiv, self.hard, self.undecided = rep.key, set(), set(), {}
        return rep

    def open_pairs(self) -> tuple[list[Hypothesis], list[Hypothesis]]:
        """(open, easy): survivors neither proven equal nor undecided; those not yet found hard."""
        open_ = [h for h in self.alive[1:] if h.key not in self.equiv and h.key not in self.undecided]
        return open_, [h for h in open_ if h.key not in self.hard]

    def classes(self) -> list[list[Hypothesis]]:
        return classes_of(self.alive, self.rep_key, self.equiv)


@dataclass
class _Candidates:
    """One round's separating inputs, with the pair each separates and where it came from."""

    rows: list[Row] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    ks: list[int] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, row: Row, pair: tuple[str, str], k: int, source: Source) -> None:
        self.rows.append(row)
        self.pairs.append(pair)
        self.ks.append(k)
        self.sources.append(source)


def arrays(path: PathInfo, rows: Sequence[Row]):
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    A = np.array([r[0] for r in rows], dtype=fin.dtype).reshape(len(rows), path.instr_k)
    B = np.array([r[1] for r in rows], dtype=fin.dtype).reshape(len(rows), path.instr_k)
    C = np.array([r[2] for r in rows], dtype=fc.dtype)
    return A, B, C


def evaluate(h: Hypothesis, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Outputs of hypothesis ``h`` on rows of inputs (one vectorised simulator call)."""
    return np.asarray(simulate_params(h.params, A, B, C)).astype(np.uint64)


def classes_of(alive: list[Hypothesis], rep_key, equiv: set) -> list[list[Hypothesis]]:
    """The survivors grouped: the representative with those proven equal to it, then each other one."""
    if not alive:
        return []
    first = [h for h in alive if h.key == rep_key or h.key in equiv]
    rest = [h for h in alive if not (h.key == rep_key or h.key in equiv)]
    return [first] + [[h] for h in rest]


class Search:
    """One identification run: the rounds of :mod:`tcsmt.identify` on ``target``."""

    def __init__(self, target: Target, settings: Settings, log_dir: str | None, say: Say,
                 query_progress: Say | None):
        settings.check()
        self.t0 = time.time()
        self.deadline = self.t0 + settings.time_limit
        self.target, self.settings, self.say, self.query_progress = target, settings, say, query_progress
        self.path = target.path
        self.space = HypothesisSpace.for_path(self.path, settings.radius)
        listed = self.space.hypotheses(self.deadline)  # None: the time limit passed while it was enumerated
        self.enumerated = listed is not None
        alive = listed or []
        if self.enumerated and not alive:
            raise TcsmtError(f"the hypothesis space of {self.path.label} is empty")
        self.checked = len(alive)
        self.info = target.info()
        self.meta = run_meta(target.label, self.path, self.space, self.info, settings.logged())
        self.log = Log(log_dir, self.meta)
        self.sep = Separator(self.path, settings.solver, settings.timeout, settings.readable)
        self.rng = random.Random(settings.seed)
        self.nprng = np.random.default_rng(settings.seed)
        self.state = SearchState(alive)

    def run(self) -> Result:
        st, path = self.state, self.path
        if self.enumerated:
            self.say(f"{self.target.label} {path.label} ({path.instr}, K = {path.instr_k}): {len(st.alive)} hypotheses "
                     f"(rings 0..{self.space.max_ring()} around {len(self.space.points)} named models; "
                     f"full product {self.space.product_size()})")
        try:
            status = self._loop() if self.enumerated else "budget"
        except TimeUp:
            status = "budget"
        stopped = "time limit" if status == "budget" and time.time() >= self.deadline else ""
        res = Result(status, path, self.target.label, self.space, st.exps, st.alive, st.classes(),
                     [(st.alive[0].name, n) for n in st.undecided.values()] if st.alive else [],
                     self.checked, time.time() - self.t0, self.info, str(self.log.dir) if self.log.dir else "",
                     st.validation, stopped)
        self.meta["validation"] = st.validation
        self.log.write("experiments.json", experiments_doc(self.meta, path, st.exps, status))
        self.log.write("result.json", result_json(res))
        return res

    def _loop(self) -> Status:
        st, s = self.state, self.settings
        while True:
            rep = st.representative()
            open_, easy = st.open_pairs()
            if not open_:
                if s.validate_rows > 0 and st.validations < 3 and not st.validation.get("clean"):
                    if self._validate_round(rep):
                        continue
                    if not st.alive:
                        return "none"
                return "undecided" if st.undecided else "identified"
            if len(st.exps) >= s.max_experiments or time.time() >= self.deadline:
                return "budget"
            if easy:
                picks = [easy[0], *self.rng.sample(easy[1:], min(s.candidates - 1, len(easy) - 1))]
                budget = s.quick_timeout
            else:
                picks, budget = [open_[0]], s.timeout
            cands = self._candidates(rep, picks, budget)
            if not cands.rows:
                continue
            self._run_best(cands)
            if not st.alive:
                return "none"

    def _validate_round(self, rep: Hypothesis) -> bool:
        """Run the validation rows; True when some survivors disagreed and the search goes on."""
        st, n = self.state, self.settings.validate_rows
        st.validations += 1
        st.alive, st.validation = validate(self.target, st.alive, n, self.nprng, st.exps, self.deadline)
        self.log.write("experiments.json", experiments_doc(self.meta, self.path, st.exps, "running"))
        if not st.validation["mismatches"]:
            st.validation["clean"] = True
            self.say(f"validation: {n} random inputs agree with every survivor")
            return False
        self.say(f"validation: {st.validation['mismatches']} of {n} random inputs disagree with {rep.name}; "
                 f"{len(st.alive)} hypotheses left")
        return bool(st.alive)

    def _candidates(self, rep: Hypothesis, picks: list[Hypothesis], budget: float) -> _Candidates:
        """Separating inputs for (rep, h2), h2 in ``picks``: solver first, then the random search."""
        st, s = self.state, self.settings
        out = _Candidates()
        for h2 in picks:
            status, row, k, secs = self.sep.separate(rep, h2, min(budget, s.timeout), self.deadline)
            out.seconds += secs
            if self.query_progress is not None:
                self.query_progress(f"query {rep.name} vs {h2.name}: {status} ({secs:.1f} s; {len(st.alive)} "
                                    f"hypotheses alive, {len(st.exps)} experiments)")
            if status == "unsat":
                st.equiv.add(h2.key)
                self.say(f"  {h2.name} is equivalent to {rep.name} on every input of one instruction (solver proof)")
                continue
            if status == "sat":
                assert row is not None  # separate returns its input with every "sat"
                out.add(row, (rep.name, h2.name), k, "solver")
                continue
            found = random_separating(rep.params, h2.params, self.path.instr_k, self.nprng, want=1)
            if found:
                out.add(found[0], (rep.name, h2.name), sum(1 for x in found[0][0] if x), "random")
            elif h2.key in st.hard or budget >= s.timeout:
                st.undecided[h2.key] = h2.name
                self.say(f"  the solver could not separate {rep.name} and {h2.name} within {s.timeout:g} s")
            else:
                st.hard.add(h2.key)
        return out

    def _run_best(self, c: _Candidates) -> None:
        """Run the candidate that splits the survivors best on the device; drop those that disagree."""
        st, path = self.state, self.path
        A, B, C = arrays(path, c.rows)
        outs = np.stack(outputs(st.alive, A, B, C, self.deadline))  # (n_alive, n_candidates)
        j = int(np.argmin([split_score(outs[:, i]) for i in range(len(c.rows))]))
        i2 = next(i for i, h in enumerate(st.alive) if h.name == c.pairs[j][1])
        if outs[0, j] == outs[i2, j]:
            raise InternalError(f"the input does not separate {c.pairs[j][0]} and {c.pairs[j][1]} "
                             "in the simulator")
        d = int(np.asarray(self.target.run(A[j:j + 1], B[j:j + 1], C[j:j + 1])).reshape(-1)[0])
        keep = outs[:, j] == d
        predicted = {st.alive[i].name: int(outs[i, j]) for i in range(min(4, len(st.alive)))}
        e = Experiment(list(map(int, A[j])), list(map(int, B[j])), int(C[j]), d, c.pairs[j], c.ks[j], c.seconds,
                       len(c.rows), len(st.alive), int(keep.sum()), predicted, c.sources[j])
        st.exps.append(e)
        self.say(f"#{len(st.exps):<2} {short_input(path, e)} -> {value_of(get_format(path.out_fmt), d)}   "
                 f"survivors {e.before} -> {e.after}   ({c.sources[j]}: {c.pairs[j][0]} vs {c.pairs[j][1]}, "
                 f"{c.seconds:.1f} s)")
        st.alive = [h for h, k_ in zip(st.alive, keep) if k_]
        self.log.write("experiments.json", experiments_doc(self.meta, path, st.exps, "running"))


class TimeUp(Exception):
    """The time limit passed in the middle of a round (the round is dropped; the run ends with "budget")."""


def outputs(alive: Sequence[Hypothesis], A: np.ndarray, B: np.ndarray, C: np.ndarray,
            deadline: float | None = None) -> list[np.ndarray]:
    """:func:`evaluate` of every hypothesis of ``alive``; :class:`TimeUp` when ``deadline`` passes first."""
    out = []
    for h in alive:
        if deadline is not None and time.time() >= deadline:
            raise TimeUp
        out.append(evaluate(h, A, B, C))
    return out


def validate(target: Target, alive: list[Hypothesis], n: int, nprng: np.random.Generator,
             exps: list[Experiment], deadline: float | None = None) -> tuple[list[Hypothesis], dict[str, Any]]:
    """Run ``n`` random inputs on the device; keep the survivors that agree on all of them.

    The first input on which the best survivor disagrees is appended to
    ``exps`` (source "validation") so that a replay sees it too.
    """
    path = target.path
    A, B, C = random_rows(path.in_fmt, path.c_fmt, path.instr_k, n, nprng)
    D = np.asarray(target.run(A, B, C)).astype(np.uint64).reshape(-1)
    outs = outputs(alive, A, B, C, deadline)
    bad0 = np.nonzero(outs[0] != D)[0]
    keep = [h for h, o in zip(alive, outs) if np.array_equal(o, D)]
    if bad0.size:
        i = int(bad0[0])
        predicted = {h.name: int(o[i]) for h, o in list(zip(alive, outs))[:4]}
        exps.append(Experiment(list(map(int, A[i])), list(map(int, B[i])), int(C[i]), int(D[i]),
                               ("", ""), int((A[i] != 0).sum()), 0.0, 1, len(alive), len(keep), predicted,
                               "validation"))
    return keep, {"rows": n, "mismatches": int(bad0.size)}
