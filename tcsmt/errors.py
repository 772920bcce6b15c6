"""The one exception type the CLI turns into a one-line message and exit status 2."""


class TcsmtError(Exception):
    """A user-facing error: bad input, unknown model, unsupported path, no GPU, timeout."""
