"""Infer a matrix unit's model from solver-chosen experiments (``tcsmt identify``).

The loop (:func:`identify`):

1. The hypotheses are the points of :class:`tcsmt.identify_space.HypothesisSpace`
   (named models and the rings of the factor product around them).
2. Each round takes the best-ranked surviving hypothesis ``h1`` and one or more
   other survivors ``h2`` (the next-ranked one and random ones) and asks the
   solver for an input of one instruction on which ``h1`` and ``h2`` differ
   (first with only products 0..k-1 non-zero, k = 1, 2, 4, ..., then all K),
   optionally made readable (:func:`tcsmt.discriminate.minimize_model`).  A pair
   the solver proves equal on every input of the instruction is one
   equivalence class; a pair it cannot decide in time is reported as such.
3. Every candidate input is simulated under every survivor (one vectorised
   simulator call per hypothesis), and the candidate whose outputs split the
   survivors most evenly (least expected number of survivors) is run on the
   device.
4. Every survivor whose output differs from the device's is dropped; nothing
   else ever drops a hypothesis.
5. Stop when the survivors form one equivalence class, when none survives (the
   last experiment is the counterexample: the space is too small), or when the
   experiment budget or time limit is reached.

Every experiment (input, device output, survivors) is written to
``generated/identify-<target>-<path>/experiments.json`` as it happens;
:func:`replay` re-applies such a log to the same space without a device.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pysmt.fnode import FNode
from pysmt.shortcuts import BV, And, Equals, Not

from . import files
from . import semantics as sem
from .errors import TcsmtError
from .formats import Format, get_format
from .identify_search import random_rows, random_separating
from .identify_space import FACTOR_NAMES, Hypothesis, HypothesisSpace, PathInfo, factor_values
from .params import PARAM_NAMES, ModelParams
from .simulator import simulate_params
from .smt_encode import Inputs, domain, make_inputs, output_term
from .solvers import solve
from .values import format_value

SCHEMA = "tcsmt.identify/1"


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
    source: str = "solver"  # solver, or random (simulator search after a solver timeout)

    def as_json(self, fin: Format, fc: Format, fout: Format) -> dict[str, Any]:
        return {
            "a": [_hex(fin, x) for x in self.a], "b": [_hex(fin, x) for x in self.b], "c": _hex(fc, self.c),
            "d": _hex(fout, self.d),
            "a_values": [_val(fin, x) for x in self.a], "b_values": [_val(fin, x) for x in self.b],
            "c_value": _val(fc, self.c), "d_value": _val(fout, self.d),
            "pair": list(self.pair), "k_free": self.k_free, "solver_seconds": round(self.solver_seconds, 3),
            "source": self.source, "candidates": self.candidates, "survivors_before": self.before, "survivors_after": self.after,
            "predicted": {k: _hex(fout, v) for k, v in self.predicted.items()},
        }


@dataclass
class Result:
    """The outcome of an identification."""

    status: str  # identified, undecided, none, budget
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
def _hex(fmt: Format, bits: int) -> str:
    return f"0x{int(bits):0{fmt.hex_digits}x}"


def _val(fmt: Format, bits: int) -> str:
    return format_value(fmt.to_fraction(int(bits)))


def _arrays(path: PathInfo, rows: Sequence[tuple[list[int], list[int], int]]):
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    A = np.array([r[0] for r in rows], dtype=fin.dtype).reshape(len(rows), path.instr_k)
    B = np.array([r[1] for r in rows], dtype=fin.dtype).reshape(len(rows), path.instr_k)
    C = np.array([r[2] for r in rows], dtype=fc.dtype)
    return A, B, C


def evaluate(h: Hypothesis, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Outputs of hypothesis ``h`` on rows of inputs (one vectorised simulator call)."""
    return np.asarray(simulate_params(h.params, A, B, C)).astype(np.uint64)


