"""`flowledger demo`: everything that works so far, end to end, on one repository."""

from __future__ import annotations

import threading
import time
import uuid

from rich.console import Console
from rich.table import Table

from storage import Conflict, ObjectStore, open_store

from .demos.archival import demo_archival
from .demos.content import demo_content
from .demos.provenance import demo_provenance
from .demos.timeline import demo_timeline


def _race(store: ObjectStore, key: str, writers: int) -> list[str]:
    """`writers` threads try to create the same key at once; returns the winners."""
    barrier = threading.Barrier(writers)
    winners: list[str] = []

    def attempt(name: str) -> None:
        barrier.wait()
        try:
            store.put_if_absent(key, f"written by {name}".encode())
            winners.append(name)
        except Conflict:
            pass

    threads = [
        threading.Thread(target=attempt, args=(f"writer-{i}",), name=f"flowledger-demo-writer-{i}")
        for i in range(writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners


def demo_object_store(store: ObjectStore, console: Console) -> None:
    console.rule("[bold]1. Object store: conditional writes")
    run = f"demo/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    store.put_if_absent(f"{run}/hello.txt", b"hello, flowledger")
    console.print(f"created [cyan]{store.url(run + '/hello.txt')}[/] with If-None-Match: *")
    try:
        store.put_if_absent(f"{run}/hello.txt", b"second attempt")
    except Conflict as exc:
        console.print(f"a second create-only write is refused: [yellow]{exc}[/]")

    store.put(f"{run}/counter", b"0")
    _, info = store.get_object(f"{run}/counter")
    store.put_if_match(f"{run}/counter", b"1", info.etag)
    try:
        store.put_if_match(f"{run}/counter", b"1 (stale)", info.etag)
    except Conflict:
        console.print("compare-and-swap: the first update wins, a stale etag gets a conflict")

    table = Table("race", "writers", "winners", "object holds")
    for i in range(3):
        key = f"{run}/race-{i}"
        winners = _race(store, key, 16)
        table.add_row(str(i), "16", str(len(winners)), store.get(key).decode())
    console.print(table)
    console.print(f"requests so far: {store.stats.snapshot()}")


def run_demo(repo: str | None, console: Console) -> None:
    store = open_store(repo)
    console.print(f"repository: [bold]{store.uri}[/]")
    demo_object_store(store, console)
    demo_content(store, console)
    demo_provenance(store, console)
    demo_timeline(store, console)
    demo_archival(store, console)
