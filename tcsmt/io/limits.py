"""Limits on every size a user controls, and the memory a run may take, checked before the work starts.

Each limit is a named constant here, so that a message can name it and a test can read it:
a value over its limit is a one-line :class:`TcsmtError` (``--k = 1,000,000 is over its limit of 65,536
(products per dot product on the GPU)``), never a run that grows until the kernel's out-of-memory killer
stops it.  Where memory depends on the machine (arrays read from a file, random inputs generated in
batches), :func:`require_memory` compares an estimate with :func:`available_memory`: the smaller of what
the machine has free (``MemAvailable``), what the cgroup allows and what the address-space limit
(``ulimit -v``) leaves to this process.
"""
from __future__ import annotations

import numbers
import os
import resource
from typing import Any

from tcsmt.errors import TcsmtError

# ------------------------------------------------------------------ the limits
SIM_K = 1 << 20
"""Products per dot product in the simulator (``simulate``, ``tcsmt.simulate``, ``dot``)."""
SMT_K = 4096
"""Products per dot product in a solver query (``discriminate --k``, a query file's ``k``)."""
GPU_K = 1 << 16
"""Products per dot product run on a GPU or a virtual device (``hwcheck --k``, a file's inputs)."""
GPU_BATCH = 1 << 24
"""Dot products per GPU batch (``hwcheck --batch``)."""
RANDOM_N = 1 << 32
"""Random dot products per distribution (``hwcheck --random``)."""
STATS_N = 1 << 27
"""Random dot products of ``verify --stats --n`` (their errors are kept for the median and the plot)."""
STATS_K = 4096
"""Products per dot product of ``verify --stats --k`` (the schemes are studied at small K; a chunk of
inputs then still holds 1,024 rows)."""
LIBRARY_DIM = 1 << 20
"""M, N and K of a library call (``--library``, ``explain``, ``tcsmt.library.plan``)."""
LIBRARY_BATCH = 1 << 16
"""The batch count of a ``bmm`` call."""
SPLIT_K = 4096
"""split_k of a plan (the number of split-K slices)."""
LIBRARY_SAMPLES = 1 << 20
"""Outputs compared by ``hwcheck --library --samples``."""
COUNT = 1_000_000
"""Inputs asked of one solver query (``discriminate --count``)."""
EXPERIMENTS = 10_000
"""``identify --max-experiments``."""
CANDIDATES = 64
"""``identify --candidates``."""
HYPOTHESES = 100_000
"""Hypotheses of one identify space (each is simulated on every experiment)."""
CANDIDATE_HYPOTHESES = 1_000_000
"""Candidates an identify space's rings may hold before deduplication (each costs a validation and a
canonicalisation): ``--radius`` is refused before the enumeration when its bound is larger."""
JOBS = 256
"""Worker processes (``hwcheck --jobs``)."""
SHOW = 10_000
"""Counterexamples printed per model (``hwcheck --show``)."""
SECONDS = 10.0 ** 7
"""A time limit or timeout in seconds (about 116 days): larger ones are a typo, and a solver's
millisecond limit must fit its integer type."""
VALUES = 1 << 20
"""Entries of one file's lists (inputs of a JSON file, experiments of a log, values of a row)."""


def shown(value: Any, width: int = 60) -> str:
    """``repr(value)`` cut to about ``width`` characters (a 25,000-digit value stays a one-line message)."""
    try:
        text = repr(value)
    except Exception:  # a hostile object's __repr__
        text = f"<{type(value).__name__}>"
    if len(text) <= width:
        return text
    return f"{text[:width - 20]}...({len(text):,} characters)"


