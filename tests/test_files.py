"""Files tcsmt writes (tcsmt/files.py and every command that writes): never overwrite without --force,
never replace anything but a regular file, atomic writes without leftovers, names claimed before the
work so that concurrent runs never share or lose a file, and clean ends on SIGTERM/SIGHUP/SIGINT.

The failures these tests pin down were found by hand (issue 11): ``--output /dev/full --force`` renamed
the JSON over the device node, ``--output DIR --force`` left ``DIR.tmp``, 8 concurrent ``discriminate``
runs lost results, ``hwcheck --save`` / ``verify --plot`` overwrote silently, and SIGTERM left the
solver child running.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tcsmt import files
from tcsmt.cli import main
from tcsmt.errors import TcsmtError

TCSMT = [sys.executable, "-m", "tcsmt"]


def _leftovers(directory: Path) -> list[str]:
    """Temporary files (``.NAME.XXXX.tmp`` or the old fixed ``NAME.tmp``) in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def _specials(tmp_path: Path) -> dict[str, Path]:
    """A directory, a FIFO, a symlink to a file and (as root) a character device, in ``tmp_path``."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = {"directory": tmp_path / "adir", "fifo": tmp_path / "afifo", "symlink": tmp_path / "alink"}
    out["directory"].mkdir()
    os.mkfifo(out["fifo"])
    out["symlink"].symlink_to(victim)
    try:
        os.mknod(tmp_path / "anull", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
        out["device"] = tmp_path / "anull"
    except (PermissionError, AttributeError, OSError):
        pass
    return out


def _unchanged(tmp_path: Path, specials: dict[str, Path]) -> None:
    assert specials["directory"].is_dir() and not any(specials["directory"].iterdir())
    assert stat.S_ISFIFO(os.lstat(specials["fifo"]).st_mode)
    assert specials["symlink"].is_symlink() and (tmp_path / "victim.txt").read_text() == "keep me\n"
    if "device" in specials:
        assert stat.S_ISCHR(os.lstat(specials["device"]).st_mode)


# ------------------------------------------------------------------ the library
def test_claim_then_write(tmp_path):
    out = files.output(tmp_path / "sub" / "r.json")
    assert out.path.exists() and out.path.stat().st_size == 0  # claimed before the work
    with pytest.raises(TcsmtError, match="exists; use --force"):
        files.output(tmp_path / "sub" / "r.json")
    out.write_json({"x": 1})
    out.release()  # written: kept
    assert json.loads(out.path.read_text()) == {"x": 1}
    mode = stat.S_IMODE(out.path.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    assert _leftovers(tmp_path / "sub") == []


def test_free_names_and_release(tmp_path):
    a = files.output(tmp_path / "r.json", free=True)
    b = files.output(tmp_path / "r.json", free=True)
    c = files.output(tmp_path / "r.json", free=True)
    assert [p.path.name for p in (a, b, c)] == ["r.json", "r-2.json", "r-3.json"]
    b.release()  # never written: removed, and the name is free again
    assert not b.path.exists()
    assert files.output(tmp_path / "r.json", free=True).path.name == "r-2.json"
    files.release_all()
    assert list(tmp_path.iterdir()) == []


def test_release_keeps_a_file_someone_else_put_there(tmp_path):
    out = files.output(tmp_path / "r.json")
    out.path.unlink()
    out.path.write_text("theirs\n")
    out.release()
    assert out.path.read_text() == "theirs\n"
    out2 = files.output(tmp_path / "s.json")
    out2.path.unlink()
    out2.path.write_text("theirs\n")
    with pytest.raises(TcsmtError, match="replaced or removed"):
        out2.write_text("ours\n")
    assert out2.path.read_text() == "theirs\n" and _leftovers(tmp_path) == []


def test_force_replaces_only_regular_files(tmp_path):
    specials = _specials(tmp_path)
    for name, p in specials.items():
        with pytest.raises(TcsmtError, match="replaces only regular files"):
            files.write_text(p, "x\n", force=True)
        with pytest.raises(TcsmtError, match="exists"):
            files.write_text(p, "x\n", force=False)
    _unchanged(tmp_path, specials)
    regular = tmp_path / "regular.txt"
    regular.write_text("old\n")
    regular.chmod(0o640)
    files.write_text(regular, "new\n", force=True)
    assert regular.read_text() == "new\n" and stat.S_IMODE(regular.stat().st_mode) == 0o640
    assert _leftovers(tmp_path) == []


def test_a_special_file_put_there_during_the_work_is_not_replaced(tmp_path):
    out = files.output(tmp_path / "late", force=True)
    os.mkfifo(tmp_path / "late")
    with pytest.raises(TcsmtError, match="a FIFO"):
        out.write_text("x\n")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "late").st_mode) and _leftovers(tmp_path) == []


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError, OSError])
def test_no_temporary_file_survives_a_failed_write(tmp_path, exc):
    out = files.output(tmp_path / "r.npz", free=True)

    def fill(fh):
        fh.write(b"partial")
        raise exc("stop")

    with pytest.raises(exc):
        out.write_with(fill)
    assert _leftovers(tmp_path) == []
    out.release()
    assert list(tmp_path.iterdir()) == []


def test_claimed_directories(tmp_path):
    d1 = files.output_dir(tmp_path / "log", free=True)
    d2 = files.output_dir(tmp_path / "log", free=True)
    assert (d1.path.name, d2.path.name) == ("log", "log-2")
    with pytest.raises(TcsmtError, match="exists"):
        files.output_dir(tmp_path / "log")
    files.replace_file(d1.path / "experiments.json", "{}\n")
    files.release_all()
    assert d1.path.is_dir() and not d2.path.exists()  # a directory with a log is kept, an empty one removed


# ------------------------------------------------------------------ signals
HARD = ["discriminate", "exact", "pairwise-rne", "--k", "16", "--timeout", "600"]  # no answer within 20 s


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()}
    except (OSError, ValueError):
        r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        return {int(x) for x in r.stdout.split()}


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _signal_solver(cwd: Path, sig: int) -> tuple[list[int], int, str]:
    """Start a hard discriminate, wait for its solver child, send ``sig`` to the CLI.

    Returns the children still running 2 s after the signal, the exit status and stderr.
    """
    proc = subprocess.Popen(TCSMT + HARD, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not kids and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            kids = _children(proc.pid)
        assert kids, "the solver child never started"
        proc.send_signal(sig)
        t0 = time.monotonic()
        while any(_running(k) for k in kids) and time.monotonic() - t0 < 2.0:
            time.sleep(0.05)
        alive = [k for k in kids if _running(k)]
    finally:
        for k in kids:  # stragglers (old code) would keep the pipes open
            if _running(k):
                os.kill(k, signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return alive, proc.returncode, err


_LINUX_PROC = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


@_LINUX_PROC
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_ends_solver_children(tmp_path, sig):
    """SIGTERM/SIGHUP/SIGINT to the CLI: the solver child is gone within 2 s, one line, exit 128 + signal,
    and the output name claimed for the answer is removed again."""
    alive, rc, err = _signal_solver(tmp_path, sig)
    assert not alive, f"solver child {alive} still running 2 s after {sig.name}"
    assert rc == 128 + sig
    assert err.strip().splitlines() == [f"tcsmt: interrupted ({sig.name})"], err
    generated = tmp_path / "generated"
    assert not generated.exists() or not list(generated.iterdir())


@_LINUX_PROC
def test_solver_child_dies_with_a_killed_parent(tmp_path):
    """SIGKILL cannot be handled: the child still goes (PR_SET_PDEATHSIG)."""
    alive, rc, _ = _signal_solver(tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert not alive, f"solver child {alive} outlived its killed parent"
