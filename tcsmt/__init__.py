"""tcsmt: bit-exact models of GPU matrix units, a simulator and an SMT encoding from one definition."""
from .errors import TcsmtError
from .formats import FORMATS, get_format
from .registry import resolve
from .simulator import simulate, simulate_params

__version__ = "0.1.0"
__all__ = ["TcsmtError", "FORMATS", "get_format", "resolve", "simulate", "simulate_params", "__version__"]
