"""``module:name`` refs imported from a project folder: the one loader the kinds share.

Apart from the kinds so that both the in-process and the isolated Python target use it
without importing each other.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError, did_you_mean

_import_lock = threading.Lock()


def module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def load_callable(root: Path, ref: str) -> Callable[..., Any]:
    """Import ``module:function``, looking in the project folder first.

    A module that lives in the project is loaded under a name private to that project, so two
    projects that both have a ``target.py`` never see each other's (``sys.modules`` would
    otherwise hand the first one to both). The project folder is first on ``sys.path`` while it
    loads, so its own imports of sibling modules work.
    """
    module_name, _, func_name = ref.partition(":")
    with _import_lock:
        file = module_file(root, module_name)
        try:
            if file is None:
                module = importlib.import_module(module_name)
            else:
                tag = hashlib.sha256(str(root).encode()).hexdigest()[:10]
                unique = f"_honesteval_project_{tag}.{module_name}"
                loaded = sys.modules.get(unique)
                if loaded is not None:
                    module = loaded
                else:
                    spec = importlib.util.spec_from_file_location(unique, file)
                    assert spec is not None and spec.loader is not None
                    module = importlib.util.module_from_spec(spec)
                    sys.path.insert(0, str(root))
                    try:
                        spec.loader.exec_module(module)
                    finally:
                        sys.path.remove(str(root))
                    sys.modules[unique] = module
        except ImportError as exc:
            raise ConfigError(f"cannot import {module_name!r} for {ref!r}: {exc}") from None
        except Exception as exc:  # the user's module raised while loading
            raise ConfigError(
                f"importing {module_name!r} for {ref!r} raised {type(exc).__name__}: {exc}"
            ) from None
    fn: object = getattr(module, func_name, None)
    if not callable(fn):
        where = repr(module_name) if file is None else f"{module_name!r} ({file})"
        functions = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise ConfigError(
            f"{ref!r}: module {where} has no function {func_name!r}"
            + did_you_mean(func_name, functions)
        )
    return fn
