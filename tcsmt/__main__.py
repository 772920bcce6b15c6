"""``python -m tcsmt``: the command-line interface."""
from tcsmt.cli.commands import main

main(prog_name="tcsmt")
