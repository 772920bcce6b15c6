"""Files tcsmt writes (tcsmt/io/files.py and every command that writes): never overwrite without --force,
never replace anything but a regular file, atomic writes without leftovers, names claimed before the
work so that concurrent runs never share or lose a file, and clean ends on SIGTERM/SIGHUP/SIGINT.

The failures these tests pin down were found by hand, with hostile input: ``--output /dev/full --force`` renamed
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

from tcsmt.cli import main
from tcsmt.errors import TcsmtError
from tcsmt.io import files

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


@pytest.mark.parametrize("exc,raised", [(KeyboardInterrupt, KeyboardInterrupt), (RuntimeError, RuntimeError),
                                        (OSError(28, "No space left on device"), TcsmtError)])
def test_no_temporary_file_survives_a_failed_write(tmp_path, exc, raised):
    out = files.output(tmp_path / "r.npz", free=True)

    def fill(fh):
        fh.write(b"partial")
        raise exc

    with pytest.raises(raised):
        out.write_with(fill)
    assert _leftovers(tmp_path) == []
    out.release()
    assert list(tmp_path.iterdir()) == []


def test_claimed_directories(tmp_path):
    d1 = files.output_dir(tmp_path / "log.f32", free=True)
    d2 = files.output_dir(tmp_path / "log.f32", free=True)
    assert (d1.path.name, d2.path.name) == ("log.f32", "log.f32-2")
    with pytest.raises(TcsmtError, match="exists"):
        files.output_dir(tmp_path / "log.f32")
    files.replace_file(d1.path / "experiments.json", "{}\n")
    files.release_all()
    assert d1.path.is_dir() and not d2.path.exists()  # a directory with a log is kept, an empty one removed


def test_unused_parent_directories_are_removed_again(tmp_path):
    out = files.output(tmp_path / "a" / "b" / "r.json", free=True)
    d = files.output_dir(tmp_path / "c" / "d" / "log", free=True)
    forced = files.output(tmp_path / "e" / "f" / "r.json", force=True)
    kept = files.output(tmp_path / "a" / "r.json")
    kept.write_text("x\n")
    for o in (out, d, forced):
        o.release()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["a", "a/r.json"]


# ------------------------------------------------------------------ signals
# no answer within 20 s; the where-clause (true of every finite C) keeps the simulator probe out, so the solver runs
HARD = ["discriminate", "exact", "pairwise-rne", "--k", "16", "--timeout", "600", "--where", "|c|<=2^100"]


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


# ------------------------------------------------------------------ discriminate, query, simulate
def _one_line_error(r, *words: str) -> None:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error:"), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_discriminate_output_force_replaces_only_regular_files(tmp_path):
    """Was: the JSON renamed over a device node, FIFO or symlink; DIR.tmp left behind for a directory."""
    specials = _specials(tmp_path)
    runner = CliRunner()
    for name, p in specials.items():
        r = runner.invoke(main, ["discriminate", "volta", "ampere", "--output", str(p), "--force"])
        _one_line_error(r, str(p), "regular files")
        assert "discriminating input" not in r.output  # refused before the solver ran
    _unchanged(tmp_path, specials)
    assert _leftovers(tmp_path) == []
    r = runner.invoke(main, ["discriminate", "volta", "ampere", "--output", str(specials["fifo"])])
    _one_line_error(r, "exists", "--force")


def test_discriminate_output_force_replaces_a_regular_file(tmp_path):
    target = tmp_path / "answer.json"
    target.write_text("old\n")
    r = CliRunner().invoke(main, ["discriminate", "volta", "ampere", "--output", str(target), "--force"])
    assert r.exit_code == 0, r.output
    assert json.loads(target.read_text())["models"] == ["volta", "ampere"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answer.json"]


def test_discriminate_without_result_leaves_no_claimed_file(tmp_path, monkeypatch):
    """ampere and ada are equivalent (exit 1), a 1 ms timeout gives no answer: the names claimed before the
    solve are removed again."""
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    r = runner.invoke(main, ["discriminate", "ampere", "ada"])
    assert r.exit_code == 1, r.output
    r = runner.invoke(main, ["discriminate", "ampere", "ada", "--output", "x.json"])
    assert r.exit_code == 1, r.output
    r = runner.invoke(main, ["discriminate", "exact", "pairwise-rne", "--k", "16", "--timeout", "0.001",
                             "--where", "|c|<=2^100"])  # the where-clause keeps the simulator probe out
    assert r.exit_code == 2, r.output
    assert list(tmp_path.rglob("*")) == []  # generated/, made for the claim, is gone too


def test_simulate_out_force_replaces_only_regular_files(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 0x7BFF, size=(4, 4)).astype(np.uint16)
    np.savez(tmp_path / "in.npz", a=a, b=a, c=np.zeros(4, np.uint32))
    specials = _specials(tmp_path)
    runner = CliRunner()
    for name, p in specials.items():
        r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", "--force",
                                 str(tmp_path / "in.npz"), str(p)])
        assert r.exit_code == 2, r.output
        assert "regular files" in r.output or "directory" in r.output, r.output
    _unchanged(tmp_path, specials)
    out = tmp_path / "out.npz"
    out.write_bytes(b"old")
    r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", "--force",
                             str(tmp_path / "in.npz"), str(out)])
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        assert z["d"].shape == (4,)
    assert _leftovers(tmp_path) == []


def _run_concurrently(args: list[str], cwd: Path, n: int) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(TCSMT + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def _written(stdout: str) -> str:
    return [ln for ln in stdout.splitlines() if ln.startswith("written: ")][-1].split(": ", 1)[1]


def test_concurrent_discriminate_runs_get_distinct_files(tmp_path):
    """Was: 8 concurrent runs in one directory, 17 of 32 failed with "exists" after solving and two runs
    reported the same -2.json (one result lost).  Now every run claims its own name before solving."""
    results = _run_concurrently(["discriminate", "volta", "ampere"], tmp_path, 8)
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results]
    names = [_written(r.stdout) for r in results]
    assert len(set(names)) == 8, names
    on_disk = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "generated").iterdir())
    assert on_disk == sorted(names)
    expected = ["generated/volta-vs-ampere-fp16-fp32.json"] + \
        [f"generated/volta-vs-ampere-fp16-fp32-{i}.json" for i in range(2, 9)]
    assert sorted(names) == sorted(expected)
    for name in names:  # each file is a whole answer
        doc = json.loads((tmp_path / name).read_text())
        assert doc["models"] == ["volta", "ampere"] and doc["inputs"]


# ------------------------------------------------------------------ identify
# ring 0, 4 s quick queries and one candidate a round: about 3 s of work (the runs test the files, not the search)
QUICK_IDENTIFY = ["identify", "--model", "volta", "--path", "f16.f32", "--radius", "0", "--quick-timeout", "4",
                  "--candidates", "1"]


def test_concurrent_identify_runs_get_distinct_log_directories(tmp_path):
    """Was: two concurrent runs wrote the same generated/identify-... directory."""
    results = _run_concurrently(QUICK_IDENTIFY, tmp_path, 2)
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    logs = [[ln for ln in r.stdout.splitlines() if ln.startswith("experiments: ")][0].split()[1]
            for r in results]
    assert sorted(logs) == ["generated/identify-model-volta-f16.f32-2/experiments.json",
                            "generated/identify-model-volta-f16.f32/experiments.json"]
    for log in logs:
        doc = json.loads((tmp_path / log).read_text())
        assert doc["status"] == "identified" and doc["experiments"]
        assert (tmp_path / log).with_name("result.json").is_file()


@_LINUX_PROC
def test_interrupted_identify_leaves_no_empty_log_directory(tmp_path):
    """Was: SIGTERM (or Ctrl-C) before the first experiment left an empty generated/identify-... directory."""
    proc = subprocess.Popen(TCSMT + QUICK_IDENTIFY, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    log = tmp_path / "generated" / "identify-model-volta-f16.f32"
    try:
        deadline = time.monotonic() + 60
        while not log.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert log.exists() and not (log / "experiments.json").exists(), "too late to interrupt"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    # The signal may land while the first experiments.json is being written (signals are held around the
    # rename): the log is then kept, as a log.  Never kept: an empty directory or a stray temporary file.
    left = sorted(p.name for p in log.iterdir()) if log.exists() else None
    assert left is None or left == ["experiments.json"], left


def test_identify_outputs_claimed_before_the_search_and_regular_files_only(tmp_path):
    from tcsmt.cli.identify_cmd import identify_cmd

    specials = _specials(tmp_path)
    runner = CliRunner()
    for name in ("directory", "symlink"):
        for opt in ("--json", "--write"):
            t0 = time.monotonic()
            r = runner.invoke(identify_cmd, QUICK_IDENTIFY[1:] + ["--no-log", opt, str(specials[name]), "--force"])
            assert r.exit_code == 2, r.output
            assert "regular files" in r.output and time.monotonic() - t0 < 2.0, r.output
    _unchanged(tmp_path, specials)
    r = runner.invoke(identify_cmd, QUICK_IDENTIFY[1:] + ["--log-dir", str(tmp_path / "victim.txt")])
    assert r.exit_code == 2 and "not a directory" in r.output, r.output


# ------------------------------------------------------------------ hwcheck --save, verify --plot
HWCHECK = ["hwcheck", "--random", "16", "--arch", "volta", "--path", "f16.f32", "--device", "model:volta",
           "--dist", "narrow", "--jobs", "1"]
VERIFY_STATS = ["verify", "--stats", "--arch", "volta", "--n", "200"]


@pytest.mark.parametrize("args,opt", [(HWCHECK, "--save"), (VERIFY_STATS, "--plot")])
def test_save_and_plot_never_overwrite_without_force(tmp_path, args, opt):
    """Was: hwcheck --save and verify --plot overwrote an existing file silently (and had no --force)."""
    target = tmp_path / "result.png"
    target.write_text("earlier result\n")
    runner = CliRunner()
    r = runner.invoke(main, args + [opt, str(target)])
    _one_line_error(r, "exists", "--force")
    assert target.read_text() == "earlier result\n"
    specials = _specials(tmp_path)
    for name, p in specials.items():
        r = runner.invoke(main, args + [opt, str(p), "--force"])
        _one_line_error(r, str(p))
    _unchanged(tmp_path, specials)
    assert _leftovers(tmp_path) == []


def test_hwcheck_save_force_replaces_a_regular_file(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old\n")
    r = CliRunner().invoke(main, HWCHECK + ["--save", str(target), "--force"])
    assert r.exit_code == 0, r.output
    assert json.loads(target.read_text())["results"][0]["distribution"] == "narrow"
    assert _leftovers(tmp_path) == []


def test_verify_plot_written_atomically(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "h.png"
    r = CliRunner().invoke(main, VERIFY_STATS + ["--plot", str(target)])
    assert r.exit_code == 0, r.output
    assert target.read_bytes().startswith(b"\x89PNG") and _leftovers(tmp_path) == []
    r = CliRunner().invoke(main, VERIFY_STATS + ["--plot", str(target), "--force"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png"]


def test_query_output_force_replaces_only_regular_files(tmp_path):
    """query --output wrote through the same rename as discriminate; now refused before the solver runs."""
    specials = _specials(tmp_path)
    runner = CliRunner()
    for name, p in specials.items():
        r = runner.invoke(main, ["query", "carry-bits", "--timeout", "0.001", "--output", str(p), "--force"])
        _one_line_error(r, str(p), "regular files")
        assert "volta is" not in r.output  # refused before the query ran
    _unchanged(tmp_path, specials)
    assert _leftovers(tmp_path) == []


def test_concurrent_query_runs_get_distinct_files(tmp_path):
    results = _run_concurrently(["query", "rounding-fp16-output", "--timeout", "60"], tmp_path, 3)
    assert [r.returncode for r in results] == [0] * 3, [r.stderr for r in results]
    names = sorted(_written(r.stdout) for r in results)
    stem = "generated/query-rounding-fp16-output-volta"
    assert names == [f"{stem}-2.json", f"{stem}-3.json", f"{stem}.json"]
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "generated").iterdir()) == names


# ------------------------------------------------------------------ the cubin cache
def _fake_nvcc(tmp_path: Path, fail: bool) -> str:
    """A stand-in for nvcc: prints a version, writes its -o file, and fails on request."""
    script = tmp_path / ("nvcc-fail" if fail else "nvcc-ok")
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = "--version" ]; then echo "fake nvcc 1.0"; exit 0; fi\n'
                      'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done\n'
                      'printf partial > "$out"\n'
                      + ('echo "error: bad kernel" >&2; exit 1\n' if fail else "exit 0\n"))
    script.chmod(0o755)
    return str(script)


def test_cubin_cache_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Was: NAME.PID.tmp, shared by threads of one process and left behind when nvcc failed."""
    from tcsmt.hwcheck.device import compile_cubin

    cache = tmp_path / "cache"
    monkeypatch.setenv("TCSMT_CACHE", str(cache))
    source = tmp_path / "k.cu"
    source.write_text("// kernel\n")
    with pytest.raises(TcsmtError, match="bad kernel"):
        compile_cubin("sm_90a", source, nvcc=_fake_nvcc(tmp_path, fail=True))
    assert list(cache.iterdir()) == []
    out = compile_cubin("sm_90a", source, nvcc=_fake_nvcc(tmp_path, fail=False))
    assert out.read_bytes() == b"partial" and [p.name for p in cache.iterdir()] == [out.name]


