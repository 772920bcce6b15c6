"""tcsmt: bit-exact models of GPU matrix units, a simulator and an SMT encoding from one definition.

The public API: :func:`simulate` / :func:`simulate_params` (the bit-exact simulator), :func:`resolve`
(a model spec to its :class:`ModelParams`), :func:`get_format` and :data:`FORMATS` (the number formats,
:class:`Format`), :class:`TcsmtError` (every user error) and :class:`InternalError` (a bug in tcsmt).  Everything else is internal.
"""
from .errors import InternalError, TcsmtError
from .formats import FORMATS, Format, get_format
from .params import ModelParams
from .registry import resolve
from .simulator import simulate, simulate_params

__version__ = "0.1.0"
__all__ = ["FORMATS", "Format", "InternalError", "ModelParams", "TcsmtError", "__version__", "get_format", "resolve", "simulate",
           "simulate_params"]
