"""What `check_table` reports (timeline/check.py): one `CheckProblem` per thing wrong, one
`CheckRepair` per repair tried, and the `CheckReport` holding both (docs/tables.md,
"Checking a table")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ProblemKind(StrEnum):
    """What is wrong, one word per kind of problem (the `kind` of `CheckProblem`)."""

    MISSING = "missing"  # a needed file is gone
    DAMAGED = "damaged"  # a needed file fails its checksum (or its size)
    PHANTOM_PENDING = "phantom_pending"  # a completed or archived instant listed as pending
    MISSING_PROPERTIES = "missing_properties"
    DUPLICATE_KEY = "duplicate_key"
    RECORD_INDEX = "record_index"  # unreadable or disagreeing with the files
    BLOOM_SIDECAR = "bloom_sidecar"
    TIMELINE = "timeline"  # the timeline itself could not be read


#: Kinds `repair=True` can fix.
REPAIRABLE = frozenset(
    {
        ProblemKind.PHANTOM_PENDING,
        ProblemKind.MISSING_PROPERTIES,
        ProblemKind.RECORD_INDEX,
        ProblemKind.BLOOM_SIDECAR,
    }
)
#: Keys named in one problem line at most.
SHOWN_KEYS = 5


@dataclass(frozen=True)
class CheckProblem:
    """One thing wrong with the table, said in one line (`message`); `subject` names the
    object or instant it is about."""

    kind: ProblemKind
    subject: str
    message: str

    @property
    def repairable(self) -> bool:
        return self.kind in REPAIRABLE

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class CheckRepair:
    """What `repair=True` did about a problem (`done`), or why it did not."""

    problem: CheckProblem
    done: bool
    message: str

    def __str__(self) -> str:
        return f"{'repaired' if self.done else 'not repaired'}: {self.message}"


@dataclass(frozen=True)
class CheckReport:
    uri: str
    #: What was wrong when the check ran (before any repair).
    problems: tuple[CheckProblem, ...]
    repairs: tuple[CheckRepair, ...] = ()
    files_checked: int = 0
    snapshots_checked: int = 0

    @property
    def remaining(self) -> tuple[CheckProblem, ...]:
        """Problems still there after the repairs (all of them without `repair`)."""
        fixed = {r.problem for r in self.repairs if r.done}
        return tuple(p for p in self.problems if p not in fixed)

    @property
    def ok(self) -> bool:
        return not self.remaining

    def to_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "ok": self.ok,
            "files_checked": self.files_checked,
            "snapshots_checked": self.snapshots_checked,
            "problems": [
                {"kind": p.kind, "subject": p.subject, "message": p.message} for p in self.problems
            ],
            "repairs": [
                {
                    "kind": r.problem.kind,
                    "subject": r.problem.subject,
                    "done": r.done,
                    "message": r.message,
                }
                for r in self.repairs
            ],
        }


def cut(exc: Exception) -> str:
    """An error's message on one line, at most 200 characters."""
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


__all__ = [
    "REPAIRABLE",
    "SHOWN_KEYS",
    "CheckProblem",
    "CheckRepair",
    "CheckReport",
    "ProblemKind",
    "cut",
]
