"""Running work on threads with the bytes in flight bounded, not only the number of tasks.

A copy-on-write rewrite holds its file group's bytes several times over (the base file, the
new file being encoded, its copy for the PUT). Files grow with the table up to
`parquet_max_file_size`, so `write_parallelism` rewrites of the largest files at once would
make a writer's peak grow with the table; a byte budget keeps it bounded whatever the file
sizes, and costs nothing while files are small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def bounded_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int,
    budget: int,
    cost: Callable[[T], int],
) -> list[R]:
    """`fn` over `items` on up to `workers` threads, results in the items' order. An item
    starts only while the costs of the items running, its own included, stay within
    `budget`; one costlier than the budget runs when nothing else does. Items start in
    order (a large one is not overtaken by smaller ones after it, so none waits forever).
    The first error is raised once the running items are done; the others never start."""
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    out: dict[int, R] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(min(workers, len(items)), "flowledger-inflight") as pool:
        running: dict[Future[R], tuple[int, int]] = {}
        used = 0
        nxt = 0
        while running or (nxt < len(items) and error is None):
            while error is None and nxt < len(items) and len(running) < workers:
                c = max(0, cost(items[nxt]))
                if running and used + c > budget:
                    break
                running[pool.submit(fn, items[nxt])] = (nxt, c)
                used += c
                nxt += 1
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                i, c = running.pop(fut)
                used -= c
                exc = fut.exception()
                if exc is None:
                    out[i] = fut.result()
                elif error is None:
                    error = exc  # nothing more starts; the running items finish
    if error is not None:
        raise error
    return [out[i] for i in range(len(items))]
