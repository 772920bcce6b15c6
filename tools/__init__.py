"""Developers' tools, not installed: device campaigns (``tools/device``), library table builders
(``tools/library``) and vector builders (``tools/vectors``).  Run from the repository root as
``python -m tools.<folder>.<module>`` (or the shell scripts in ``tools/device``).
"""
