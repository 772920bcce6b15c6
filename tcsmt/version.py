"""The version of tcsmt, as pyproject.toml states it (the package and its JSON records read it here)."""

__version__ = "0.1.0"
