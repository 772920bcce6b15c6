"""Hostile input: every bad value, file, parameter or array is a one-line error, never a hang or traceback.

Each test here failed on the code before the fix it guards (a hang, a traceback, a wrong answer or a
silently accepted value); the CLI tests check the exact exit status 2 and one ``tcsmt: error:`` line.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tcsmt.arith.values import MAX_BITS, MAX_TEXT, parse_value
from tcsmt.cli import main
from tcsmt.errors import TcsmtError


def _one_line_error(r, *needles: str) -> str:
    """The CLI result is exit 2 with exactly one ``tcsmt: error:`` line containing every needle."""
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("tcsmt: error: ")]
    assert len(errors) == 1 and "Traceback" not in r.output, r.output
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def runner():
    return CliRunner()


# ------------------------------------------------------------------ values
@pytest.mark.parametrize("text", ["2^1000000000", "2^-99999999", "1e999999999", "1e-999999999", "3^99999999",
                                  "0.5^-99999999", "2^(99999999)", "2^4096*2^4096", "2^4097", "2^-4097"])
def test_huge_exponents_are_refused_at_once(text):
    """2^1000000000 once hung the parser; now the limit is named and nothing big is computed."""
    t0 = time.perf_counter()
    with pytest.raises(TcsmtError, match=rf"2\^-{MAX_BITS}\.\.2\^{MAX_BITS}"):
        parse_value(text)
    assert time.perf_counter() - t0 < 1.0


def test_value_limits_are_inclusive():
    assert parse_value("2^4096") == 2 ** MAX_BITS
    assert parse_value("2^-4096") * 2 ** MAX_BITS == 1
    assert parse_value("1e-300") * 10 ** 300 == 1
    assert parse_value("2*-3") == -6 and parse_value("1/4") * 4 == 1  # forms the old parser took still work


def test_long_value_text_is_refused():
    with pytest.raises(TcsmtError, match=f"at most {MAX_TEXT}"):
        parse_value("1" * (MAX_TEXT + 1))
    with pytest.raises(TcsmtError):
        parse_value("9" * 5000)  # the old parser hit Python's int-digits limit with a ValueError text


def _run_cli(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tcsmt", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [
    ["dot", "--arch", "volta", "2^1000000000", "1"],
    ["dot", "--arch", "volta", "1", "1", "--c", "1e999999999"],
    ["discriminate", "volta", "ampere", "--where", "a=2^99999999", "--no-save", "--timeout", "5"],
    ["verify", "--algo", "markidis", "--range", "0..2^99999999", "--timeout", "5"],
])
def test_cli_huge_exponent_is_one_line_error(args):
    """These commands never returned before (run in a subprocess so that a hang fails the test, not the suite)."""
    r = _run_cli(args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("tcsmt: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "out of range" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["dot", "--arch", "volta", "2^4000", "1"], "overflows fp16"),
    (["dot", "--arch", "volta", "1", "1", "--c", "2^-4000"], "not exactly representable in fp32"),
    (["discriminate", "volta", "ampere", "--where", "|a|<=2^4000", "--no-save"], "overflows fp16"),
    (["discriminate", "volta", "ampere", "--where", "c=2^-4000", "--no-save"], "not exactly representable"),
    (["verify", "--algo", "markidis", "--range", "0..2^4000"], "at most 65504"),
])
def test_value_outside_every_format_is_one_line_error(runner, args, needle):
    _one_line_error(runner.invoke(main, args), needle)


def test_verify_bound_beyond_float_range_is_printed(runner):
    """--bound 2^4000 crashed printing the claim (float(2^4000) overflows); K = 1 proves it at once."""
    r = runner.invoke(main, ["verify", "--algo", "markidis", "--bound", "2^4000", "--k", "1", "--timeout", "20",
                             "--arch", "volta"])
    assert ("Traceback" not in r.output and r.exception is None) or isinstance(r.exception, SystemExit), r.output
    assert "claim: error <= 2^4000 (1.318e+1204)" in r.output


# -------------------------------------------------------------- parameters
@pytest.mark.parametrize("spec,needle", [
    ("hopper:align_floor=100000", "align_floor must be -149..127"),   # once accepted: 1*1 then gave 0
    ("hopper:align_floor=-100000", "align_floor must be -149..127"),
    ("volta:instr_k=100000", "instr_k must be 0..4096"),
    ("volta:block_k=-1", "block_k must be 0..4096"),
    ("volta:block_k=8", "block_k must not exceed instr_k"),
])
def test_out_of_range_parameters_are_refused(spec, needle):
    from tcsmt import resolve

    with pytest.raises(TcsmtError, match=needle):
        resolve(spec, "fp16", "fp32")


def test_align_floor_range_follows_the_formats():
    """fp16 products reach 2^-48, fp32 C and accumulator 2^-149 .. 2^127; fp64 reaches 2^-1074."""
    from tcsmt import resolve
    from tcsmt.arith.params import floor_range

    assert floor_range(resolve("hopper", "fp16", "fp32")) == (-149, 127)
    assert floor_range(resolve("ampere", "fp64", "fp64")) == (-2148, 2048)
    assert resolve("hopper:align_floor=-149", "fp16", "fp32").align_floor == -149
    assert resolve("ampere:align_floor=-1074", "fp64", "fp64").align_floor == -1074


@pytest.mark.parametrize("field,value", [("in_fmt", "bf16"), ("out_fmt", "fp16"), ("c_fmt", "fp16"),
                                         ("instr", "wgmma"), ("instr_shape", "m16n8k16")])
def test_path_fields_cannot_be_overridden(field, value):
    """volta:in_fmt=bf16 silently turned Volta's fp16 path into a bf16 one."""
    from tcsmt import resolve

    with pytest.raises(TcsmtError, match=f"{field} names the path.*--in, --out and --instr"):
        resolve(f"volta:{field}={value}", "fp16", "fp32")


