"""verify_device runs the schemes' tensor-core calls on a device; checked against model-backed devices."""
from __future__ import annotations

import pytest

from tcsmt.verify.device import main


def test_model_device_agrees_with_its_own_model(capsys):
    assert main(["--arch", "hopper", "--n", "300", "--device", "model:hopper", "--ranges", "1..2,2^-36..2^-14"]) == 0
    assert "agree on every row" in capsys.readouterr().out


def test_other_model_device_is_caught(capsys):
    """Ampere's 1-extra-bit, 8-wide blocks differ from Hopper's (published_parameters.md)."""
    assert main(["--arch", "hopper", "--n", "300", "--device", "model:ampere", "--ranges", "1..2"]) == 1
    assert "differ on" in capsys.readouterr().out


def test_bad_witness_is_exit_2():
    assert main(["--device", "model:hopper", "--n", "1", "--witness", "zz"]) == 2


def test_no_gpu_is_exit_2(capsys):
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the no-device path is not reachable here")
    except ImportError:
        pass
    assert main(["--device", "cuda", "--n", "1"]) == 2
    assert "no CUDA device" in capsys.readouterr().err
