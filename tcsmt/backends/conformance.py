"""The static check that every back end implements the contract (:class:`tcsmt.arith.contract.Backend`).

Read by mypy only (the CI type gate): a back end that drifts from the contract fails type checking here.
"""
from __future__ import annotations

from tcsmt.arith.contract import Backend


def _conforms() -> None:  # pragma: no cover - read by mypy only
    """mypy checks here that every back end implements the contract."""
    from tcsmt.backends.cupy import CupyBackend
    from tcsmt.backends.numpy import CheckedNumpyBackend, NumpyBackend
    from tcsmt.backends.smt import SmtBackend

    backends: list[Backend] = [NumpyBackend(), CheckedNumpyBackend(), SmtBackend(), CupyBackend()]
    del backends
