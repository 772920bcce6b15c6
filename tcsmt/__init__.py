"""tcsmt: bit-exact models of GPU matrix units, a simulator and an SMT encoding from one definition.

The public API: :func:`simulate` / :func:`simulate_params` (the bit-exact simulator), :func:`resolve`
(a model spec to its :class:`ModelParams`), :func:`get_format` and :data:`FORMATS` (the number formats,
:class:`Format`), and :class:`TcsmtError` (every user error).  Everything else is internal.
"""
from .errors import TcsmtError
from .formats import FORMATS, Format, get_format
from .params import ModelParams
from .registry import resolve
from .simulator import simulate, simulate_params

__version__ = "0.1.0"
__all__ = ["FORMATS", "Format", "ModelParams", "TcsmtError", "__version__", "get_format", "resolve", "simulate",
           "simulate_params"]
