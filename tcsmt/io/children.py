"""The solver children alive in this process, and the one function that kills them all.

The solvers (:mod:`tcsmt.solve.solvers`) register each child process they start and remove it once joined;
the signal handlers of the command line (:mod:`tcsmt.io.interrupts`) call :func:`kill_children`.  This
registry sits in the lowest layer so that the signal handling needs nothing from the solver layer.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Any

_live: dict[int, Any] = {}  # solver children not yet joined, by pid
_live_lock = threading.Lock()


def add(process: Any) -> None:
    """Register a started child process (anything with a ``pid``)."""
    with _live_lock:
        _live[process.pid] = process


def discard(process: Any) -> None:
    """Forget a child once it has been joined (or was never registered)."""
    with _live_lock:
        _live.pop(process.pid, None)


def kill_children() -> None:
    """SIGKILL every live solver child of this process (safe inside a signal handler)."""
    for pid in list(_live):
        if pid <= 0:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