def test_release_all_removes_a_temporary_file_an_interrupt_left(tmp_path):
    """A temporary file is registered before it is created, so an interrupt between the two steps of a
    write (create, rename) leaves nothing behind once the CLI's trap (or atexit) calls release_all."""
    fd, tmp = files._new_temporary(tmp_path / "x.json")
    os.close(fd)
    assert Path(tmp).parent == tmp_path and Path(tmp).name.startswith(".x.json.")
    files.release_all()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the developer scripts
def test_verify_device_and_campaign_out_never_overwrite_without_force(tmp_path, capsys):
    """Both wrote --out in place (Path.write_text), silently replacing an earlier result."""
    from tcsmt.hwcheck.campaign import main as campaign
    from tcsmt.verify.device import main as verify_device

    earlier = tmp_path / "earlier.json"
    earlier.write_text("earlier\n")
    assert verify_device(["--arch", "hopper", "--n", "50", "--device", "model:hopper", "--ranges", "1..2",
                          "--out", str(earlier)]) == 2
    assert campaign(["--arch", "volta", "--n", "16", "--device", "model:volta", "--dists", "narrow", "--no-layouts",
                     "--jobs", "1", "--out", str(earlier)]) == 2
    assert earlier.read_text() == "earlier\n"
    assert capsys.readouterr().err.count("exists; use --force") == 2
    assert verify_device(["--arch", "hopper", "--n", "50", "--device", "model:hopper", "--ranges", "1..2",
                          "--out", str(earlier), "--force"]) == 0
    assert json.loads(earlier.read_text())["arch"] == "hopper"
    assert campaign(["--arch", "volta", "--n", "16", "--device", "model:volta", "--dists", "narrow", "--no-layouts",
                     "--jobs", "1", "--out", str(earlier), "--force"]) == 0
    assert json.loads(earlier.read_text())["tool"] == "tcsmt.hwcheck.campaign"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.json"]
