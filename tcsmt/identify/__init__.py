"""Infer a matrix unit's model from solver-chosen experiments (``tcsmt identify``).

The loop (:func:`identify`):

1. The hypotheses are the points of :class:`tcsmt.identify.space.HypothesisSpace`
   (named models and the rings of the factor product around them).
2. Each round takes the best-ranked surviving hypothesis ``h1`` and one or more
   other survivors ``h2`` (the next-ranked one and random ones) and asks the
   solver for an input of one instruction on which ``h1`` and ``h2`` differ
   (restricted stages first: one product, all products equal, two products; then all K:
   :mod:`tcsmt.identify.separate`), optionally made readable (:func:`tcsmt.solve.discriminate.minimize_model`).  A pair
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

Modules: this one (the entry points), :mod:`tcsmt.identify.loop` (settings, search state, the
rounds), :mod:`tcsmt.identify.separate` (solver queries), :mod:`tcsmt.identify.search` (random
search), :mod:`tcsmt.identify.space` (hypotheses), :mod:`tcsmt.solve.inert` (parameters no output depends
on), :mod:`tcsmt.identify.result` (experiments, results, the log), :mod:`tcsmt.identify.report`
(tables, TOML, JSON).

Every experiment (input, device output, survivors) is written to
``generated/identify-<target>-<path>/experiments.json`` as it happens;
:func:`replay` re-applies such a log to the same space without a device.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.identify.loop import Search, SearchState, Settings, TimeUp, arrays, classes_of, evaluate, outputs
from tcsmt.identify.report import FEATURES, feature_cells, feature_table, feature_value, pinned, result_json, summary_lines, toml_entry
from tcsmt.identify.result import SCHEMA, Experiment, LoggedRun, Result, Status, Target, load_log
from tcsmt.identify.separate import Separator, split_score
from tcsmt.identify.space import HypothesisSpace, PathInfo

__all__ = [
    "FEATURES", "SCHEMA", "Experiment", "LoggedRun", "Result", "SearchState", "Separator", "Settings", "Status", "Target",
    "evaluate", "feature_cells", "feature_table", "feature_value", "identify", "load_log", "pinned", "replay",
    "result_json", "split_score", "summary_lines", "toml_entry",
]


def identify(target: Target, radius: int | None = 2, max_experiments: int = 30, solver: str = "auto",
             timeout: float = 60.0, quick_timeout: float = 10.0, time_limit: float = 1800.0, candidates: int = 2,
             readable: bool = False, seed: int = 0, log_dir: str | None = None, validate_rows: int = 512,
             progress: Callable[[str], None] | None = None,
             query_progress: Callable[[str], None] | None = None) -> Result:
    """Identify ``target``'s model on its path (see module docstring; the options are :class:`Settings`).

    ``progress`` gets one line per experiment; ``query_progress`` one per finished solver query.

    When one class remains, ``validate_rows`` random inputs (one device call)
    check it: survivors that disagree are dropped, and if none is left the
    first disagreeing input is kept as the counterexample (status "none").

    ``quick_timeout`` bounds each solver query while many hypotheses survive;
    a pair it cannot separate is tried with a random search of the simulator
    and, if that fails too, again at the end with the full ``timeout``.
    """
    settings = Settings(radius, max_experiments, solver, timeout, quick_timeout, time_limit, candidates, readable,
                        seed, validate_rows)
    return Search(target, settings, log_dir, progress or (lambda s: None), query_progress).run()


def replay(directory: str, solver: str = "auto", timeout: float = 60.0,
           progress: Callable[[str], None] | None = None, time_limit: float | None = None) -> Result:
    """Re-apply a logged run's experiments to its hypothesis space (no device), then group the survivors.

    The space is the logged one: its factors, radius and named models (those the models still have).
    Survivors are compared with the best one by the solver, best-ranked first, until one is told apart
    from it (the status is then "budget", as in a run the budget ended: the others stay unseparated).
    ``time_limit`` (seconds) bounds the whole replay; when it passes first, the result says so
    (``stopped == "time limit"``, status "budget").
    """
    say = progress or (lambda s: None)
    t0 = time.time()
    deadline = None if time_limit is None else t0 + time_limit
    run = load_log(directory)
    path = run.path
    space = HypothesisSpace.for_path(path, run.radius)
    space.factors = {k: list(v) for k, v in run.factors.items()}
    if run.named_points:
        logged = set(run.named_points)
        space.points = [(n, p) for n, p in space.points if n in logged] or space.points
    exps = run.experiments
    try:
        listed = space.hypotheses(deadline)
    except TcsmtError as exc:  # the logged space is too large (a radius the log should not hold)
        raise TcsmtError(f"{run.file}: {exc}") from None
    alive = listed or []
    checked = len(alive)
    stopped = "time limit" if listed is None else ""
    status: Status = "budget"
    classes: list = []
    undecided: list[tuple[str, str]] = []
    if listed is not None:
        say(f"replaying {len(exps)} experiments of {run.target} {path.label} on {checked} hypotheses")
    try:
        if listed is not None and exps:
            A, B, C = arrays(path, [(e.a, e.b, e.c) for e in exps])
            D = np.array([e.d for e in exps], dtype=np.uint64)
            agree = np.stack([o == D for o in outputs(alive, A, B, C, deadline)])  # (hypotheses, experiments)
            # survivor counts per experiment, recomputed in log order: those that agree with it and every earlier one
            n = len(alive)
            for j, e in enumerate(exps):
                e.before, e.after = n, int(agree[:, :j + 1].all(axis=1).sum())
                n = e.after
            alive = [h for h, row in zip(alive, agree) if row.all()]
        alive.sort(key=lambda h: h.rank)
        if listed is not None:
            status, classes, undecided, stopped = _group(alive, path, solver, timeout, deadline, say)
    except TimeUp:
        stopped = "time limit"
    if stopped and not classes:
        classes = [[h] for h in alive]
    if not alive and not stopped:
        status = "none"
    return Result(status, path, run.target, space, exps, alive, classes, undecided, checked,
                  time.time() - t0, dict(run.device), str(directory), stopped=stopped)


def _group(alive: list, path: PathInfo, solver: str, timeout: float, deadline: float | None,
           say: Callable[[str], None]) -> tuple[Status, list, list[tuple[str, str]], str]:
    """(status, classes, undecided, stopped) of the replay's survivors: each compared with the best one by the
    solver until one is told apart (status "budget") or ``deadline`` passes (stopped "time limit")."""
    if not alive:
        return "none", [], [], ""
    sep = Separator(path, solver, timeout, readable=False)
    rep = alive[0]
    equiv: set[tuple] = set()
    open_: list = []
    und: dict[tuple, str] = {}
    for h in alive[1:]:
        if deadline is not None and time.time() >= deadline:
            return "budget", classes_of(alive, rep.key, equiv), [(rep.name, n) for n in und.values()], "time limit"
        st, _, _, _ = sep.separate(rep, h, None, deadline)
        if st == "unsat":
            equiv.add(h.key)
        elif st == "timeout":
            if deadline is not None and time.time() >= deadline:
                return "budget", classes_of(alive, rep.key, equiv), [(rep.name, n) for n in und.values()], "time limit"
            und[h.key] = h.name
        else:
            open_.append(h)
            say(f"{h.name} differs from {rep.name} on some input: {len(alive)} hypotheses survive the logged "
                "experiments, not all equivalent (the others are not compared)")
            break
    classes = classes_of(alive, rep.key, equiv)
    undecided = [(rep.name, n) for n in und.values()]
    status: Status = "identified" if not open_ and not und else ("undecided" if not open_ else "budget")
    return status, classes, undecided, ""
