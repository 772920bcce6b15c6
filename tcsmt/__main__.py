"""``python -m tcsmt``: the command-line interface."""
from .cli import main

main(prog_name="tcsmt")
