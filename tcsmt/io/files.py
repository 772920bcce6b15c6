"""Every file tcsmt writes goes through here: no silent overwrite, no damage, no leftovers, no shared names.

(Just over 400 lines: the rules below are one concern and are read together.)

The rules (one place for all of them):

* **Without force nothing that exists is replaced.**  The name is *claimed* before the work
  starts, by an exclusive create (``O_CREAT | O_EXCL``): an empty file that this process owns.
  With ``free=True`` a taken name moves on to ``stem-2.ext``, ``stem-3.ext``, ... (the first
  name whose exclusive create succeeds), so concurrent runs never share or lose a file, and the
  claimed name is the one the run reports and writes.  Without ``free`` a taken name is a
  one-line :class:`TcsmtError` ("X exists; use --force ...").
* **With force only a regular file is replaced.**  A directory, symbolic link, device node
  (``/dev/null``, ``/dev/full``), FIFO, socket or anything else is refused with a one-line
  :class:`TcsmtError` and left untouched (checked before the work and again just before the
  rename; POSIX has no "rename only over a regular file", so a special file put there in the
  microseconds between that check and the rename would still be replaced).
* **Writes are atomic.**  The bytes go to a uniquely named temporary file in the target's
  directory (``.NAME.<12 random hex digits>.tmp``, made by an exclusive create), are flushed
  and fsynced, and the temporary file is renamed over the target (``os.replace``), so a reader
  sees the old file or the whole new one.  The temporary file is removed on every failure path
  (an exception, ``KeyboardInterrupt``, a signal turned into an exception).  The new file gets
  the replaced file's permission bits, or ``0o666`` less the umask.
* **Unwritten claims are removed.**  A claimed file that is still the empty file this process
  created (same device, inode, size and modification time), or a claimed directory that is
  still empty, is removed by :meth:`Output.release` / :meth:`OutputDir.release`, together with
  the parent directories made for it while they are empty, and by :func:`release_all`, which
  the CLI calls when a command ends (error, timeout, interrupt, signal) and which also runs at
  interpreter exit.  A claim that was written is kept.

Typical use (the claim happens before the solver runs)::

    out = files.output("generated/x.json", force=False, free=True)   # claims x.json or x-2.json ...
    ...                                                                # solve
    out.write_json(doc)                                                # atomic; out.path is the name
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from tcsmt.errors import TcsmtError
from tcsmt.io.interrupts import signals_held

__all__ = ["Output", "OutputDir", "output", "output_dir", "release_all", "replace_file", "safe_name", "write_text"]

_MAX_NUMBER = 100_000  # stem-2 ... stem-100000: then give up (a directory that full is a mistake)

_lock = threading.Lock()
_claims: dict[int, Output | OutputDir] = {}  # unwritten claims of this process, by id()
_temporaries: set[str] = set()                   # temporary files not yet renamed or removed


# ------------------------------------------------------------------ helpers
def _n(path: object) -> str:
    """A file name for a one-line message: control characters (a newline, NUL) escaped, long names cut."""
    text = str(path)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        text = "".join(ch if 32 <= ord(ch) != 127 else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= 200 else f"{text[:100]}...({len(text):,} characters)"


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TcsmtError(f"cannot write {_n(path)}: {exc.strerror}") from None


def _refuse_non_regular(path: Path, st: os.stat_result | None) -> None:
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise TcsmtError(f"{_n(path)} is {_kind(st.st_mode)}; tcsmt replaces only regular files "
                         "(--force included): choose another name")


def _exists_error(path: Path) -> TcsmtError:
    """"X exists": with the --force hint only where --force would then replace it (a regular file)."""
    st = _lstat_quiet(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        return TcsmtError(f"{_n(path)} exists and is {_kind(st.st_mode)}; tcsmt replaces only regular files "
                          "(--force included): choose another name")
    return TcsmtError(f"{_n(path)} exists; use --force to overwrite it, or choose another name")


def _numbered(path: Path, n: int) -> Path:
    """``path`` itself for n = 1, else ``stem-n.suffix`` beside it."""
    return path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")


def _make_parent(path: Path) -> list[Path]:
    """Create ``path``'s missing parent directories; return those this call created, deepest first."""
    parent = path.parent
    missing = []
    d = parent
    while not os.path.lexists(d) and d != d.parent:
        missing.append(d)
        d = d.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise TcsmtError(f"cannot write {_n(path)}: {_n(parent)} is not a directory") from None
    except OSError as exc:
        raise TcsmtError(f"cannot create directory {_n(parent)}: {exc.strerror}") from None
    return missing


def _remove_empty(dirs: list[Path]) -> None:
    """rmdir ``dirs`` (deepest first) while they are empty: the parents a claim created and did not use."""
    for d in dirs:
        try:
            os.rmdir(d)
        except OSError:
            return


def _numbered_dir(path: Path, n: int) -> Path:
    return path if n == 1 else path.with_name(f"{path.name}-{n}")


