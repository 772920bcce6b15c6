"""cuBLASLt's own trace of each call, read through its logger callback, and the libraries torch loaded.

``cublasLtLoggerSetCallback`` at level 2 (trace) hands every cuBLASLt entry point's arguments to a callback as the
host calls the library, also under CUDA graph capture; :func:`parse_lt` reads the matmul algo of one call from
those lines: ``numSplitsK`` (S), ``reductionScheme`` and the algo's summary.  Standard library only.
"""
from __future__ import annotations

import ctypes
import re
from typing import Any

LT_LINE = re.compile(r"algo=\[([^\]]*)\]")
LT_COMP = re.compile(r"computeDesc=\[([^\]]*)\]")
LT_WS = re.compile(r"workSpaceSizeInBytes=(\d+)")
PTR = re.compile(r"(Pointer)=0[xX][0-9a-fA-F]+")


def lib_path(fragment: str) -> str | None:
    """Path of the first library mapped into this process whose path contains ``fragment``."""
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if fragment in p:
                return p
    return None


class LtTrace:
    """cuBLASLt's trace of each call (``cublasLtLoggerSetCallback``, level 2 = trace): raw lines per call."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
        self.cur: list[tuple[bytes, bytes]] | None = None

        def cb(level: int, fn: bytes | None, msg: bytes | None) -> None:
            if self.cur is not None:
                self.cur.append((fn or b"", msg or b""))
        self.cb = self.CB(cb)
        self.lib.cublasLtLoggerSetCallback.argtypes = [self.CB]
        self.lib.cublasLtLoggerSetLevel.argtypes = [ctypes.c_int]
        st1 = self.lib.cublasLtLoggerSetCallback(self.cb)
        st2 = self.lib.cublasLtLoggerSetLevel(2)
        if st1 != 0 or st2 != 0:
            raise RuntimeError(f"cublasLt logger: status {st1}, {st2}")
        self.lib.cublasLtLoggerOpenFile.argtypes = [ctypes.c_char_p]
        self.lib.cublasLtLoggerOpenFile(b"/dev/null")  # the trace also goes to a file (stdout by default)

    def start(self) -> None:
        self.cur = []

    def stop(self) -> list[tuple[bytes, bytes]]:
        got, self.cur = self.cur, None
        return got or []

    def close(self) -> None:
        """Logging off again (level 0, no callback)."""
        self.lib.cublasLtLoggerSetLevel(0)
        self.lib.cublasLtLoggerSetCallback(self.CB())


def parse_lt(lines: list[tuple[Any, Any]]) -> tuple[int | None, str | None, list[str], list[int]]:
    """(S, reduction scheme, summaries, workspace bytes) of one call's trace lines: one summary per traced matmul,
    ``"<entry point>: <algo>; <compute descriptor>"`` with device addresses removed; S = numSplitsK of the last
    matmul's algo (1 where its algo is traced without it: the trace omits defaults), None where no matmul was
    traced; the reduction scheme likewise (None where the algo names none)."""
    S: int | None = None
    red: str | None = None
    summ: list[str] = []
    ws: list[int] = []
    for fn, msg in lines:
        fn = fn.decode(errors="replace") if isinstance(fn, bytes) else str(fn)
        if not fn.endswith("Matmul"):
            continue
        msg = msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)
        m = LT_LINE.search(msg)
        if not m:
            continue
        algo = m.group(1)
        k = re.search(r"numSplitsK=(\d+)", algo)
        S = int(k.group(1)) if k else 1
        r = re.search(r"reductionScheme=(\w+)", algo)
        red = r.group(1) if r else None
        comp = LT_COMP.search(msg)
        w = LT_WS.search(msg)
        summ.append(PTR.sub(r"\1", f"{fn}: {algo}; {comp.group(1) if comp else ''}"))
        ws.append(int(w.group(1)) if w else -1)
    return S, red, summ, ws


