"""``python -m tcsmt.hwcheck ARGS`` = ``tcsmt hwcheck ARGS`` (same options, errors and exit statuses)."""
from __future__ import annotations

import sys

import click

from tcsmt.cli_errors import Group as _Group
from tcsmt.hwcheck_cmd import hwcheck_cmd


@click.group(cls=_Group)
def _standalone() -> None:
    """Wrapper group so that TcsmtError becomes one line on stderr and exit status 2."""


_standalone.add_command(hwcheck_cmd)

if __name__ == "__main__":
    _standalone(["hwcheck", *sys.argv[1:]], prog_name="python -m tcsmt.hwcheck")