def _claim(path: Path, free: bool, create: Callable[[Path], tuple[int, ...]],
           numbered: Callable[[Path, int], Path] = _numbered) -> tuple[Path, tuple[int, ...], list[Path]]:
    """Create ``path`` (or, with ``free``, the first free ``numbered`` name) with ``create``, which must
    fail with FileExistsError when the name is taken.  Returns the name, its identity and the parents made."""
    made: list[Path] = []
    for _attempt in range(3):  # a concurrent run's release may remove a parent it made: make it again
        made += [d for d in _make_parent(path) if d not in made]
        for n in range(1, (_MAX_NUMBER if free else 1) + 1):
            cand = numbered(path, n)
            try:
                return cand, create(cand), made
            except FileExistsError:
                continue
            except FileNotFoundError:
                break
            except OSError as exc:
                raise TcsmtError(f"cannot create {_n(cand)}: {exc.strerror}") from None
        else:
            if free:
                raise TcsmtError(f"no free name for {_n(path)} (up to -{_MAX_NUMBER} taken)")
            raise _exists_error(path)
    raise TcsmtError(f"cannot create {_n(path)}: its directory keeps disappearing")


def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _remove_temporary(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    with _lock:
        _temporaries.discard(tmp)


def _new_temporary(path: Path) -> tuple[int, str]:
    """Create ``.NAME.<random>.tmp`` beside ``path`` by exclusive create, registered *before* it exists
    (so that an interrupt at any point leaves nothing that :func:`release_all` does not know)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        with _lock:
            _temporaries.add(tmp)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), tmp
        except FileExistsError:
            with _lock:
                _temporaries.discard(tmp)
        except OSError as exc:
            with _lock:
                _temporaries.discard(tmp)
            raise TcsmtError(f"cannot write {_n(path)}: {exc.strerror}") from None
    raise TcsmtError(f"cannot write {_n(path)}: no free temporary name beside it")


def _write_replacing(path: Path, fill: Callable[[BinaryIO], object], mode: int,
                     check: Callable[[], None]) -> tuple[int, ...]:
    """Write ``fill``'s bytes to a fresh temporary file beside ``path`` and rename it over ``path``.

    ``check`` runs just before the rename (it raises to refuse).  Returns the new file's
    identity (:func:`_identity`).  The temporary file never survives a failure.
    """
    fd, tmp = _new_temporary(path)
    renamed = False
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                fill(fh)
                fh.flush()
                with contextlib.suppress(OSError):  # some file systems cannot fsync; the rename is still atomic
                    os.fsync(fh.fileno())
                os.fchmod(fh.fileno(), mode)
                st = os.fstat(fh.fileno())
        except OSError as exc:  # a full disk, a quota, an I/O error: one line that names the file
            raise TcsmtError(f"cannot write {_n(path)}: {exc.strerror or exc}") from None
        check()
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise TcsmtError(f"cannot write {_n(path)}: {exc.strerror}") from None
        renamed = True
        return _identity(st)
    finally:
        if renamed:
            with _lock:
                _temporaries.discard(tmp)
        else:
            _remove_temporary(tmp)


# ------------------------------------------------------------------ outputs
class Output:
    """One output file: claimed (``force=False``) or checked replaceable (``force=True``) up front.

    ``path`` is the name the run reports and writes (with ``free=True`` possibly ``stem-N.ext``).
    The ``write_*`` methods replace the file atomically; they may be called again (a log
    rewritten after every step).  ``release()`` removes the claim if nothing was written.
    """

    def __init__(self, path: str | os.PathLike[str], force: bool = False, free: bool = False):
        self.path = Path(path)
        self.force = force
        self.written = False
        self._identity: tuple[int, ...] | None = None  # of the file this process made (claim or last write)
        self._mode = 0o666 & ~_umask()
        self._parents: list[Path] = []  # directories made for this output, removed again if it stays unwritten
        if force:
            st = _lstat(self.path)
            _refuse_non_regular(self.path, st)
            if st is not None:
                self._mode = stat.S_IMODE(st.st_mode)
                return
            with signals_held():
                self._parents = _make_parent(self.path)
                if self._parents:
                    with _lock:
                        _claims[id(self)] = self
            return

        def create(cand: Path) -> tuple[int, ...]:
            fd = os.open(cand, os.O_WRONLY | os.O_CREAT | os.O_EXCL, self._mode)
            try:
                return _identity(os.fstat(fd))
            finally:
                os.close(fd)

        with signals_held():
            self.path, self._identity, self._parents = _claim(self.path, free, create)
            with _lock:
                _claims[id(self)] = self

    def _check(self) -> None:
        st = _lstat(self.path)
        if self._identity is not None:
            if st is None or _identity(st) != self._identity or not stat.S_ISREG(st.st_mode):
                raise TcsmtError(f"{_n(self.path)} was replaced or removed by someone else while tcsmt ran; "
                                 "not overwritten")
            return
        _refuse_non_regular(self.path, st)

    def write_with(self, fill: Callable[[BinaryIO], object]) -> Path:
        """Write what ``fill(binary_file)`` writes, atomically; return the path."""
        ident = _write_replacing(self.path, fill, self._mode, self._check)
        if self._identity is not None:
            self._identity = ident
        self.written = True
        with _lock:
            _claims.pop(id(self), None)
        return self.path

    def write_bytes(self, data: bytes) -> Path:
        return self.write_with(lambda fh: fh.write(data))

    def write_text(self, text: str) -> Path:
        return self.write_bytes(text.encode("utf-8"))

    def write_json(self, doc: Any) -> Path:
        """``doc`` as indented JSON (one space), with a final newline."""
        return self.write_text(json.dumps(doc, indent=1) + "\n")

    def release(self) -> None:
        """If nothing was written: remove the claimed file (if it is still our empty file) and the
        directories made for it (if they are empty)."""
        with _lock:
            _claims.pop(id(self), None)
        if self.written:
            return
        if self._identity is not None:
            st = _lstat_quiet(self.path)
            if st is not None and stat.S_ISREG(st.st_mode) and _identity(st) == self._identity:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self._identity = None
        _remove_empty(self._parents)
        self._parents = []


class OutputDir:
    """A directory claimed by ``mkdir`` (never one that exists), ``dir-2``, ``dir-3``, ... with ``free``.

    ``release()`` removes it if it is still empty (``os.rmdir`` removes nothing else).
    """

    def __init__(self, path: str | os.PathLike[str], free: bool = False):
        def create(cand: Path) -> tuple[int, ...]:
            os.mkdir(cand)
            st = os.lstat(cand)
            return st.st_dev, st.st_ino

        with signals_held():
            self.path, self._identity, self._parents = _claim(Path(path), free, create, _numbered_dir)
            with _lock:
                _claims[id(self)] = self

    def release(self) -> None:
        """Remove the directory if it is still our empty one, then the empty parents made for it."""
        with _lock:
            _claims.pop(id(self), None)
        st = _lstat_quiet(self.path)
        if st is not None and stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == self._identity:
            try:
                os.rmdir(self.path)
            except OSError:  # not empty: kept, and so are its parents
                return
        _remove_empty(self._parents)
        self._parents = []


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """Device, inode, size and modification time: a file someone else put under the name (even on a
    reused inode) differs in at least one of them."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _lstat_quiet(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


# ------------------------------------------------------------------ names
NAME_CHARS = 100
"""Characters of a name token made by :func:`safe_name` (longer ones are cut and end in a short hash)."""


def safe_name(text: str, default: str = "unnamed") -> str:
    """A token for an output file name built from ``text`` (a model spec, a query's name, a GPU name):
    only letters, digits and ``_ . + = -``, no leading or trailing dot, at most :data:`NAME_CHARS`
    characters.  Never a path: ``../../x`` becomes ``x``, ``/etc/passwd`` becomes ``etc_passwd``, a NUL
    byte an underscore; a name that keeps nothing becomes ``default``."""
    import hashlib
    import re

    raw = str(text)
    token = re.sub(r"[^A-Za-z0-9_.+=-]+", "_", raw)
    token = re.sub(r"\.{2,}", ".", token).strip("._-")
    if len(token) > NAME_CHARS:
        digest = hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:8]
        token = token[:NAME_CHARS - 9].rstrip("._-") + "-" + digest
    return token or default


