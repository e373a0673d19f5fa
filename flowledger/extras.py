"""Optional parts of the install (pyproject's extras): a command that needs one says which.

The core install is what storage, timeline and provenance need; the NYC flights pipeline
needs the `demo` extra (its data package and PySpark), `serve` the `server` extra.
"""

from __future__ import annotations

import importlib.util

from .errors import FlowledgerError


def missing_modules(*modules: str) -> list[str]:
    """The top-level modules of `modules` that are not installed (found without importing)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_extra(extra: str, purpose: str, *modules: str) -> None:
    """Raise one line naming the extra to install when any of `modules` is missing."""
    missing = missing_modules(*modules)
    if missing:
        raise FlowledgerError(
            f"{purpose} needs the '{extra}' extra ({', '.join(missing)} not installed): "
            f"pip install 'flowledger[{extra}]'"
        )