class Separator:
    """Solver queries on one path: an input where two hypotheses differ, or a proof that none exists."""

    def __init__(self, path: PathInfo, solver: str = "auto", timeout: float = 60.0, readable: bool = True,
                 readable_budget: float = 10.0):
        self.path = path
        self.solver = solver
        self.timeout = timeout
        self.readable = readable
        self.readable_budget = readable_budget
        self.inp: Inputs = make_inputs(path.in_fmt, path.c_fmt, path.instr_k, prefix="ident_")
        self._terms: dict[tuple, FNode] = {}
        self._dom = domain(self.inp)
        self._pads: dict[int, FNode] = {}

    def _term(self, h: Hypothesis) -> FNode:
        if h.key not in self._terms:
            self._terms[h.key] = output_term(h.params, self.inp)
        return self._terms[h.key]

    def _pad(self, k: int) -> FNode:
        """Products k..K-1 are +0 * +0."""
        if k not in self._pads:
            cons = []
            for i in range(k, self.inp.K):
                for n in (f"a{i}", f"b{i}"):
                    s = self.inp.symbol_of(n)
                    cons.append(Equals(s, BV(0, s.bv_width())))
            self._pads[k] = And(cons) if cons else And([])
        return self._pads[k]

    def separate(self, h1: Hypothesis, h2: Hypothesis, budget: float | None = None,
                 deadline: float | None = None
                 ) -> tuple[str, tuple[list[int], list[int], int] | None, int, float]:
        """("sat", input, k, seconds) | ("unsat", None, K, s) | ("timeout", None, k, s).

        Queries with only products 0..k-1 non-zero come first (k = 1, 2: short
        inputs, often found fast); each gets at most a fifth of ``budget``
        (default: the separator's timeout).  Only "unsat" with all K products
        free proves the two hypotheses equivalent on the instruction.
        """
        t0 = time.perf_counter()
        budget = self.timeout if budget is None else budget
        syms = {n: self.inp.symbol_of(n) for n in self.inp.names}
        differ = Not(Equals(self._term(h1), self._term(h2)))
        for k in self.k_list():
            left = budget - (time.perf_counter() - t0)
            if deadline is not None:
                left = min(left, deadline - time.time())
            if left <= 0.2:
                return "timeout", None, k, time.perf_counter() - t0
            full = k == self.inp.K
            query = And(self._dom, self._pad(k), differ)
            ans = solve(query, syms, self.solver, left if full else min(left, budget / 5))
            if ans.status == "unsat":
                if full:
                    return "unsat", None, k, time.perf_counter() - t0
                continue
            if ans.status != "sat":
                if full:
                    return "timeout", None, k, time.perf_counter() - t0
                continue
            model = ans.model
            if self.readable:
                from .discriminate import minimize_model

                spare = budget - (time.perf_counter() - t0)
                model = minimize_model(query, self.inp, model, min(self.readable_budget, max(1.0, spare)),
                                       self.solver)
            K = self.inp.K
            row = ([model[f"a{i}"] for i in range(K)], [model[f"b{i}"] for i in range(K)], model["c"])
            return "sat", row, k, time.perf_counter() - t0
        return "timeout", None, self.inp.K, time.perf_counter() - t0

    def k_list(self) -> list[int]:
        K = self.inp.K
        return [k for k in (1, 2) if k < K] + [K]


def split_score(outputs: np.ndarray) -> float:
    """Expected number of survivors if the device's output is one of the survivors' (sum n_i^2 / N)."""
    _, counts = np.unique(outputs, return_counts=True)
    return float((counts.astype(float) ** 2).sum() / max(1, outputs.size))


# ------------------------------------------------------------------ the loop
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


