"""Run SMT solvers on QF_BV formulas: z3 and cvc5 through pysmt, bitwuzla through SMT-LIB 2.

Engines: ``z3``, ``cvc5``, ``bitwuzla`` (bit-blasting: complete, answers sat and unsat) and
``bitwuzla-prop`` (bitwuzla's propagation-based local search, ``BV_SOLVER=prop``: incomplete, it
answers only sat, but finds the inputs of the long fp8 circuits in well under a second where
bit-blasting needs 20 s or more: benchmarks/bench_fp8.py).  ``staged`` runs on one core: local
search for a short slice (:data:`LOCAL_SLICE`), then bit-blasting for the rest of the time.

Every solve runs in a forked child process so that a time limit is always
enforced (the child is killed when it runs out); ``portfolio`` starts every
installed solver at once and takes the first definite answer.

No child outlives its solve: live children are kept in a registry that
:func:`tcsmt.io.children.kill_children` empties (the CLI's signal handlers call it, see
:mod:`tcsmt.io.interrupts`), and on Linux each child asks the kernel to kill it
when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), even by SIGKILL.
A child ignores SIGINT (Ctrl-C reaches the whole process group; the parent
decides) and takes SIGTERM and SIGHUP with their default action.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Literal

from pysmt.fnode import FNode
from pysmt.logics import QF_BV
from pysmt.shortcuts import Solver
from pysmt.smtlib.printers import to_smtlib

from tcsmt.errors import TcsmtError
from tcsmt.io import children
from tcsmt.io.interrupts import signals_held

SOLVERS = ("auto", "z3", "cvc5", "bitwuzla", "bitwuzla-prop", "staged", "portfolio")
ENGINES = ("z3", "cvc5", "bitwuzla", "bitwuzla-prop")
"""What :func:`solve` runs in one child process (the choices above less auto, staged, portfolio)."""

LOCAL_SLICE = (0.2, 2.0)
"""``staged``: the local search gets a fifth of the time limit, at least 0.2 s and at most 2 s."""

SolverStatus = Literal["sat", "unsat", "unknown", "timeout"]
"""A solver's answer: satisfiable, unsatisfiable (a proof), no answer (unknown), or out of time."""


@dataclass
class Answer:
    """A solver's answer: status sat/unsat/unknown/timeout and, if sat, the inputs' values."""

    status: SolverStatus
    solver: str
    seconds: float
    model: dict[str, int] = field(default_factory=dict)


def available(name: str) -> bool:
    module = {"z3": "z3", "cvc5": "cvc5", "bitwuzla": "bitwuzla", "bitwuzla-prop": "bitwuzla", "staged": "bitwuzla"}.get(name)
    return module is not None and find_spec(module) is not None


def installed() -> list[str]:
    """The engines that can run here (``portfolio`` starts all of them)."""
    return [s for s in ENGINES if available(s)]


def smtlib_script(formula: FNode, symbols: dict[str, FNode]) -> str:
    """The formula as an SMT-LIB 2 script (declarations and one assertion, no check-sat)."""
    decl = "".join(f"(declare-fun {s.symbol_name()} () (_ BitVec {s.bv_width()}))\n" for s in symbols.values())
    return "(set-logic QF_BV)\n" + decl + f"(assert {to_smtlib(formula, daggify=True)})\n"


def _solve_pysmt(name: str, formula: FNode, symbols: dict[str, FNode]) -> tuple[str, dict[str, int]]:
    with Solver(name=name, logic=QF_BV) as s:
        s.add_assertion(formula)
        res = s.solve()
        if not res:
            return "unsat", {}
        return "sat", {k: int(s.get_py_value(v)) for k, v in symbols.items()}


