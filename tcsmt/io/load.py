"""Every file tcsmt reads goes through here: regular files only, sizes checked before reading, every
field validated, each problem one line naming the file and the field.

(Over 400 lines: opening, the size checks of each kind of file and the field schema are the one rule
"nothing a file says is trusted", read together.)

* **Regular files only.**  A file is opened without blocking (``O_NONBLOCK``: a FIFO cannot hang the
  open) and ``fstat``-ed; a FIFO, a device (``/dev/zero``, ``/dev/null``), a directory or a socket, or a
  symbolic link to one, is refused before a byte is read.
* **Sizes before reading.**  A text file (JSON, TOML) over its kind's limit is refused from its size; a
  gzip-compressed JSON file (``.json.gz``, told by its first bytes) is decompressed up to one byte past the
  same limit and refused there, so a small file that inflates without end (a gzip bomb) costs no more;
  an ``.npz`` archive's arrays are checked from their ``.npy`` headers: shape and dtype against the
  bytes the archive member holds, and their total against the memory this process can allocate
  (:func:`tcsmt.io.limits.available_memory`); nothing is allocated for a header that lies.
* **No foreign messages.**  Malformed JSON or TOML, binary bytes, an integer of thousands of digits,
  nesting too deep: all are one line of ours, ``FILE: what is wrong``.
* **Schemas.**  :class:`Node` wraps a parsed value with its place (``FILE: inputs[3].a[0]``); its
  methods take each field as the type, range or width the reader expects (a bit pattern must fit its
  format's width), so a reader states its schema as it reads.
"""
from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import json
import math
import os
import stat
import tomllib
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np

from tcsmt.errors import TcsmtError
from tcsmt.io.limits import VALUES, available_memory, human, shown

JSON_BYTES = 64 << 20
"""A JSON file (inputs, logs, records) has at most this many bytes."""
TOML_BYTES = 1 << 20
"""A query or model TOML file has at most this many bytes."""
INT_DIGITS = 40
"""A JSON integer has at most this many digits (a 64-bit pattern has 20)."""
HEX_DIGITS = 34
"""A hex bit pattern (``0x...``) has at most this many digits (leading zeros included); its value must
also fit its format's width."""
NPZ_MEMBERS = 64
"""Arrays of one ``.npz`` archive."""
PARSED_FACTOR = 16
"""Memory of a parsed JSON document per byte of its text (Python objects), for the memory check."""

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_GZIP_MAGIC = b"\x1f\x8b"
_NPY_MAGIC = b"\x93NUMPY"


# ------------------------------------------------------------------ opening
def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _a(what: str) -> str:
    """``a query file``, ``an identify log``."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def name_of(path: str | os.PathLike[str]) -> str:
    """A file name for a message: NUL bytes shown, very long names cut."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):  # NUL, newlines: shown escaped, the message stays one line
        text = "".join(ch if 32 <= ord(ch) != 127 else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= 200 else f"{text[:100]}...({len(text):,} characters)"


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], what: str = "file") -> Iterator[tuple[BinaryIO, int]]:
    """``(binary file, size)`` of the regular file ``path``; a one-line TcsmtError for anything else.

    ``what`` names the kind of file in messages (``query file``, ``identify log``).
    """
    name = name_of(path)
    raw = os.fspath(path)
    if (isinstance(raw, str) and "\0" in raw) or (isinstance(raw, bytes) and b"\0" in raw):
        raise TcsmtError(f"{name}: a file name cannot hold a NUL byte")
    if not raw:
        raise TcsmtError(f"an empty name is not {_a(what)}")
    try:
        fd = os.open(raw, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise TcsmtError(f"no such file: {name}") from None
    except OSError as exc:
        raise TcsmtError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            link = " (through a symbolic link)" if os.path.islink(raw) else ""
            raise TcsmtError(f"{name} is {_kind(st.st_mode)}{link}, not a regular file: {_a(what)} must be a "
                             "regular file")
        with contextlib.suppress(OSError):  # back to blocking reads (a regular file never blocks anyway)
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~getattr(os, "O_NONBLOCK", 0))
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh, st.st_size


