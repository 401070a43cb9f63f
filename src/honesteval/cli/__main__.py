"""``python -m honesteval.cli``: the command line, as the ``honesteval`` script runs it."""

from honesteval.cli import command

command()