def _solve_bitwuzla(formula: FNode, symbols: dict[str, FNode], local: bool = False) -> tuple[str, dict[str, int]]:
    """bitwuzla on the formula's SMT-LIB text; ``local``: propagation-based local search (sat or unknown)."""
    import bitwuzla

    tm = bitwuzla.TermManager()
    opts = bitwuzla.Options()
    opts.set(bitwuzla.Option.PRODUCE_MODELS, True)
    if local:
        opts.set(bitwuzla.Option.BV_SOLVER, "prop")
    parser = bitwuzla.Parser(tm, opts)
    parser.parse(smtlib_script(formula, symbols), True, False)
    bz = parser.bitwuzla()
    res = bz.check_sat()
    if res == bitwuzla.Result.UNSAT:
        return "unsat", {}
    if res != bitwuzla.Result.SAT:
        return "unknown", {}
    funs = {str(f): f for f in parser.get_declared_funs()}
    return "sat", {k: int(bz.get_value(funs[v.symbol_name()]).value(10)) for k, v in symbols.items()}


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _become_child(parent: int) -> None:
    """Signal set-up of a solver child: die with the parent; leave Ctrl-C to the parent.  The child is forked with the
    parent's signals held (:func:`tcsmt.io.interrupts.signals_held`): its handlers are set first, then the mask is
    cleared."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if s is not None:
            signal.signal(s, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _child(label: str, name: str, formula: FNode, symbols: dict[str, FNode], queue, parent: int) -> None:
    _become_child(parent)
    t0 = time.perf_counter()
    try:
        if name in ("bitwuzla", "bitwuzla-prop"):
            status, model = _solve_bitwuzla(formula, symbols, local=name == "bitwuzla-prop")
        else:
            status, model = _solve_pysmt(name, formula, symbols)
        queue.put((label, status, model, time.perf_counter() - t0, ""))
    except Exception as exc:  # reported to the parent as an error answer
        queue.put((label, "error", {}, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"))


def solve(formula: FNode, symbols: dict[str, FNode], solver: str = "auto", timeout: float = 120.0) -> Answer:
    """Decide ``formula``; return the values of ``symbols`` if satisfiable.

    Raises TcsmtError for an unknown or missing solver or a solver error;
    returns status "timeout" when no answer came within ``timeout`` seconds.
    """
    if solver not in SOLVERS:
        raise TcsmtError(f"unknown solver {solver!r} (choose from {', '.join(SOLVERS)})")
    if solver == "auto":  # bitwuzla is fastest on these queries (benchmarks/), z3 otherwise
        solver = "bitwuzla" if available("bitwuzla") else "z3"
    if solver == "staged":
        if not available("bitwuzla"):
            return solve(formula, symbols, "auto", timeout)
        t0 = time.perf_counter()
        first = solve(formula, symbols, "bitwuzla-prop", min(max(LOCAL_SLICE[0], timeout / 5), LOCAL_SLICE[1], timeout))
        if first.status in ("sat", "unsat"):
            return first
        rest = solve(formula, symbols, "bitwuzla", timeout - (time.perf_counter() - t0))
        rest.seconds = time.perf_counter() - t0
        return rest
    t0 = time.perf_counter()
    names = installed() if solver == "portfolio" else [solver]
    if not names:
        raise TcsmtError("no SMT solver is installed (pip install z3-solver)")
    for n in names:
        if not available(n):
            raise TcsmtError(f"solver {n} is not installed (pip install 'tcsmt[solvers]')")
    _, answer, errors = _run_jobs([(n, formula, n, timeout) for n in names], symbols, timeout, proofs=set(names))
    if answer:
        return answer
    if errors and len(errors) == len(names):
        raise TcsmtError("solver failed: " + "; ".join(errors))
    elapsed = time.perf_counter() - t0
    return Answer("timeout" if elapsed >= timeout - 0.01 else "unknown", solver, elapsed)


Job = tuple[str, FNode, str, float]
"""One formula of a :func:`race`: its label, the formula, the engine (one of :data:`ENGINES`) and its seconds."""


def _run_jobs(jobs: list[Job], symbols: dict[str, FNode], timeout: float, proofs: set[str]
              ) -> tuple[str | None, Answer | None, list[str]]:
    """Each job in its own child process, side by side; the first "sat", or "unsat" of a job in ``proofs``.

    A job past its own seconds is killed; the others go on.  Returns (label, answer, errors).
    """
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = {label: ctx.Process(target=_child, args=(label, engine, formula, symbols, queue, os.getpid()),
                                daemon=True) for label, formula, engine, _ in jobs}
    limits = {label: min(secs, timeout) for label, _, _, secs in jobs}
    engines = {label: engine for label, _, engine, _ in jobs}
    t0 = time.perf_counter()
    errors: list[str] = []
    pending = set(procs)
    found: tuple[str | None, Answer | None] = (None, None)
    try:
        for p in procs.values():
            with signals_held():  # an interrupt between the fork and the registration would miss this child
                p.start()
                if p.pid:  # always set after start(); never register 0 (os.kill(0) means the process group)
                    children.add(p)
        while pending:
            now = time.perf_counter() - t0
            for label in [x for x in pending if limits[x] <= now]:
                pending.discard(label)
                if procs[label].is_alive():
                    procs[label].kill()
            if not pending:
                break
            left = min(limits[x] for x in pending) - now
            try:
                label, status, model, _, err = queue.get(timeout=max(0.01, min(left, 0.5)))
            except Exception:
                if not any(procs[x].is_alive() for x in pending):
                    break
                continue
            if label not in pending:
                continue
            pending.discard(label)
            if status == "sat" or (status == "unsat" and label in proofs):
                found = (label, Answer(status, engines[label], time.perf_counter() - t0, model))
                break
            if status == "error":
                errors.append(f"{label}: {err}")
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
        for p in procs.values():
            if p.pid is not None:
                p.join(timeout=5)
                children.discard(p)
    return found[0], found[1], errors


def race(jobs: list[Job], symbols: dict[str, FNode], timeout: float, proofs: set[str]) -> tuple[str | None, Answer]:
    """Decide several restrictions of one question side by side (``tcsmt identify``'s stages on many cores).

    Each job runs in its own process for at most its own seconds (and ``timeout``).  The first job to
    answer "sat" wins; "unsat" ends the race only for a job in ``proofs`` (an unrestricted formula:
    the others' "unsat" says only that their restriction holds no answer).  Returns the winning label
    and its answer, or (None, a "timeout" answer).  Raises TcsmtError when every job failed.
    """
    for _, _, engine, _ in jobs:
        if engine not in ENGINES or not available(engine):
            raise TcsmtError(f"solver {engine} is not installed (pip install 'tcsmt[solvers]')")
    t0 = time.perf_counter()
    label, answer, errors = _run_jobs(jobs, symbols, timeout, proofs)
    if answer is not None:
        return label, answer
    if errors and len(errors) == len(jobs):
        raise TcsmtError("solver failed: " + "; ".join(errors))
    return None, Answer("timeout", "race", time.perf_counter() - t0)