def _meta(target_label: str, path: PathInfo, space: HypothesisSpace, info: dict[str, Any],
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


def _experiments_doc(meta: dict[str, Any], path: PathInfo, exps: list[Experiment], status: str) -> dict[str, Any]:
    fin, fc, fout = get_format(path.in_fmt), get_format(path.c_fmt), get_format(path.out_fmt)
    return {**meta, "status": status, "experiments": [e.as_json(fin, fc, fout) for e in exps]}


def identify(target: Target, radius: int | None = 2, max_experiments: int = 30, solver: str = "auto",
             timeout: float = 60.0, quick_timeout: float = 10.0, time_limit: float = 1800.0, candidates: int = 2,
             readable: bool = False, seed: int = 0, log_dir: str | None = None, validate_rows: int = 512,
             progress: Callable[[str], None] | None = None,
             query_progress: Callable[[str], None] | None = None) -> Result:
    """Identify ``target``'s model on its path (see module docstring).

    ``progress`` gets one line per experiment; ``query_progress`` one per finished solver query.

    When one class remains, ``validate_rows`` random inputs (one device call)
    check it: survivors that disagree are dropped, and if none is left the
    first disagreeing input is kept as the counterexample (status "none").

    ``quick_timeout`` bounds each solver query while many hypotheses survive;
    a pair it cannot separate is tried with a random search of the simulator
    and, if that fails too, again at the end with the full ``timeout``.
    """
    if max_experiments < 1:
        raise TcsmtError("--max-experiments must be at least 1")
    if candidates < 1:
        raise TcsmtError("--candidates must be at least 1")
    t0 = time.time()
    deadline = t0 + time_limit
    say = progress or (lambda s: None)
    path = target.path
    space = HypothesisSpace.for_path(path, radius)
    alive = list(space)
    if not alive:
        raise TcsmtError(f"the hypothesis space of {path.label} is empty")
    checked = len(alive)
    info = target.info()
    settings = {"radius": radius, "max_experiments": max_experiments, "solver": solver, "timeout": timeout,
                "quick_timeout": quick_timeout, "candidates": candidates, "readable": readable, "seed": seed}
    meta = _meta(target.label, path, space, info, settings)
    log = Log(log_dir, meta)
    sep = Separator(path, solver, timeout, readable)
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    exps: list[Experiment] = []
    equiv: set[tuple] = set()         # keys proven equivalent to the current representative
    hard: set[tuple] = set()          # quick query and random search failed: retried with the full timeout
    undecided: dict[tuple, str] = {}  # not decided with the full timeout either
    rep_key: tuple | None = None
    validation: dict[str, Any] = {}
    validations = 0
    say(f"{target.label} {path.label} ({path.instr}, K = {path.instr_k}): {len(alive)} hypotheses "
        f"(rings 0..{space.max_ring()} around {len(space.points)} named models; full product {space.product_size()})")
    status = "budget"
    while True:
        alive.sort(key=lambda h: h.rank)
        rep = alive[0]
        if rep.key != rep_key:
            rep_key, equiv, hard, undecided = rep.key, set(), set(), {}
        open_ = [h for h in alive[1:] if h.key not in equiv and h.key not in undecided]
        easy = [h for h in open_ if h.key not in hard]
        if not open_:
            if validate_rows > 0 and validations < 3 and not validation.get("clean"):
                validations += 1
                alive, validation = _validate(target, alive, validate_rows, nprng, exps)
                log.write("experiments.json", _experiments_doc(meta, path, exps, "running"))
                if not validation["mismatches"]:
                    validation["clean"] = True
                    say(f"validation: {validate_rows} random inputs agree with every survivor")
                else:
                    say(f"validation: {validation['mismatches']} of {validate_rows} random inputs disagree with "
                        f"{rep.name}; {len(alive)} hypotheses left")
                    if not alive:
                        status = "none"
                        break
                    continue
            status = "undecided" if undecided else "identified"
            break
        if len(exps) >= max_experiments or time.time() >= deadline:
            status = "budget"
            break
        if easy:
            picks, budget = [easy[0], *rng.sample(easy[1:], min(candidates - 1, len(easy) - 1))], quick_timeout
        else:
            picks, budget = [open_[0]], timeout
        rows, pairs, ks, srcs, secs = [], [], [], [], 0.0
        for h2 in picks:
            st, row, k, s = sep.separate(rep, h2, min(budget, timeout), deadline)
            secs += s
            if query_progress is not None:
                query_progress(f"query {rep.name} vs {h2.name}: {st} ({s:.1f} s; {len(alive)} hypotheses alive, "
                               f"{len(exps)} experiments)")
            if st == "unsat":
                equiv.add(h2.key)
                say(f"  {h2.name} is equivalent to {rep.name} on every input of one instruction (solver proof)")
                continue
            if st == "sat":
                assert row is not None  # separate returns its input with every "sat"
                rows.append(row)
                srcs.append("solver")
                ks.append(k)
                pairs.append((rep.name, h2.name))
                continue
            found = random_separating(rep.params, h2.params, path.instr_k, nprng, want=1)
            if found:
                rows.append(found[0])
                srcs.append("random")
                ks.append(sum(1 for x in found[0][0] if x))
                pairs.append((rep.name, h2.name))
            elif h2.key in hard or budget >= timeout:
                undecided[h2.key] = h2.name
                say(f"  the solver could not separate {rep.name} and {h2.name} within {timeout:g} s")
            else:
                hard.add(h2.key)
        if not rows:
            continue
        A, B, C = _arrays(path, rows)
        outs = np.stack([evaluate(h, A, B, C) for h in alive])  # (n_alive, n_candidates)
        scores = [split_score(outs[:, j]) for j in range(len(rows))]
        j = int(np.argmin(scores))
        i2 = next(i for i, h in enumerate(alive) if h.name == pairs[j][1])
        if outs[0, j] == outs[i2, j]:
            raise TcsmtError(f"internal error: the input does not separate {pairs[j][0]} and {pairs[j][1]} "
                             "in the simulator; please report it")
        d = int(np.asarray(target.run(A[j:j + 1], B[j:j + 1], C[j:j + 1])).reshape(-1)[0])
        keep = outs[:, j] == d
        predicted: dict[str, int] = {}
        for i in range(min(4, len(alive))):
            predicted[alive[i].name] = int(outs[i, j])
        e = Experiment(list(map(int, A[j])), list(map(int, B[j])), int(C[j]), d, pairs[j], ks[j], secs,
                       len(rows), len(alive), int(keep.sum()), predicted, srcs[j])
        exps.append(e)
        say(f"#{len(exps):<2} {_short_input(path, e)} -> {_val(get_format(path.out_fmt), d)}   "
            f"survivors {e.before} -> {e.after}   ({srcs[j]}: {pairs[j][0]} vs {pairs[j][1]}, {secs:.1f} s)")
        alive = [h for h, k_ in zip(alive, keep) if k_]
        log.write("experiments.json", _experiments_doc(meta, path, exps, "running"))
        if not alive:
            status = "none"
            break
    classes = _classes(alive, rep_key, equiv, undecided)
    res = Result(status, path, target.label, space, exps, alive, classes,
                 [(alive[0].name, n) for n in undecided.values()] if alive else [],
                 checked, time.time() - t0, info, str(log.dir) if log.dir else "", validation)
    meta["validation"] = validation
    log.write("experiments.json", _experiments_doc(meta, path, exps, status))
    log.write("result.json", result_json(res))
    return res


def _validate(target: Target, alive: list[Hypothesis], n: int, nprng: np.random.Generator,
              exps: list[Experiment]) -> tuple[list[Hypothesis], dict[str, Any]]:
    """Run ``n`` random inputs on the device; keep the survivors that agree on all of them.

    The first input on which the best survivor disagrees is appended to
    ``exps`` (source "validation") so that a replay sees it too.
    """
    path = target.path
    A, B, C = random_rows(path.in_fmt, path.c_fmt, path.instr_k, n, nprng)
    D = np.asarray(target.run(A, B, C)).astype(np.uint64).reshape(-1)
    outs = [evaluate(h, A, B, C) for h in alive]
    bad0 = np.nonzero(outs[0] != D)[0]
    keep = [h for h, o in zip(alive, outs) if np.array_equal(o, D)]
    if bad0.size:
        i = int(bad0[0])
        predicted = {h.name: int(o[i]) for h, o in list(zip(alive, outs))[:4]}
        exps.append(Experiment(list(map(int, A[i])), list(map(int, B[i])), int(C[i]), int(D[i]),
                               ("", ""), int((A[i] != 0).sum()), 0.0, 1, len(alive), len(keep), predicted,
                               "validation"))
    return keep, {"rows": n, "mismatches": int(bad0.size)}


def _classes(alive: list[Hypothesis], rep_key, equiv: set, undecided: dict) -> list[list[Hypothesis]]:
    if not alive:
        return []
    first = [h for h in alive if h.key == rep_key or h.key in equiv]
    rest = [h for h in alive if not (h.key == rep_key or h.key in equiv)]
    return [first] + [[h] for h in rest]


def _short_input(path: PathInfo, e: Experiment) -> str:
    fin, fc = get_format(path.in_fmt), get_format(path.c_fmt)
    terms = [f"({_val(fin, a)})*({_val(fin, b)})" for a, b in zip(e.a, e.b) if (a | b) and _val(fin, a) != "0"
             and _val(fin, b) != "0"]
    zeros = sum(1 for a, b in zip(e.a, e.b) if _val(fin, a) == "0" or _val(fin, b) == "0")
    body = " + ".join(terms) if terms else "0"
    return f"c={_val(fc, e.c)}; {body}" + (f" (+{zeros} zero products)" if zeros and len(terms) < 4 else "")


# ------------------------------------------------------------------ replay
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


def replay(directory: str, solver: str = "auto", timeout: float = 60.0,
           progress: Callable[[str], None] | None = None) -> Result:
    """Re-apply a logged run's experiments to its hypothesis space (no device), then group the survivors."""
    say = progress or (lambda s: None)
    t0 = time.time()
    doc = load_log(directory)
    pm = doc["path"]
    path = PathInfo(pm["in_fmt"], pm["out_fmt"], pm["c_fmt"], pm["instr"], int(pm["instr_k"]), pm.get("instr_shape", ""))
    sp = doc["space"]
    space = HypothesisSpace.for_path(path, sp.get("radius"))
    space.factors = {k: list(v) for k, v in sp["factors"].items()}
    exps = []
    for ex in doc["experiments"]:
        exps.append(Experiment([int(x, 16) for x in ex["a"]], [int(x, 16) for x in ex["b"]], int(ex["c"], 16),
                               int(ex["d"], 16), tuple(ex.get("pair", ("", ""))), int(ex.get("k_free", 0))))
    alive = list(space)
    checked = len(alive)
    say(f"replaying {len(exps)} experiments of {doc.get('target')} {path.label} on {checked} hypotheses")
    if exps:
        A, B, C = _arrays(path, [(e.a, e.b, e.c) for e in exps])
        D = np.array([e.d for e in exps], dtype=np.uint64)
        agree = np.stack([evaluate(h, A, B, C) == D for h in alive])  # (hypotheses, experiments)
        # survivor counts per experiment, recomputed in log order: those that agree with it and every earlier one
        n = len(alive)
        for j, e in enumerate(exps):
            e.before, e.after = n, int(agree[:, :j + 1].all(axis=1).sum())
            n = e.after
        alive = [h for h, row in zip(alive, agree) if row.all()]
    alive.sort(key=lambda h: h.rank)
    status, classes, undecided = "none", [], []
    if alive:
        sep = Separator(path, solver, timeout, readable=False)
        rep, equiv, open_, und = alive[0], set(), [], {}
        for h in alive[1:]:
            st, _, _, _ = sep.separate(rep, h)
            if st == "unsat":
                equiv.add(h.key)
            elif st == "timeout":
                und[h.key] = h.name
            else:
                open_.append(h)
        classes = _classes(alive, rep.key, equiv, und)
        undecided = [(rep.name, n) for n in und.values()]
        status = "identified" if not open_ and not und else ("undecided" if not open_ else "budget")
    res = Result(status, path, str(doc.get("target", "")), space, exps, alive, classes, undecided, checked,
                 time.time() - t0, dict(doc.get("device", {})), str(directory))
    return res


# ------------------------------------------------------------------ reports
_ALIGN = {"trunc": "truncate (sign-magnitude)", "rne": "RTN-TE", "floor": "floor (two's complement)"}
_ROUND = {"rz": "RZ (truncate)", "rne": "RTN-TE", "ru": "RU", "rd": "RD"}

FEATURES = (
    ("Subnormal inputs handled?", ("subnormal_in", "subnormal_c")),
    ("Subnormal outputs handled?", ("subnormal_out",)),
    ("Extra bits", ("extra_bits",)),
    ("Rounding inside (alignment)", ("align", "extra_bits")),
    ("Rounding of block result", ("block_round", "block_frac_bits")),
    ("FMA unit width (block)", ("block_k",)),
    ("Carry bits", ("carry_bits",)),
    ("Normalisation", ("product_exponent",)),
    ("C handling", ("c_mode", "c_round")),
    ("Output rounding", ("out_round",)),
)


def feature_value(p: ModelParams, feature: str) -> str:
    """One cell of the feature table for parameters ``p`` ("n/a" where the semantics reads none of the
    feature's parameters: :func:`tcsmt.semantics.unread_parameters`)."""
    unread = sem.unread_parameters(p)
    if p.reduction == "pairwise" and feature in ("Extra bits", "Rounding inside (alignment)", "Carry bits",
                                                 "Rounding of block result", "Normalisation"):
        return "pairwise RTN-TE tree" if feature == "Rounding of block result" else "n/a (pairwise)"
    if feature == "Subnormal inputs handled?":
        if p.subnormal_in == p.subnormal_c:
            return "yes" if p.subnormal_in else "no"
        return f"A,B {'yes' if p.subnormal_in else 'no'}; C {'yes' if p.subnormal_c else 'no'}"
    if feature == "Subnormal outputs handled?":
        return "yes" if p.subnormal_out else "no"
    if feature == "Extra bits":
        if p.extra_bits == "exact":
            return "exact (all bits)"
        return f"{p.extra_bits} (F = {p.window_frac_bits})"
    if feature == "Rounding inside (alignment)":
        return "none (exact)" if "align" in unread else _ALIGN[p.align]
    if feature == "Rounding of block result":
        acc = get_format(p.acc_fmt)
        bits = "" if p.block_frac_bits == acc.frac_bits else f" to {p.block_frac_bits} fraction bits"
        return _ROUND[p.block_round] + bits
    if feature == "FMA unit width (block)":
        return f"{p.block_k or p.instr_k} of {p.instr_k}"
    if feature == "Carry bits":
        return "n/a (exact)" if "carry_bits" in unread else str(p.carry_bits)
    if feature == "Normalisation":
        if "product_exponent" in unread:
            return "n/a (exact)"
        return "products not normalised (raw exponent)" if p.product_exponent == "raw" else "products normalised"
    if feature == "C handling":
        if p.reduction == "pairwise":
            return f"added last ({_ROUND[p.c_round]})"
        return "aligned with the products" if p.c_mode == "aligned" else f"added after the block ({_ROUND[p.c_round]})"
    if feature == "Output rounding":
        return f"none ({p.out_fmt} out)" if "out_round" in unread else _ROUND[p.out_round]
    raise KeyError(feature)


def feature_cells(cls: Sequence[Hypothesis]) -> list[tuple[str, str]]:
    """Each feature's value over an equivalence class ("a or b" where equivalent members differ)."""
    out = []
    for feat, _ in FEATURES:
        vals: list[str] = []
        for h in cls:
            v = feature_value(h.params, feat)
            if v not in vals:
                vals.append(v)
        out.append((feat, " or ".join(vals)))
    return out


def feature_table(res: Result) -> list[str]:
    """The identified features as a table in the style of FTTN's Table IV (seed 001)."""
    if not res.classes:
        return []
    cells = feature_cells(res.classes[0])
    head = ["Inputs", "Device"] + [f for f, _ in cells]
    row = [f"{res.path.in_fmt} -> {res.path.out_fmt} ({res.path.instr}, K = {res.path.instr_k})", res.target] + \
        [v for _, v in cells]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(row) + " |"]
    return lines


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if v is None:
        return '"none"'
    return json.dumps(str(v))


