"""Post-commit hooks: what runs after an instant completed (like delta-rs's post-commit hooks).

`Table.post_commit` is an explicit list, chosen when the table object is built (by default
from its settings: automatic archival, see archive/hook.py). The commit path calls each hook
once per completed instant, after the completion is durable and materialized; a hook must
not fail the commit it follows (it logs and returns instead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .metadata import Entry
    from .table import Table


class PostCommitHook(Protocol):
    def __call__(self, table: Table, entry: Entry) -> None: ...


__all__ = ["PostCommitHook"]
