"""Model files: shared sources and hypotheses, and the hardware check's paths tied to them."""
from __future__ import annotations

import re

import pytest

from tcsmt.arith import registry
from tcsmt.arith.registry import architectures
from tcsmt.errors import TcsmtError
from tcsmt.hwcheck.paths import PATHS


def test_shared_entries_are_expanded():
    for arch in architectures().values():
        for path in arch.paths:
            assert not any(s.startswith("@") for s in path.params.sources), path.params.name
    hopper = architectures()["hopper"]
    bf16 = hopper.find_paths("bf16", "fp32", "mma")[0]
    assert {"no_floor", "floor126"} <= set(bf16.hypotheses)
    assert bf16.hypotheses["floor126"] == {"align_floor": -126}
    assert any("Hawkeye" in s for s in bf16.params.sources)  # prior art credited in the shared source


_MINIMAL = """name = "tiny"
title = "t"
[[paths]]
in_fmt = "fp16"
out_fmt = "fp32"
acc_fmt = "fp32"
instr_k = 4
block_k = 4
extra_bits = 0
"""


@pytest.mark.parametrize("extra,msg", [
    ('sources = ["@nosuch"]\n', "names no entry of [shared.sources]"),
    ('shared_hypotheses = ["nosuch"]\n', "does not define"),
])
def test_unknown_shared_entry_is_an_error(tmp_path, extra, msg):
    f = tmp_path / "tiny.toml"
    f.write_text(_MINIMAL + extra)
    with pytest.raises(TcsmtError, match=re.escape(msg)):
        registry._load_arch(f)


def _mk(shape: str) -> tuple[str, str]:
    """(M, K) of an instruction shape such as m16n8k16 or m64nNk16 (N varies on wgmma), after an optional
    kind (``kind::tf32 m128nNk8``) and before an optional scale vector (``m16n8k32 scale_vec::1X``)."""
    m = re.fullmatch(r"(?:kind::\w+ )?m(\d+)n(?:\d+|N)k(\d+)(?: scale_vec::\w+)?", shape)
    assert m, shape
    return m.group(1), m.group(2)


def test_hwcheck_paths_agree_with_the_model_files():
    """tcsmt/hwcheck/paths.py repeats each instruction's shape and k: they must match every model of a GPU that runs it.

    (Volta's and Turing's fp16 paths are other instructions, m8n8k4 and m16n8k8: their GPUs lack the
    hardware check's m16n8k16 kernel, which needs compute capability 8.0.)
    """
    seen = 0
    for spec in PATHS.values():
        for arch in architectures().values():
            if not arch.sm.isdigit() or int(arch.sm) < spec.cc:
                continue
            for path in arch.find_paths(spec.in_fmt, spec.out_fmt, spec.instr):
                p = path.params
                seen += 1
                if spec.library:
                    assert path.library, (arch.name, spec.label)
                    continue
                assert p.instr_k == spec.instr_k, (arch.name, spec.label, p.instr_k, spec.instr_k)
                assert _mk(p.instr_shape) == _mk(spec.shape), (arch.name, spec.label, p.instr_shape, spec.shape)
    assert seen >= len(PATHS)