def toml_entry(res: Result) -> str:
    """The best surviving hypothesis as a ``[[paths]]`` entry of a models/*.toml file."""
    h = res.best
    if h is None:
        raise TcsmtError("no hypothesis survived: there is no model to write")
    p = h.params
    keys = ["in_fmt", "out_fmt", "c_fmt", "acc_fmt", "instr", "instr_shape", "instr_k", "block_k", "reduction",
            "product_exponent", "c_mode", "extra_bits", "align", "carry_bits", "overflow", "block_round",
            "block_frac_bits", "c_round", "out_round", "subnormal_in", "subnormal_c", "subnormal_out"]
    defaults = {f.name: f.default for f in dataclasses.fields(ModelParams)}
    for k in PARAM_NAMES:  # parameters added to the family later: written where they differ from the default
        if k not in keys and k not in ("name", "sources", "notes") and getattr(p, k) != defaults.get(k):
            keys.append(k)
    lines = ["[[paths]]"]
    for k in keys:
        v = getattr(p, k)
        if k == "instr_shape" and not v:
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    n = len(res.experiments)
    by = {k: sum(1 for e in res.experiments if e.source == k) for k in ("solver", "random", "validation")}
    how = ", ".join(f"{v} {k}" for k, v in by.items() if v)
    src = (f"tcsmt identify on {res.target}: {n} experiment{'s' if n != 1 else ''} ({how or 'none'}), "
           f"{res.hypotheses_checked} hypotheses (rings 0..{res.space.max_ring()}), status {res.status}, "
           f"best-ranked survivor {h.name}")
    lines.append("sources = [" + json.dumps(src) + (", " + json.dumps(f"log: {res.log_dir}") if res.log_dir else "")
                 + "]")
    return "\n".join(lines) + "\n"


