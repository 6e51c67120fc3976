"""``python -m researchstore``: the command line."""

from researchstore.cli import main

main(prog_name="researchstore")
