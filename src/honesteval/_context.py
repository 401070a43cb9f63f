"""Context shared by the trial runner and the targets that need more than the seed."""

from __future__ import annotations

import contextvars

#: The trial number of the trial running in this context (the command target reads it for
#: ``HONESTEVAL_TRIAL``; the adapter protocol itself only carries the seed).
current_trial: contextvars.ContextVar[int] = contextvars.ContextVar("current_trial", default=0)