def result_json(res: Result) -> dict[str, Any]:
    """The result as JSON (table, classes, TOML entry)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA + "-result",
        "target": res.target,
        "path": res.path.label,
        "instr": res.path.instr,
        "instr_k": res.path.instr_k,
        "status": res.status,
        "experiments": len(res.experiments),
        "hypotheses_checked": res.hypotheses_checked,
        "survivors": len(res.survivors),
        "validation": res.validation,
        "seconds": round(res.seconds, 2),
        "device": res.info,
        "classes": [[h.name for h in cls] for cls in res.classes],
        "undecided": [list(p) for p in res.undecided],
        "features": dict(feature_cells(res.classes[0])) if res.classes else {},
        "parameters": {k: v for k, v in res.best.params.describe().items() if k in FACTOR_NAMES or k in
                       ("reduction", "acc_fmt", "instr_k", "overflow")} if res.best else {},
        "pinned": pinned(res) if res.classes else {},
        "toml": toml_entry(res) if res.best else "",
    }
    if res.status == "none" and res.experiments:
        fin, fc, fout = get_format(res.path.in_fmt), get_format(res.path.c_fmt), get_format(res.path.out_fmt)
        doc["counterexample"] = res.experiments[-1].as_json(fin, fc, fout)
    return doc


def pinned(res: Result) -> dict[str, list[Any]]:
    """Each free parameter's values among all survivors (one value: the experiments pinned it)."""
    return {n: factor_values(res.survivors, n) for n in FACTOR_NAMES}