# ------------------------------------------------------------------ the short forms
def output(path: str | os.PathLike[str], force: bool = False, free: bool = False) -> Output:
    """Claim ``path`` (or, with ``free``, the first free ``stem-N.ext``) or check it is replaceable (``force``).

    Call it before the work, so that a refusal costs nothing and concurrent runs get
    different names; write with the returned object's ``write_*`` methods.
    """
    return Output(path, force=force, free=free and not force)


def output_dir(path: str | os.PathLike[str], free: bool = False) -> OutputDir:
    """Claim a new directory ``path`` (``path-2``, ... with ``free``) by ``mkdir``."""
    return OutputDir(path, free=free)


def write_text(path: str | os.PathLike[str], text: str, force: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` under the rules above, claim and write in one step."""
    out = Output(path, force=force)
    try:
        return out.write_text(text)
    finally:
        out.release()


def replace_file(path: str | os.PathLike[str], text: str) -> Path:
    """(Re)write ``text`` to a file of our own (a log inside a claimed directory): atomic, regular files only."""
    return write_text(path, text, force=True)


def release_all() -> None:
    """Remove every unwritten claim and stray temporary file of this process (see the module docstring)."""
    with _lock:
        claims = list(_claims.values())
        temps = list(_temporaries)
    for t in temps:  # first: a stray temporary inside a claimed directory would keep it from being removed
        _remove_temporary(t)
    for c in claims:
        c.release()


atexit.register(release_all)
