"""Where everything lives under a table's root (see docs/timeline-protocol.md)."""

from __future__ import annotations

from .errors import InvalidInstant
from .instant import SEQ_WIDTH, Instant, format_name, validate_time

TIMELINE = "_timeline/"
INSTANTS = TIMELINE + "instants/"  # one object per instant state
LOG = TIMELINE + "log/"  # the serialization point: one create-only object per completion
HEARTBEATS = TIMELINE + "heartbeats/"
DATA = "data/"


def instant_key(i: Instant) -> str:
    return INSTANTS + format_name(i)


def instant_prefix(time: str) -> str:
    return f"{INSTANTS}{time}."


def log_key(seq: int) -> str:
    return f"{LOG}{seq:0{SEQ_WIDTH}d}"


def log_seq(key: str) -> int:
    return int(key[len(LOG) :])


def heartbeat_key(time: str) -> str:
    return HEARTBEATS + time


def data_prefix(time: str) -> str:
    """Every data file of an instant lives under this prefix (found again by rollback)."""
    return f"{DATA}{time}/"


def data_key(time: str, partition: str, name: str) -> str:
    partition = partition.strip("/")
    middle = f"{partition}/" if partition else ""
    return f"{data_prefix(time)}{middle}{name}"


def data_instant_time(key: str) -> str | None:
    """The instant time that wrote a data file, from its `data_key` (which may sit under a
    prefix); None if the key is not a data key."""
    parts = key.split("/")
    for k, part in enumerate(parts[:-1]):
        if part + "/" == DATA:
            try:
                return validate_time(parts[k + 1])
            except InvalidInstant:
                return None
    return None