def summary_lines(res: Result) -> list[str]:
    """Human-readable outcome lines (status, classes, counterexample)."""
    n = len(res.experiments)
    out = []
    if res.status == "none":
        out.append(f"no hypothesis survives after {n} experiments: the space is too small (rings 0..{res.space.max_ring()}, "
                   f"{res.hypotheses_checked} hypotheses); the last counterexample:")
        if res.experiments:
            e = res.experiments[-1]
            fout = get_format(res.path.out_fmt)
            out.append(f"  input {_short_input(res.path, e)}")
            out.append(f"  device {_val(fout, e.d)} ({_hex(fout, e.d)}); the last survivors predicted "
                       + ", ".join(f"{k}: {_val(fout, v)}" for k, v in e.predicted.items()))
        return out
    cls = res.classes[0]
    if res.status == "identified":
        out.append(f"identified after {n} experiments: one equivalence class of {len(cls)} hypothes"
                   f"{'is' if len(cls) == 1 else 'es'} out of {res.hypotheses_checked} (rings 0..{res.space.max_ring()})")
    elif res.status == "undecided":
        out.append(f"after {n} experiments {len(res.survivors)} hypotheses survive; the solver proved {len(cls) - 1} "
                   f"of them equivalent to the best and could not decide {len(res.undecided)} in time")
    else:
        out.append(f"budget reached after {n} experiments: {len(res.survivors)} hypotheses survive, "
                   f"not yet separated")
    out.append(f"  best: {cls[0].name}")
    if res.validation.get("clean"):
        out.append(f"  checked on {res.validation['rows']} random inputs: all agree")
    if len(cls) > 1:
        names = ", ".join(h.name for h in cls[1:6]) + (" ..." if len(cls) > 6 else "")
        out.append(f"  provably equivalent on this path (solver): {names}")
    for _, b in res.undecided[:5]:
        out.append(f"  not separated within the solver time limit: {b}")
    if res.status == "budget":
        others = [h.name for c in res.classes[1:] for h in c][:5]
        if others:
            out.append("  still possible: " + ", ".join(others) + (" ..." if len(res.classes) > 6 else ""))
    return out