def is_directory(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory (following links); False for a bad name instead of an exception."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_bytes(path: str | os.PathLike[str], what: str = "file", limit: int = JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (checked from its size before reading)."""
    with open_regular(path, what) as (fh, size):
        if size > limit:
            raise TcsmtError(f"{name_of(path)}: {size:,} bytes; {_a(what)} has at most {limit:,} bytes (its limit)")
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise TcsmtError(f"{name_of(path)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew while we read
        raise TcsmtError(f"{name_of(path)}: more than {limit:,} bytes; {_a(what)} has at most {limit:,} bytes")
    return data


def read_text(path: str | os.PathLike[str], what: str = "text file", limit: int = JSON_BYTES) -> str:
    """A UTF-8 text file (no NUL bytes) of at most ``limit`` bytes."""
    return _utf8(path, read_bytes(path, what, limit), what)


def document_name(path: str | os.PathLike[str]) -> str:
    """The name a JSON document goes by: its file name less a ``.gz`` suffix (``h100_cublas_plans.json`` for
    ``evidence/h100_cublas_plans.json.gz``: compressing a file does not rename what it records)."""
    name = Path(os.fspath(path)).name
    return name[:-3] if name.endswith(".gz") else name


def _gunzip(path: str | os.PathLike[str], data: bytes, what: str, limit: int) -> bytes:
    """The decompressed bytes of a gzip file's ``data``, at most ``limit`` of them (never more than ``limit`` + 1
    are inflated: a gzip bomb is refused after that much work)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as gz:
            out = gz.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise TcsmtError(f"{name_of(path)}: a damaged gzip file ({str(exc).splitlines()[0][:120] or 'truncated'}), "
                         f"so not {_a(what)}") from None
    if len(out) > limit:
        raise TcsmtError(f"{name_of(path)}: decompresses to more than {limit:,} bytes; {_a(what)} has at most "
                         f"{limit:,} bytes (its limit)")
    return out


def json_bytes(path: str | os.PathLike[str], what: str = "JSON file", limit: int = JSON_BYTES) -> bytes:
    """The bytes of a JSON file's text (at most ``limit``): the file's own, or decompressed where it is gzipped
    (told by its first two bytes, which no JSON text begins with)."""
    data = read_bytes(path, what, limit)
    return _gunzip(path, data, what, limit) if data[:2] == _GZIP_MAGIC else data


def _utf8(path: str | os.PathLike[str], data: bytes, what: str) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        raise TcsmtError(f"{name_of(path)}: not a UTF-8 text file (a NUL byte at offset {nul:,}: binary data), "
                         f"so not {_a(what)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TcsmtError(f"{name_of(path)}: not a UTF-8 text file (byte {exc.start:,}), so not {_a(what)}") from None


def _int_hook(name: str):
    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > INT_DIGITS:
            raise TcsmtError(f"{name}: an integer of {len(text.lstrip('-')):,} digits; integers in a JSON file "
                             f"have at most {INT_DIGITS} (write bit patterns as hex strings such as '0x3c00')")
        return int(text)
    return parse_int


def read_json(path: str | os.PathLike[str], what: str = "JSON file", limit: int = JSON_BYTES) -> Any:
    """The JSON document of a regular file (UTF-8, at most ``limit`` bytes; integers of at most
    :data:`INT_DIGITS` digits), or of a gzip-compressed one (at most ``limit`` bytes decompressed)."""
    name = name_of(path)
    size = _size_of(path)
    if size is not None and size <= limit:
        need = size * PARSED_FACTOR
        if need > available_memory():
            raise TcsmtError(f"{name}: reading {size:,} bytes of JSON needs about {human(need)} of memory; "
                             f"{human(available_memory())} is available here")
    data = json_bytes(path, what, limit)
    if len(data) != size:  # decompressed: check the memory for what it became
        need = len(data) * PARSED_FACTOR
        if need > available_memory():
            raise TcsmtError(f"{name}: reading {len(data):,} bytes of JSON needs about {human(need)} of memory; "
                             f"{human(available_memory())} is available here")
    text = _utf8(path, data, what)
    if not text.strip():
        raise TcsmtError(f"{name}: an empty file, not {_a(what)}")
    try:
        return json.loads(text, parse_int=_int_hook(name))
    except json.JSONDecodeError as exc:
        raise TcsmtError(f"{name}: not a readable JSON file ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise TcsmtError(f"{name}: JSON nested too deeply") from None
    except ValueError as exc:  # a float or other literal Python refuses
        raise TcsmtError(f"{name}: not a readable JSON file ({str(exc).splitlines()[0][:120]})") from None


def read_json_object(path: str | os.PathLike[str], what: str = "JSON file") -> dict[str, Any]:
    """:func:`read_json` of a document that must be one JSON object; a one-line TcsmtError where it is not."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise TcsmtError(f"{name_of(path)}: not {_a(what)}")
    return data


def read_toml(path: str | os.PathLike[str], what: str = "TOML file", limit: int = TOML_BYTES) -> dict[str, Any]:
    """The TOML document of a regular file (UTF-8, at most ``limit`` bytes)."""
    name = name_of(path)
    text = read_text(path, what, limit)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TcsmtError(f"{name}: not a readable {what} ({str(exc).splitlines()[0][:160]})") from None
    except RecursionError:
        raise TcsmtError(f"{name}: TOML nested too deeply") from None
    except ValueError as exc:
        if "digits" in str(exc):
            raise TcsmtError(f"{name}: holds an integer of more than 4,300 digits; no field of {_a(what)} takes "
                             "one") from None
        raise TcsmtError(f"{name}: not a readable {what} ({str(exc).splitlines()[0][:120]})") from None


def _size_of(path: str | os.PathLike[str]) -> int | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


# ------------------------------------------------------------------ .npz archives
def _npy_header(member: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of a .npy stream's header."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(member)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(member)
    raise ValueError(f".npy format version {version[0]}.{version[1]} (1.0 and 2.0 are read)")


def read_npz(path: str | os.PathLike[str], required: tuple[str, ...] = (), what: str = ".npz archive",
             memory: int | None = None) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, checked before any is read (see the module docstring).

    ``memory``: the bytes the arrays may take (default: half of what this process can allocate, leaving
    the other half to the work on them).  Object (pickled) arrays are refused.
    """
    name = name_of(path)
    with open_regular(path, what) as (fh, size):
        head = fh.read(8)
        if not head:
            raise TcsmtError(f"{name}: an empty file, not {_a(what)}")
        if head.startswith(_NPY_MAGIC):
            raise TcsmtError(f"{name}: a single .npy array, not an {what} (save a, b, c with numpy.savez)")
        if not head.startswith(_ZIP_MAGIC):
            raise TcsmtError(f"{name}: not an {what} (no zip header; save a, b, c with numpy.savez)")
        fh.seek(0)
        try:
            return _read_zip(fh, name, required, what, size, memory)
        except TcsmtError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, RuntimeError, ValueError,
                NotImplementedError, OverflowError) as exc:
            raise TcsmtError(f"{name}: a damaged or truncated {what} ({str(exc).splitlines()[0][:120] or type(exc).__name__})") from None
        except MemoryError:
            raise TcsmtError(f"{name}: its arrays do not fit in the memory available here "
                             f"({human(available_memory())})") from None


def _read_zip(fh: BinaryIO, name: str, required: tuple[str, ...], what: str, size: int,
              memory: int | None) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(fh) as z:
        infos = z.infolist()
        if len(infos) > NPZ_MEMBERS:
            raise TcsmtError(f"{name}: {len(infos):,} members; an {what} holds at most {NPZ_MEMBERS} arrays")
        plan: list[tuple[str, zipfile.ZipInfo, int]] = []
        seen: set[str] = set()
        total = 0
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise TcsmtError(f"{name}: member {shown(info.filename)} is not a .npy array")
            key = info.filename[:-4]
            if key in seen:
                raise TcsmtError(f"{name}: the array {shown(key)} is stored twice")
            seen.add(key)
            with z.open(info) as member:
                try:
                    shape, _fortran, dtype = _npy_header(member)
                except ValueError as exc:
                    raise TcsmtError(f"{name}: {shown(key)}: not a readable .npy header "
                                     f"({str(exc).splitlines()[0][:120]})") from None
                header = member.tell()
            if dtype.hasobject:
                raise TcsmtError(f"{name}: {shown(key)} holds object (pickled) arrays; store numeric arrays")
            count = math.prod(int(d) for d in shape)
            nbytes = count * dtype.itemsize
            data = info.file_size - header
            if nbytes != data:
                raise TcsmtError(f"{name}: {shown(key)}: its header claims shape {tuple(shape)} of {dtype} "
                                 f"({nbytes:,} bytes), but the archive member holds {max(data, 0):,} bytes of data")
            total += nbytes
            plan.append((key, info, nbytes))
        missing = [k for k in required if k not in seen]
        if missing:
            raise TcsmtError(f"{name}: lacks array(s) {', '.join(missing)} (needs {', '.join(required)})")
        room = available_memory() // 2 if memory is None else memory
        if total > room:
            raise TcsmtError(f"{name}: its arrays hold {human(total)}; {human(room)} of memory is available "
                             f"for them here (the limit: half of what this process can allocate)")
        out: dict[str, np.ndarray] = {}
        for key, info, _n in plan:
            with z.open(info) as member:
                out[key] = np.lib.format.read_array(member, allow_pickle=False)
        return out


# ------------------------------------------------------------------ schemas
def _type_word(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"{'true' if v else 'false'}"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


class Node:
    """A value read from a file and its place in it, for schema checks with one-line errors.

    ``node["key"]`` is a required field (missing: an error naming it), ``node.get("key")`` an optional
    one (None when absent); ``as_*`` take the value as a type, with ranges and widths.
    """

    __slots__ = ("file", "path", "value")

    def __init__(self, value: Any, file: str | os.PathLike[str], path: str = ""):
        self.value = value
        self.file = name_of(file)
        self.path = path

    # places and errors
    def where(self) -> str:
        return f"{self.file}: {self.path}" if self.path else self.file

    def error(self, message: str) -> TcsmtError:
        return TcsmtError(f"{self.where()}: {message}")

    def _child(self, key: str | int, value: Any) -> Node:
        # self.file is already a message name (name_of is idempotent): set it as it is, not again through
        # name_of, which would scan the name once per field of a document of 10^5 fields
        child = Node.__new__(Node)
        child.value, child.file = value, self.file
        if isinstance(key, int):
            child.path = f"{self.path}[{key}]"
        else:
            child.path = f"{self.path}.{key}" if self.path else str(key)
        return child

    def _expect(self, what: str) -> TcsmtError:
        return self.error(f"expected {what}, got {_type_word(self.value)}"
                          + (f" {shown(self.value, 40)}" if isinstance(self.value, (str, int, float))
                             and not isinstance(self.value, bool) else ""))

    # objects
    def as_dict(self) -> dict[str, Node]:
        if not isinstance(self.value, dict):
            raise self._expect("an object")
        return {str(k): self._child(str(k), v) for k, v in self.value.items()}

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    def __getitem__(self, key: str) -> Node:
        if not isinstance(self.value, dict):
            raise self._expect("an object")
        if key not in self.value:
            raise self.error(f"lacks the field {key!r}") if self.path else TcsmtError(f"{self.file}: lacks the field {key!r}")
        return self._child(key, self.value[key])

    def get(self, key: str) -> Node | None:
        """The field ``key``, or None where it is absent (or null)."""
        if not isinstance(self.value, dict):
            raise self._expect("an object")
        v = self.value.get(key)
        return None if v is None else self._child(key, v)

    def only(self, keys: tuple[str, ...] | set[str]) -> None:
        """Refuse fields not in ``keys`` (a typo must not be ignored)."""
        extra = [k for k in self.as_dict() if k not in keys]
        if extra:
            raise self.error(f"unknown field {shown(extra[0], 40)} (known: {', '.join(sorted(keys))})")

    # scalars
    def as_str(self, max_len: int = 10_000, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(self.value, str):
            raise self._expect("a string")
        if len(self.value) > max_len:
            raise self.error(f"a string of {len(self.value):,} characters; at most {max_len:,}")
        if "\0" in self.value:
            raise self.error("a string cannot hold a NUL character")
        if choices is not None and self.value not in choices:
            raise self.error(f"{shown(self.value, 40)} is not one of {', '.join(choices)}")
        return self.value

    def as_int(self, lo: int | None = None, hi: int | None = None) -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._expect("an integer")
        if lo is not None and v < lo:
            raise self.error(f"{v} is below {lo}")
        if hi is not None and v > hi:
            raise self.error(f"{v:,} is over its limit of {hi:,}")
        return v

    def as_number(self, lo: float | None = None, hi: float | None = None) -> float:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._expect("a number")
        x = float(v)
        if not math.isfinite(x):
            raise self.error(f"{v!r} is not a finite number")
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            raise self.error(f"{x:g} is outside {lo:g}..{hi:g}" if lo is not None and hi is not None
                             else f"{x:g} is out of range")
        return x

    def as_bool(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._expect("true or false")
        return self.value

    def as_hex(self, bits: int, fmt: str = "") -> int:
        """A bit pattern of ``bits`` bits: a hex string (``'0x3c00'``) or a non-negative JSON integer."""
        v = self.value
        what = f"a bit pattern of {fmt}" if fmt else f"a {bits}-bit pattern"
        if isinstance(v, str):
            text = v.strip()
            digits = text[2:] if text[:2].lower() == "0x" else text
            if not digits or len(digits) > HEX_DIGITS or any(ch not in "0123456789abcdefABCDEF_" for ch in digits):
                raise self.error(f"{shown(v, 40)} is not {what} (hex such as '0x3c00')")
            n = int(digits, 16)
        elif isinstance(v, int) and not isinstance(v, bool):
            n = v
        else:
            raise self._expect(f"{what} (a hex string such as '0x3c00')")
        if n < 0 or n.bit_length() > bits:
            raise self.error(f"{shown(v, 40)} is not {what} ({bits} bits)")
        return n

    # lists
    def as_list(self, max_len: int = VALUES, min_len: int = 0) -> list[Node]:
        if not isinstance(self.value, list):
            raise self._expect("a list")
        n = len(self.value)
        if n > max_len:
            raise self.error(f"a list of {n:,} entries; at most {max_len:,}")
        if n < min_len:
            raise self.error("an empty list" if n == 0 else f"a list of {n} entries; at least {min_len}")
        return [self._child(i, v) for i, v in enumerate(self.value)]

    def as_str_list(self, max_len: int = VALUES, min_len: int = 0, max_chars: int = 10_000) -> list[str]:
        return [n.as_str(max_chars) for n in self.as_list(max_len, min_len)]


def document(path: str | os.PathLike[str], what: str = "JSON file", limit: int = JSON_BYTES) -> Node:
    """The JSON document of ``path`` as a :class:`Node` (its root must be an object)."""
    node = Node(read_json(path, what, limit), path)
    if not isinstance(node.value, dict):
        raise TcsmtError(f"{node.file}: expected a JSON object, got {_type_word(node.value)}")
    return node


def toml_document(path: str | os.PathLike[str], what: str = "TOML file", limit: int = TOML_BYTES) -> Node:
    """The TOML document of ``path`` as a :class:`Node`."""
    return Node(read_toml(path, what, limit), path)


__all__ = ["HEX_DIGITS", "INT_DIGITS", "JSON_BYTES", "NPZ_MEMBERS", "TOML_BYTES", "Node", "document",
           "document_name", "is_directory", "json_bytes", "name_of", "open_regular", "read_bytes", "read_json",
           "read_npz", "read_text", "read_toml", "toml_document"]