def as_size(value: Any, what: str, maximum: int, minimum: int = 1, why: str = "") -> int:
    """``value`` as an int in ``minimum..maximum``: Python and numpy integers (never a bool, a float or a
    string); a TcsmtError naming ``what`` and the limit otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TcsmtError(f"{what} must be an integer, not {shown(value)}")
    n = int(value)
    if n < minimum:
        raise TcsmtError(f"{what} must be at least {minimum}, not {n}")
    at_most(n, maximum, what, why)
    return n


INT_DIGITS = 30
"""Digits of an integer written on a command line or in a spec (``split_k=4``, ``carry_bits=2``)."""


def parse_int(text: Any, what: str, maximum: int | None = None, minimum: int | None = None, why: str = "") -> int:
    """An integer written as text (``"4"``, ``"-3"``): digits only, at most :data:`INT_DIGITS` of them, then
    ``minimum..maximum``; a one-line TcsmtError naming ``what`` otherwise (never Python's own advice)."""
    if isinstance(text, bool):
        raise TcsmtError(f"{what} is an integer, not {shown(text)}")
    if isinstance(text, numbers.Integral):
        n = int(text)
    else:
        t = str(text).strip().replace("_", "")
        digits = t[1:] if t[:1] in "+-" else t
        if not digits.isascii() or not digits.isdigit():
            raise TcsmtError(f"{what} is an integer, not {shown(text)}")
        if len(digits) > INT_DIGITS:
            raise TcsmtError(f"{what}: an integer of {len(digits):,} digits" + (
                f" is over its limit of {maximum:,}" if maximum is not None else f" (at most {INT_DIGITS} digits)"))
        n = int(t)
    if minimum is not None and n < minimum:
        raise TcsmtError(f"{what} must be at least {minimum}, not {n}")
    if maximum is not None:
        at_most(n, maximum, what, why)
    return n


def at_most(value: int, maximum: int, what: str, why: str = "") -> None:
    """A one-line TcsmtError when ``value`` is over ``maximum`` (``what = V is over its limit of M (why)``)."""
    if value > maximum:
        v = f"{value:,}" if value < 10 ** 30 else f"a {len(str(value))}-digit number"
        raise TcsmtError(f"{what} = {v} is over its limit of {maximum:,}" + (f" ({why})" if why else ""))


def as_flag(value: Any, what: str) -> bool:
    """``value`` as a bool: True, False or a numpy bool (``'no'``, ``1`` and other truthy things are refused)."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise TcsmtError(f"{what} must be True or False, not {shown(value)}")


def as_seconds(value: Any, what: str) -> float:
    """A finite time in seconds, > 0 and at most :data:`SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TcsmtError(f"{what} must be a number of seconds, not {shown(value)}")
    x = float(value)
    if not x > 0 or x != x or x == float("inf"):
        raise TcsmtError(f"{what} must be a finite number of seconds > 0, not {shown(value)}")
    if x > SECONDS:
        raise TcsmtError(f"{what} = {x:g} s is over its limit of {SECONDS:g} s")
    return x


# ------------------------------------------------------------------ memory
def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_left() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            top = fh.read().strip()
        if top == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            return int(top) - int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _address_space_left() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return soft - used


def available_memory() -> int:
    """Bytes this process can still allocate: the least of the machine's available memory, the cgroup's
    room and the address-space limit less what is mapped."""
    cands = [x for x in (_meminfo_available(), _cgroup_left(), _address_space_left()) if x is not None]
    return max(0, min(cands)) if cands else 1 << 62


def human(nbytes: int | float) -> str:
    """``3.2 GiB``: a byte count for a message."""
    x = float(nbytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if x < 1024 or unit == "PiB":
            return f"{x:.0f} {unit}" if unit == "bytes" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} PiB"


def require_memory(nbytes: int | float, what: str, hint: str = "") -> None:
    """A one-line TcsmtError when ``what`` would need more memory than :func:`available_memory` (before any
    of it is allocated)."""
    have = available_memory()
    if nbytes > have:
        raise TcsmtError(f"{what} needs about {human(nbytes)} of memory; {human(have)} is available here"
                         + (f": {hint}" if hint else ""))