def test_path_field_override_on_the_command_line(runner):
    r = runner.invoke(main, ["dot", "--arch", "volta:in_fmt=bf16", "1", "1"])
    _one_line_error(r, "in_fmt names the path", "--in")


def test_parameter_types_are_checked():
    import dataclasses

    from tcsmt import resolve
    from tcsmt.arith.params import validate

    p = resolve("volta", "fp16", "fp32")
    for field, value in (("instr_k", "4"), ("block_k", 2.0), ("carry_bits", None), ("subnormal_in", 1),
                         ("align_floor", "low"), ("instr_k", True)):
        with pytest.raises(TcsmtError, match=field):
            validate(dataclasses.replace(p, **{field: value}))


# ------------------------------------------------------------- input files
def _good_npz(path, n=4, K=4):
    import numpy as np

    np.savez(path, a=np.ones((n, K), np.float16), b=np.ones((n, K), np.float16), c=np.zeros(n, np.float32))
    return path


def _bad_files(tmp_path) -> dict[str, tuple]:
    """Malformed .npz inputs (once tracebacks, or a text file reported as 'pickled (object) data'), with the message wanted."""
    import numpy as np

    good = _good_npz(tmp_path / "good.npz", n=2000)
    files = {}
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[:300])
    files["truncated"] = (trunc, "damaged or truncated .npz archive")
    npy = tmp_path / "npy.npz"
    with open(npy, "wb") as fh:
        np.save(fh, np.ones(3))
    files["npy"] = (npy, "a single .npy array, not an .npz archive")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    files["empty"] = (empty, "empty file")
    text = tmp_path / "text.npz"
    text.write_text("hello\n")
    files["text"] = (text, "not an .npz archive (no zip header")
    crc = tmp_path / "crc.npz"
    data = bytearray(good.read_bytes())
    for i in range(200, 400):
        data[i] ^= 0x55
    crc.write_bytes(bytes(data))
    files["corrupt"] = (crc, "damaged or truncated .npz archive")
    obj = tmp_path / "obj.npz"
    np.savez(obj, a=np.array([[1, 2]], object), b=np.ones((1, 2)), c=np.ones(1))
    files["object"] = (obj, "object (pickled) arrays")
    three = tmp_path / "three.npz"
    np.savez(three, a=np.ones((1, 2, 2), np.float16), b=np.ones((1, 2, 2), np.float16), c=np.ones(1, np.float32))
    files["3-D a"] = (three, "a and b must both have shape (n, K); got (1, 2, 2)")
    mism = tmp_path / "mism.npz"
    np.savez(mism, a=np.ones((3, 4), np.float16), b=np.ones((3, 4), np.float16), c=np.ones(2, np.float32))
    files["mismatched n"] = (mism, "c must have shape (3,) to match a and b; got (2,)")
    ints = tmp_path / "ints.npz"
    np.savez(ints, a=np.ones((3, 4), np.int64), b=np.ones((3, 4), np.float16), c=np.ones(3, np.float32))
    files["int64 a"] = (ints, "a: int64 integers are ambiguous for fp16")
    strs = tmp_path / "strs.npz"
    np.savez(strs, a=np.array([["x"]]), b=np.ones((1, 1), np.float16), c=np.ones(1, np.float32))
    files["strings"] = (strs, "a: expected numbers")
    inexact = tmp_path / "inexact.npz"
    np.savez(inexact, a=np.array([[1.0, 0.1]]), b=np.ones((1, 2)), c=np.ones(1, np.float32))
    files["inexact value"] = (inexact, "a[0, 1]: 0.1 is not exactly representable in fp16")
    return files


