"""A reference model of a keyed table for differential tests: a dict of records per step,
with the rules of docs/tables.md written as plainly as possible."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
COLUMNS = ("id", "ts", "p", "v")


@dataclass
class KeyedModel:
    merge_mode: str  # commit_time | event_time
    key_scope: str  # global | partition
    #: state after each step: identity -> (row, step that wrote it)
    states: list[dict[Any, tuple[Row, int]]] = field(default_factory=lambda: [{}])

    def ident(self, row: Row) -> Any:
        return row["id"] if self.key_scope == "global" else (row["p"], row["id"])

    def _combine(self, rows: list[Row], ordered: bool) -> list[Row]:
        best: dict[Any, Row] = {}
        for r in rows:
            k = self.ident(r)
            old = best.get(k)
            if old is None or not ordered or _ord(r.get("ts")) >= _ord(old.get("ts")):
                best[k] = r
        return list(best.values())

    def _wins(self, stored: Row, incoming: Row, has_ordering: bool) -> bool:
        if self.merge_mode != "event_time" or not has_ordering:
            return True
        return _ord(incoming.get("ts")) >= _ord(stored.get("ts"))

    def existing(self, rows: list[Row]) -> list[Any]:
        return [self.ident(r) for r in rows if self.ident(r) in self.states[-1]]

    def upsert(self, rows: list[Row], insert_only: bool = False) -> None:
        state = dict(self.states[-1])
        step = len(self.states)
        for r in self._combine(rows, self.merge_mode == "event_time"):
            k = self.ident(r)
            if k in state and (insert_only or not self._wins(state[k][0], r, True)):
                continue
            state[k] = (dict(r), step)
        self.states.append(state)

    def delete(self, keys: list[Row], has_ordering: bool) -> None:
        state = dict(self.states[-1])
        ordered = has_ordering and self.merge_mode == "event_time"
        for r in self._combine(keys, ordered):
            k = self.ident(r)
            if k in state and self._wins(state[k][0], r, has_ordering):
                del state[k]
        self.states.append(state)

    def delete_where_v(self, value: str) -> None:
        state = {k: rv for k, rv in self.states[-1].items() if rv[0]["v"] != value}
        self.states.append(state)

    def combined(self, rows: list[Row]) -> list[Row]:
        """A batch's rows after duplicate keys are combined, as an upsert combines them."""
        return self._combine(rows, self.merge_mode == "event_time")

    def insert_overwrite(self, rows: list[Row]) -> None:
        """Replace the partitions the rows hold once duplicate keys are combined (a partition
        whose rows all lost to another partition's is not replaced, as in Hudi)."""
        rows = self.combined(rows)
        parts = {r["p"] for r in rows}
        state = {k: rv for k, rv in self.states[-1].items() if rv[0]["p"] not in parts}
        step = len(self.states)
        for r in rows:
            state[self.ident(r)] = (dict(r), step)
        self.states.append(state)

    def unchanged(self) -> None:
        """A step that changes no record (compaction, clustering, an index build)."""
        self.states.append(self.states[-1])

    def versions(self, times: list[str]) -> set[tuple[Any, ...]]:
        """Every record version any step held, as `_img` states it."""
        return {
            img
            for state in self.states
            for rs in state.values()
            if (img := _img(rs, times)) is not None
        }

    # -- expectations ------------------------------------------------------------------------
    def snapshot(self, step: int, times: list[str]) -> list[Row]:
        return sorted(
            ({**r, "_flowledger_commit_time": times[s]} for r, s in self.states[step].values()),
            key=_sort_key,
        )

    def incremental(self, begin: int, end: int, times: list[str]) -> list[Row]:
        return [
            r
            for r in self.snapshot(end, times)
            if begin < times.index(r["_flowledger_commit_time"]) <= end
        ]

    def cdc(self, begin: int, end: int, times: list[str]) -> list[tuple[Any, ...]]:
        out = []
        for step in range(begin + 1, end + 1):
            before, after = self.states[step - 1], self.states[step]
            for k, (row, s) in after.items():
                if s == step:
                    old = before.get(k)
                    op = "u" if old is not None else "i"
                    out.append((op, times[step], _img(old, times), _img((row, s), times)))
            for k, old in before.items():
                if k not in after:
                    out.append(("d", times[step], _img(old, times), None))
        return sorted(out, key=repr)


def _img(rs: tuple[Row, int] | None, times: list[str]) -> tuple[Any, ...] | None:
    if rs is None:
        return None
    row, s = rs
    return (*(row[c] for c in COLUMNS), times[s])


def _ord(v: Any) -> tuple[int, Any]:
    return (0, 0) if v is None else (1, v)


def _sort_key(r: Row) -> tuple[Any, ...]:
    return (r["p"], r["id"])


def table_rows(data: Any) -> list[Row]:
    """A read's rows as the model states them (user columns and the commit time)."""
    rows = [
        {**{c: r[c] for c in COLUMNS}, "_flowledger_commit_time": r["_flowledger_commit_time"]}
        for r in data.to_pylist()
    ]
    return sorted(rows, key=_sort_key)


def cdc_rows(data: Any) -> list[tuple[Any, ...]]:
    def img(d: Row | None) -> tuple[Any, ...] | None:
        return None if d is None else (*(d[c] for c in COLUMNS), d["_flowledger_commit_time"])

    return sorted(
        ((r["op"], r["instant"], img(r["before"]), img(r["after"])) for r in data.to_pylist()),
        key=repr,
    )
