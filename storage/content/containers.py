"""Containers: object-store prefixes that hold resource claims, with quotas and backpressure."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..objectstore import ObjectStore
from .errors import ContainerFull
from .settings import ContentRepositorySettings

log = logging.getLogger("storage.content")


@dataclass(frozen=True)
class Container:
    """`nifi.content.repository.directory.<name>`: one prefix (possibly its own bucket)."""

    name: str
    store: ObjectStore


class ContainerSet:
    """Round-robin choice of a container for each new resource claim, skipping full ones."""

    def __init__(
        self,
        containers: Sequence[Container],
        settings: ContentRepositorySettings,
        usage: Callable[[str], int],
        relieve: Callable[[], object],
    ) -> None:
        if not containers:
            raise ValueError("a content repository needs at least one container")
        self.by_name = {c.name: c for c in containers}
        self.order = list(containers)
        self.settings = settings
        self._usage = usage
        self._relieve = relieve  # runs archive cleanup and refreshes usage
        self._index = itertools.count()
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return [c.name for c in self.order]

    def capacity(self, name: str) -> int | None:
        self.by_name[name]  # KeyError names an unknown container
        return self.settings.max_bytes

    def usable_space(self, name: str) -> int | None:
        cap = self.capacity(name)
        return None if cap is None else max(0, cap - self._usage(name))

    def usage_percent(self, name: str) -> float:
        cap = self.settings.max_bytes
        return 0.0 if cap is None else 100.0 * self._usage(name) / cap

    def under_backpressure(self, name: str) -> bool:
        if self.settings.max_bytes is None:
            return False
        return self.usage_percent(name) >= self.settings.backpressure_percentage

    def next_index(self) -> int:
        with self._lock:
            return next(self._index)

    def choose(self, index: int) -> Container:
        """The next container not under backpressure; waits (and logs why) while all are."""
        n = len(self.order)
        started = time.monotonic()
        logged = False
        while True:
            for i in range(index, index + n):
                candidate = self.order[i % n]
                if not self.under_backpressure(candidate.name):
                    if logged:
                        log.warning("content repository: backpressure relieved, writers resume")
                    return candidate
            waited = time.monotonic() - started
            limit = self.settings.backpressure_max_wait
            detail = ", ".join(f"{c.name} at {self.usage_percent(c.name):.1f}%" for c in self.order)
            if limit is not None and waited >= limit:
                raise ContainerFull(
                    f"every content container is over its backpressure limit of "
                    f"{self.settings.backpressure_percentage:.0f}% of max_bytes "
                    f"({self.settings.max_bytes} bytes): {detail}; waited {waited:.1f}s. "
                    "Remove references, lower archive retention or raise max_bytes"
                )
            if not logged:
                log.warning(
                    "content repository: writers wait, every container is over the "
                    "backpressure limit of %.0f%% of max_bytes (%s); waiting for archive "
                    "cleanup to free space",
                    self.settings.backpressure_percentage,
                    detail,
                )
                logged = True
            self._relieve()
            time.sleep(0.2 if limit is not None and limit < 5 else 1.0)
