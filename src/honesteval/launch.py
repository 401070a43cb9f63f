"""The ``honesteval`` script: a command that runs flows starts the reusable Prefect server
before the command line's own imports (typer, the command modules), then runs the CLI.

The server's boot is the first command of a sitting's critical path (docs/performance.md,
"The first command's boot"): every import the CLI makes before the server process exists
is added to the command's wall time on a machine with a core to spare. This module imports
only the standard library and :mod:`honesteval.server.sitting` (itself standard library)
before it starts the server. The command still calls
:func:`~honesteval.cli.common.start_server_early`, which then joins the server started here;
an error here (a bad setting, a lock held too long) is left for it to report in one line.
"""

from __future__ import annotations

import contextlib
import sys

#: The commands that run flows (each calls ``start_server_early`` first).
FLOW_COMMANDS = frozenset({"evaluate", "gate", "rescore", "finalize", "demo"})


def runs_flows(words: list[str]) -> bool:
    """Whether the command line ``words`` (without the program) is a command that runs flows
    and does not ask for its help."""
    return bool(words) and words[0] in FLOW_COMMANDS and not {"-h", "--help"} & set(words)


def start_before_imports(words: list[str]) -> None:
    """Start (or join) the reusable server now if ``words`` is a command that runs flows."""
    if not runs_flows(words):
        return
    from honesteval.errors import HonestevalError
    from honesteval.server.sitting import prefect_defaults, start_early

    prefect_defaults()  # the server's environment is the one the command gives Prefect
    with contextlib.suppress(HonestevalError, OSError):  # the command reports these itself
        start_early()


def command() -> None:
    """The ``honesteval`` script."""
    try:
        start_before_imports(sys.argv[1:])
    except KeyboardInterrupt:  # before the CLI's signal handling exists
        from honesteval.cli.common import EXIT_INTERRUPTED
        from honesteval.interrupts import STOPPED_LINE

        print(STOPPED_LINE, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    from honesteval.cli import command as cli_command

    cli_command()
