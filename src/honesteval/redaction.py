"""Secrets never leave the process: redaction of key values and bearer tokens, and child
environments without the key variables.

A *secret variable* is an environment variable a project names as a key (``api_key_env`` of
the adapter or the judge). Its value is registered here when the project loads, and
:func:`redact` replaces it (and any ``Bearer <token>``) in a text. honesteval applies it where
text leaves the process: the error text of a trial
(:func:`describe`), every record and JSON file written
(:func:`honesteval.store.state_dir.atomic_write_text`), every file it writes into an evaluation
workspace (``Workspace.write`` of the steps scorer), what the CLI prints, and what the Prefect
loggers send. A server that echoes the Authorization header back in an error body (proxies and
gateways do), or a judge that repeats a key in its verdict, therefore leaks nothing.

Values shorter than :data:`MIN_SECRET_LEN` are not redacted (they would blank out ordinary
words); a real API key is far longer.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any, TextIO

MASK = "[REDACTED]"
MIN_SECRET_LEN = 6
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=\-]{4,}")
_BEARER_WORD = re.compile(r"(?i)bearer")

_names: set[str] = set()
_lock = threading.Lock()


def register_secret_env(*names: str | None) -> None:
    """Treat the values of these environment variables as secrets from now on."""
    with _lock:
        _names.update(n for n in names if n)
    install_log_redaction()


def secret_env_names() -> frozenset[str]:
    with _lock:
        return frozenset(_names)


def _secret_values() -> list[str]:
    values = {os.environ.get(n, "") for n in secret_env_names()}
    forms: set[str] = set()
    for v in values:
        if len(v) >= MIN_SECRET_LEN:
            forms.add(v)
            forms.add(json.dumps(v)[1:-1])  # as it appears inside a JSON string
    return sorted(forms, key=len, reverse=True)  # longest first: no partial leftovers


def redact(text: str) -> str:
    """``text`` with every registered secret value and bearer token replaced by a mask."""
    if not text:
        return text
    if _names:  # read without the lock: a name registered meanwhile is seen next call
        for value in _secret_values():
            if value in text:
                text = text.replace(value, MASK)
    if _BEARER_WORD.search(text) is None:  # most texts: no substitution pass at all
        return text
    return _BEARER.sub(rf"\1\2{MASK}", text)


#: The most characters of error text a record, log line or artifact keeps of one fault.
ERROR_TEXT_CHARS = 1000


def describe(exc: BaseException) -> str:
    """The error text of a fault, as records, logs and artifacts show it: every piece of error
    text honesteval keeps is made here, bounded and with secrets redacted."""
    return redact(f"{type(exc).__name__}: {exc}")[:ERROR_TEXT_CHARS]


def redact_obj(obj: Any) -> Any:
    """Redact every string inside a JSON-like value (dicts, lists, tuples, strings)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a command target or a shell step: the parent's without the secret
    variables (a child gets a key only when the project's ``env`` passes it explicitly)."""
    hidden = secret_env_names()
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env.update(extra or {})
    return env


def _redact_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a broken format string is the logger's problem, not ours
        return record
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None and redact(str(exc)) != str(exc):  # its traceback would print it
        record.msg, record.args = f"{clean} ({type(exc).__name__}: {redact(str(exc))})", None
        record.exc_info = None
        record.exc_text = None
    return record


_installed = False


def install_log_redaction() -> None:
    """Redact every log record as it is created, whichever logger or handler it goes to
    (Prefect's API log handler, its console handler, a user's own). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        make = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return _redact_record(make(*args, **kwargs))

        logging.setLogRecordFactory(factory)
        _installed = True


class RedactingStream:
    """A text stream that redacts what is written to it (the CLI's stdout and stderr)."""

    def __init__(self, inner: TextIO):
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
