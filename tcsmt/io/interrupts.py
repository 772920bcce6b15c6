"""Ending the command line cleanly on SIGINT, SIGTERM and SIGHUP.

:func:`install` (called by the CLI's error trap, :mod:`tcsmt.io.trap`) makes each of the three
signals, in the main thread,

1. kill every live solver child at once (:func:`tcsmt.io.children.kill_children`; the children also
   die with their parent, through ``PR_SET_PDEATHSIG`` on Linux), and
2. raise :class:`Interrupted` (a ``KeyboardInterrupt``), so that every ``finally`` runs on the way
   out; the error trap then removes claimed-but-unwritten outputs and temporary files
   (:func:`tcsmt.io.files.release_all`) and prints one line, ``tcsmt: interrupted (SIGTERM)``.

Exit status: **128 + the signal number** (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a
shell reports a process ended by that signal, so scripts can tell an interrupt from a user error
(2).  Further signals are ignored while the cleanup runs (it is bounded: children are killed,
not waited for); SIGKILL still ends everything.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


class Interrupted(KeyboardInterrupt):
    """A signal turned into an exception; ``signum`` is the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(exc: BaseException) -> str:
    """SIGINT for a plain KeyboardInterrupt (Ctrl-C without the handlers), else the signal's name."""
    return signal.Signals(getattr(exc, "signum", signal.SIGINT)).name


def exit_status(exc: BaseException) -> int:
    """128 + the signal number (130 for a plain KeyboardInterrupt)."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def message(exc: BaseException) -> str:
    return f"tcsmt: interrupted ({signal_name(exc)})"


def _handler(signum: int, frame: object) -> None:
    from tcsmt.io.children import kill_children

    for s in SIGNALS:  # one clean-up; a second signal must not interrupt it
        signal.signal(s, signal.SIG_IGN)
    kill_children()
    raise Interrupted(signum)


def install() -> Callable[[], None]:
    """Install the handlers; return a function that puts the previous ones back.

    Does nothing (and returns a no-op) outside the main thread, where Python cannot set handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _handler)

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)

    return restore


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP (blocked, then delivered on leaving) around two steps an interrupt must not fall
    between: a file created and registered for clean-up, a solver child started and registered for
    :func:`tcsmt.io.children.kill_children`.  Does nothing outside the main thread or without ``pthread_sigmask``."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class TimeLimit(Exception):
    """The time limit of :func:`time_limit` passed while its block ran."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`TimeLimit` inside the block when ``seconds`` pass (a SIGALRM timer, main thread only;
    elsewhere the block runs unbounded).  For pure computations that have no deadline checks of their own
    (one evaluation of a long library chain): the exception lands between two Python operations."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _alarm(signum: int, frame: object) -> None:
        raise TimeLimit

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