_BAD_KINDS = ["truncated", "npy", "empty", "text", "corrupt", "object", "3-D a", "mismatched n", "int64 a",
              "strings", "inexact value"]


@pytest.mark.parametrize("kind", _BAD_KINDS)
def test_simulate_bad_npz_is_one_line_error(runner, tmp_path, kind):
    path, needle = _bad_files(tmp_path)[kind]
    out = tmp_path / "out.npz"
    r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", str(path), str(out)])
    line = _one_line_error(r, needle)
    assert line.startswith(f"tcsmt: error: {path}: ")
    assert not out.exists()


@pytest.mark.parametrize("kind", _BAD_KINDS)
def test_hwcheck_bad_npz_is_one_line_error(runner, tmp_path, kind):
    path, needle = _bad_files(tmp_path)[kind]
    r = runner.invoke(main, ["hwcheck", str(path), "--path", "f16.f32", "--model", "volta", "--device", "model:volta"])
    line = _one_line_error(r, needle)
    assert line.startswith(f"tcsmt: error: {path}: ")


@pytest.mark.parametrize("text,needle", [
    ('{"in_fmt": "fp16", "out_fmt": "fp32", "inputs": [{"a": ["0x3c00"]', "not a readable JSON file"),
    ("", "empty file"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    (b"\xff\xfe\x00binary", "not a UTF-8 text file"),
])
def test_hwcheck_malformed_json_is_one_line_error(runner, tmp_path, text, needle):
    path = tmp_path / "in.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    r = runner.invoke(main, ["hwcheck", str(path), "--device", "model:volta"])
    line = _one_line_error(r, needle)
    assert line.startswith(f"tcsmt: error: {path}: ")


def test_good_npz_still_runs(runner, tmp_path):
    good = _good_npz(tmp_path / "good.npz")
    r = runner.invoke(main, ["simulate", "--arch", "volta", "--in", "fp16", "--out", "fp32", str(good),
                             str(tmp_path / "out.npz")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["hwcheck", str(good), "--path", "f16.f32", "--model", "volta", "--device", "model:volta"])
    assert r.exit_code == 0 and "volta: confirmed" in r.output, r.output


# ------------------------------------------------------------- Python API
def _api(*args, **kw):
    from tcsmt import simulate

    return simulate(*args, **kw)


def test_python_ints_are_ambiguous():
    """Once: [[1, 2]] . [[1, 1]] + 0 gave 1.07e-14 (the ints taken as fp16 patterns 0x0001, 0x0002)."""
    import numpy as np

    with pytest.raises(TcsmtError, match=r"a: int64 integers are ambiguous for fp16.*float values.*uint16.*bits=True"):
        _api("volta", [[1, 2]], [[1, 1]], [0], "fp16", "fp32")
    with pytest.raises(TcsmtError, match="int8 integers are ambiguous"):
        _api("volta", np.array([[1, 2]], np.int8), [[1.0, 1.0]], [0.0], "fp16", "fp32")
    with pytest.raises(TcsmtError, match="c: int64 integers are ambiguous for fp32"):
        _api("volta", [[1.0, 2.0]], [[1.0, 1.0]], [0], "fp16", "fp32")
    with pytest.raises(TcsmtError, match="uint32 integers are ambiguous for fp16"):  # fp32 patterns: give float32
        _api("volta", np.array([[0x3F800000]], np.uint32), [[1.0]], [0.0], "fp16", "fp32")


def test_values_and_explicit_bit_patterns():
    import numpy as np

    from tcsmt.arith.formats import FP32

    three = FP32.from_fraction(3)
    assert _api("volta", [[1.0, 2.0]], [[1.0, 1.0]], [0.0], "fp16", "fp32")[0] == three
    assert _api("volta", [[0x3C00, 0x4000]], [[0x3C00, 0x3C00]], [0], "fp16", "fp32", bits=True)[0] == three
    pats = np.array([[0x3C00, 0x4000]], np.uint16)  # the format's own width: patterns without bits=True
    assert _api("volta", pats, pats.view(np.float16) * 0 + 1, np.zeros(1, np.uint32), "fp16", "fp32")[0] == three
    with pytest.raises(TcsmtError, match=r"a\[0, 0\]: 0x17c01 is not a fp16 bit pattern"):
        _api("volta", np.array([[0x17C01]], np.uint32), [[1.0]], [0.0], "fp16", "fp32", bits=True)
    with pytest.raises(TcsmtError, match=r"a\[0, 0\]: -1 is negative"):
        _api("volta", [[-1]], [[1.0]], [0.0], "fp16", "fp32", bits=True)


@pytest.mark.parametrize("args,needle", [
    ((None, [[1.0]], [[1.0]], [0.0], "fp16", "fp32"), "a model spec is a string"),
    ((3, [[1.0]], [[1.0]], [0.0], "fp16", "fp32"), "a model spec is a string"),
    (("volta", [[1.0]], [[1.0]], [0.0], 16, "fp32"), "in_fmt must be a string"),
    (("volta", [[1.0]], [[1.0]], [0.0], "fp16", 32), "out_fmt must be a string"),
    (("volta", [[1.0], [1.0, 2.0]], [[1.0]], [0.0], "fp16", "fp32"), "a: not a numeric array"),
    (("volta", [["x"]], [[1.0]], [0.0], "fp16", "fp32"), "a: expected numbers"),
    (("volta", [[True]], [[1.0]], [0.0], "fp16", "fp32"), "a: expected numbers"),
])
def test_api_bad_arguments_raise_tcsmt_error(args, needle):
    """simulate(None, ...) once raised AttributeError."""
    with pytest.raises(TcsmtError, match=needle):
        _api(*args)


def test_simulate_params_needs_model_params():
    from tcsmt import simulate_params

    with pytest.raises(TcsmtError, match="needs ModelParams"):
        simulate_params("volta", [[1.0]], [[1.0]], [0.0])


def test_get_format_needs_a_string():
    from tcsmt import get_format

    with pytest.raises(TcsmtError, match="named by a string"):
        get_format(16)


def _fp16_patterns(n: int, K: int):
    import numpy as np

    rng = np.random.default_rng(5)
    s = rng.integers(0, 2, (n, K), dtype=np.uint16)
    e = rng.integers(7, 23, (n, K), dtype=np.uint16)
    f = rng.integers(0, 1024, (n, K), dtype=np.uint16)
    return (s << 15) | (e << 10) | f


def test_float_values_equal_bit_patterns_on_every_path_format():
    """float16/32/64 values give the same outputs as the patterns, on fp16, bf16 and tf32 paths."""
    import numpy as np

    pat = _fp16_patterns(3000, 8)
    vals = pat.view(np.float16)
    c = np.linspace(-3, 3, 3000).astype(np.float32)
    want = _api("ampere", pat, pat, c, "fp16", "fp32")
    for dt in (np.float16, np.float32, np.float64):
        assert np.array_equal(_api("ampere", vals.astype(dt), vals.astype(dt), c, "fp16", "fp32"), want)
    # fp16 values with |exponent| small are bf16 values only when their low fraction bits are zero
    short = (pat & np.uint16(0xFFF8)).view(np.float16)
    as_bf16 = (short.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    want_bf = _api("ampere", as_bf16, as_bf16, c, "bf16", "fp32")
    assert np.array_equal(_api("ampere", short, short, c, "bf16", "fp32"), want_bf)
    as_tf32 = short.astype(np.float32)
    assert np.array_equal(_api("ampere", short, short, c, "tf32", "fp32"),
                          _api("ampere", as_tf32.view(np.uint32), as_tf32.view(np.uint32), c, "tf32", "fp32"))
    with pytest.raises(TcsmtError, match=r"a\[0, 2\]: 1.0009765625 is not exactly representable in bf16"):
        _api("ampere", np.array([[1.0, 2.0, 1 + 2 ** -10]], np.float16), np.ones((1, 3), np.float16), [0.0],
             "bf16", "fp32")


def test_float16_values_need_no_float64_copy():
    """A float16 input was once copied to float64 (3*10^8 rows: 36 GiB); 2*10^5 x 16 rows took 1013 MiB here.

    Now fp16 values are reinterpreted in place (peak below the input's own size) and conversions
    (fp16 values on the bf16 path) go chunk by chunk: a and b become uint16 patterns, and the peak
    stays below one float64 copy of one input (tracemalloc sees numpy's buffers).
    """
    import tracemalloc

    import numpy as np

    n, K = 200_000, 16
    vals = _fp16_patterns(n, K).view(np.float16)
    c = np.zeros(n, np.float32)
    f64_copy = vals.size * 8
    for path in ("fp16", "bf16"):
        a = vals if path == "fp16" else (vals.view(np.uint16) & np.uint16(0xFFF8)).view(np.float16)
        _api("ampere", a, a, c, path, "fp32")  # first: loads the compiled kernel (tcsmt.kernels.simulate), once
        tracemalloc.start()
        try:
            _api("ampere", a, a, c, path, "fp32")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < (vals.nbytes if path == "fp16" else f64_copy), (path, peak, f64_copy)


def test_float16_values_as_fast_as_patterns():
    """float16 values were 56x slower than uint16 patterns (21.6k against 1.21M rows/s, volta, K = 16)."""
    import numpy as np

    pat = _fp16_patterns(100_000, 16)
    c = np.zeros(len(pat), np.float32)
    _api("volta", pat[:100], pat[:100], c[:100], "fp16", "fp32")

    def best(a):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            _api("volta", a, a, c, "fp16", "fp32")
            times.append(time.perf_counter() - t0)
        return min(times)

    assert best(pat.view(np.float16)) < 2 * best(pat)  # the old code took ~56x as long


def test_numpy_integer_parameters_become_ints():
    """Messages and semantic keys never carry numpy-2 reprs such as np.int64(4)."""
    import dataclasses

    import numpy as np

    from tcsmt import resolve
    from tcsmt.arith.params import validate

    p = validate(dataclasses.replace(resolve("volta", "fp16", "fp32"), instr_k=np.int64(4), align_floor=np.int32(-5)))
    assert type(p.instr_k) is int and type(p.align_floor) is int and p.instr_k == 4
    with pytest.raises(TcsmtError, match=r"align_floor must be -149\.\.127 .*, not 100000$"):
        validate(dataclasses.replace(p, align_floor=np.int64(100000)))


def test_ml_dtypes_values():
    """bfloat16 and float8 value arrays (ml_dtypes) are values: reinterpreted on their own path, converted elsewhere."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import numpy as np

    rng = np.random.default_rng(2)
    bf = rng.standard_normal((500, 8)).astype(np.float32).astype(ml_dtypes.bfloat16)
    c = np.zeros(500, np.float32)
    want = _api("ampere", bf.view(np.uint16), bf.view(np.uint16), c, "bf16", "fp32")
    assert np.array_equal(_api("ampere", bf, bf, c, "bf16", "fp32"), want)
    assert np.array_equal(_api("ampere", bf.astype(np.float32), bf.astype(np.float32), c, "bf16", "fp32"), want)
    small = np.array([[1.0, 0.5, 2.0 ** -14]], ml_dtypes.bfloat16)
    # 1 + 1/4 + 2^-28: Ampere's fp16 window ends at 2^-24 below the leading 2^0 (extra_bits = 1), so 2^-28 is cut
    assert _api("ampere", small, small, [0.0], "fp16", "fp32")[0] == 0x3FA00000  # 1.25
    with pytest.raises(TcsmtError, match=r"a\[0, 0\]: 1.2676506002282294e\+30 is not exactly representable in fp16"):
        _api("ampere", np.array([[2.0 ** 100]], ml_dtypes.bfloat16), [[1.0]], [0.0], "fp16", "fp32")
    e4 = np.array([[1.0, 448.0, -(2.0 ** -9)]], ml_dtypes.float8_e4m3fn)
    assert _api("hopper", e4, e4, [0.0], "e4m3", "fp32")[0] == _api("hopper", e4.view(np.uint8), e4.view(np.uint8),
                                                                      [0.0], "e4m3", "fp32")[0]


@pytest.mark.parametrize("text", ["2^" + "9" * 500, "1e" + "9" * 500, "3^-" + "9" * 500, "1.5^" + "9" * 400])
def test_exponents_too_long_for_a_float_are_refused(text):
    """An exponent of hundreds of digits overflowed the float estimate (OverflowError); the message stays short."""
    with pytest.raises(TcsmtError, match="out of range") as exc:
        parse_value(text)
    assert len(str(exc.value)) < 200


def test_powers_of_zero_and_one_with_huge_exponents():
    assert parse_value("1^" + "9" * 500) == 1 and parse_value("0^" + "9" * 500) == 0
    assert parse_value("2*-1^" + "9" * 500) == -2 and parse_value("2*-1^" + "9" * 499 + "8") == 2


def test_gzipped_json_is_read_within_the_json_limit(tmp_path):
    """A gzip-compressed JSON file (evidence/*_cublas_plans.json.gz) reads as the same document; its decompressed
    size has the JSON limit, checked while it inflates (a gzip bomb stops one byte past the limit); a damaged or
    truncated one is a one-line error naming the file."""
    import gzip

    from tcsmt.io.load import document, document_name, read_json

    doc = {"calls": [{"M": 1, "seed": 3}], "gpu": "NVIDIA H100"}
    plain, packed = tmp_path / "plans.json", tmp_path / "plans.json.gz"
    plain.write_text(json.dumps(doc))
    packed.write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    assert read_json(packed) == read_json(plain) == doc
    assert document(packed)["calls"].as_list()[0]["seed"].as_int() == 3
    assert (document_name(packed), document_name(plain)) == ("plans.json", "plans.json")
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (1 << 20) + b"]"))  # 1 MiB of JSON in about 1 kB
    assert bomb.stat().st_size < 4096
    assert read_json(bomb, limit=(1 << 20) + 2) == []
    with pytest.raises(TcsmtError, match=r"bomb.json.gz: decompresses to more than 1,048,576 bytes; a JSON file"):
        read_json(bomb, limit=1 << 20)
    for name, data in (("cut.json.gz", packed.read_bytes()[:-9]), ("bad.json.gz", b"\x1f\x8b" + b"\x00" * 30)):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TcsmtError) as err:
            read_json(tmp_path / name)
        assert f"{name}: a damaged gzip file" in str(err.value) and "\n" not in str(err.value)
