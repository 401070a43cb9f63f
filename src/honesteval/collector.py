"""The cyclic garbage collector paused while a process imports what it keeps for good.

A process that imports Prefect allocates a million long-lived objects (modules, classes,
pydantic schemas) and no garbage worth collecting. With the collector on, each pass of the
oldest generation walks everything imported so far, a share of the imports' CPU that grows
with them; the passes of the run that follows walk it all again. The reusable server's boot
and a flow command's imports (the CLI's ``honesteval`` script) run with the collector off;
at their end what they built is frozen out of later passes (``gc.freeze``) and collection
resumes (docs/performance.md, "The first command's boot"). Standard library only: the CLI
pauses it before any other import.
"""

from __future__ import annotations

import gc

_paused = False


def pause_for_imports() -> None:
    """Turn the cyclic collector off until :func:`resume_after_imports` (if it is on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_after_imports() -> None:
    """If :func:`pause_for_imports` turned the collector off: freeze what is alive now out of
    later passes and turn it back on. Otherwise nothing (a caller of the Python API keeps its
    collector as it set it)."""
    global _paused
    if _paused:
        gc.freeze()
        gc.enable()
        _paused = False
