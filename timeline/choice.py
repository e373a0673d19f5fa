"""Named choices: a `StrEnum` whose values are the names stored in table properties, settings
and commit metadata, so a member and its name compare equal and what older tables hold reads
unchanged.

Every boundary (properties read from storage, CLI options, Spark options, settings built in
code) parses a name with `parse`, which refuses another in one line naming the values
offered. The keyed table's choices (timeline/keyed/policies.py) and the table settings' ones
(timeline/settings.py, timeline/partitioning.py) share this one base.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self


class Choice(StrEnum):
    """A choice among named values; members compare equal to their names."""

    @classmethod
    def parse(cls, name: object, what: str | None = None) -> Self:
        """The member named `name` (any case, surrounding blanks ignored); a ValueError
        naming `what` (by default the choice's own description) and the values offered
        otherwise."""
        if isinstance(name, cls):
            return name
        try:
            return cls(str(name).strip().lower())
        except ValueError:
            offered = ", ".join(m.value for m in cls)
            label = what or cls.describe()
            raise ValueError(f"{label} must be one of {offered}, not {name!r}") from None

    @classmethod
    def describe(cls) -> str:
        """What the choice is called in messages."""
        return cls.__name__


__all__ = ["Choice"]
