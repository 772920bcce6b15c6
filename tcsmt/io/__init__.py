"""Files, terminal and process: safe output files, progress lines, signals, solver children, the one error trap
of every command and script, and the shared option types.  Needs nothing of tcsmt but :mod:`tcsmt.errors`.
"""
