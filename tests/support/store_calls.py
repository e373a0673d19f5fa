"""Count an object store's reads and listings by kind, in process: the store's methods are
wrapped on the instance, so every table opened on it is counted."""

from __future__ import annotations

from collections import Counter
from typing import Any

READS = ("get_object", "open_read", "list", "list_page")


def counted_calls(store: Any, names: tuple[str, ...] = READS) -> Counter[str]:
    """Wrap `names` of `store`; the counter fills as they are called."""
    calls: Counter[str] = Counter()
    for name in names:
        inner = getattr(store, name)

        def call(*a: Any, _inner: Any = inner, _name: str = name, **k: Any) -> Any:
            calls[_name] += 1
            return _inner(*a, **k)

        setattr(store, name, call)
    return calls
