"""tcsmt: bit-exact models of GPU matrix units, a simulator and an SMT encoding from one definition.

The public API: :func:`simulate` / :func:`simulate_params` (the bit-exact simulator: the numpy semantics,
or the compiled CPU kernel on the paths it implements, :mod:`tcsmt.kernels.simulate`), :func:`resolve`
(a model spec to its :class:`ModelParams`), :func:`get_format` and :data:`FORMATS` (the number formats,
:class:`Format`), :class:`TcsmtError` (every user error) and :class:`InternalError` (a bug in tcsmt).  Everything else is internal.
"""
from tcsmt.arith.formats import FORMATS, Format, get_format
from tcsmt.arith.params import ModelParams
from tcsmt.arith.registry import resolve
from tcsmt.errors import InternalError, TcsmtError
from tcsmt.kernels.simulate import simulate, simulate_params
from tcsmt.version import __version__

__all__ = ["FORMATS", "Format", "InternalError", "ModelParams", "TcsmtError", "__version__", "get_format", "resolve", "simulate",
           "simulate_params"]
