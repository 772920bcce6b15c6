"""The two exception types of tcsmt.

- :class:`TcsmtError`: a user-facing error (bad input, unknown model, unsupported path, no GPU, a solver
  timeout).  The CLI prints it as one line and exits with status 2; the API raises it.
- :class:`InternalError`: an invariant of tcsmt itself failed (a solver answer that does not replay in the
  simulator, a static bit-width bound that does not hold).  It is a bug, never the user's fault: the CLI
  keeps its traceback (a maintainer needs it), asks for a report, and exits with status 70 (EX_SOFTWARE).
"""


class TcsmtError(Exception):
    """A user-facing error: bad input, unknown model, unsupported path, no GPU, timeout."""


class InternalError(Exception):
    """A failed invariant of tcsmt (a bug): the CLI prints its traceback and exits with status 70."""

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error: {message}")


#: exit status of the CLI for an :class:`InternalError` (sysexits.h EX_SOFTWARE)
INTERNAL_ERROR_EXIT = 70
