"""Local backend LIST with `start_after`: the lazy sorted walk vs the full walk it replaced.

Both list the same folder tree in the same run: one page of 1,000 keys after a start key 90%
of the way through the listing (what "what is new since X" asks). Request count is one LIST
either way, so the table reports seconds and directory entries read (`os.scandir`).
Layouts: flat (the timeline log, `_timeline/log/<seq>`) and nested (`data/<day>/<hour>/<file>`).

`python -m bench local_list [--quick]`
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import console, table
from storage import LocalObjectStore, StoreSettings
from storage.keys import RESERVED_PREFIX
from storage.objectstore import ListPage

PAGE = 1000


class _Counter:
    """Counts directory entries read through `os.scandir` (os.walk uses it too)."""

    def __init__(self) -> None:
        self.entries = 0
        self._real = os.scandir

    def __enter__(self) -> _Counter:
        counter, real = self, self._real

        class _Counted:
            def __init__(self, path: Any) -> None:
                self._it = real(path)

            def __enter__(self) -> _Counted:
                return self

            def __exit__(self, *exc: object) -> None:
                self._it.close()

            def close(self) -> None:
                self._it.close()

            def __iter__(self) -> _Counted:
                return self

            def __next__(self) -> os.DirEntry[str]:
                e = next(self._it)
                counter.entries += 1
                return e

        os.scandir = _Counted  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.scandir = self._real


def _old_walk(root: Path, prefix: str) -> list[str]:
    """The old full walk, kept as the baseline: every key under the folder, then one sort."""
    folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
    keys: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root / folder):
        rel = Path(dirpath).relative_to(root).as_posix()
        base = "" if rel == "." else rel + "/"
        keys.extend(base + f for f in filenames if (base + f).startswith(prefix))
        dirnames[:] = [
            d
            for d in dirnames
            if not d.startswith(RESERVED_PREFIX)
            and ((base + d + "/").startswith(prefix) or prefix.startswith(base + d + "/"))
        ]
    keys.sort(key=lambda k: k.encode("utf-8"))
    return keys


def _old_list_page(store: LocalObjectStore, prefix: str, start_after: str) -> ListPage:
    from storage.local import _info, key_path

    keys = _old_walk(store.root, prefix)
    after = start_after.encode("utf-8")
    keys = [k for k in keys if k.encode("utf-8") > after]
    page = keys[:PAGE]
    objects = tuple(_info(k, os.stat(key_path(store.root, k))) for k in page)
    return ListPage(objects, page[-1] if len(keys) > PAGE and page else None)


def _make(root: Path, keys: list[str]) -> None:
    for k in keys:
        path = root / k
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b".")


def _layouts(n: int) -> dict[str, tuple[str, list[str]]]:
    flat = [f"_timeline/log/{i:012d}" for i in range(n)]
    nested = [f"data/{i // 2400:04d}/{i // 100 % 24:02d}/{i:09d}.parquet" for i in range(n)]
    return {"flat": ("_timeline/log/", flat), "nested": ("data/", nested)}


def _measure(fn: Callable[[], ListPage], rounds: int) -> tuple[float, int, ListPage]:
    samples, entries, page = [], 0, None
    for _ in range(rounds):
        with _Counter() as c:
            t0 = time.perf_counter()
            page = fn()
            samples.append(time.perf_counter() - t0)
        entries = c.entries
    assert page is not None
    return statistics.median(samples), entries, page


def run(sizes: list[int], rounds: int) -> None:
    t = table(
        f"Local FS: one LIST page of {PAGE:,} keys after a key 90% through",
        "layout / keys",
        "full walk ms",
        "sorted walk ms",
        "ratio",
        "entries read (full / sorted)",
        "requests",
    )
    for n in sizes:
        for name, (prefix, keys) in _layouts(n).items():
            with tempfile.TemporaryDirectory(prefix="flowledger-bench-list-") as tmp:
                root = Path(tmp) / "repo"
                _make(root, keys)
                store = LocalObjectStore(root, StoreSettings(fsync=False))
                start = sorted(keys)[int(n * 0.9)]
                old_s, old_e, old_p = _measure(
                    functools.partial(_old_list_page, store, prefix, start), rounds
                )
                store.stats.reset()
                new_s, new_e, new_p = _measure(
                    functools.partial(store.list_page, prefix, start, PAGE), rounds
                )
                requests = store.stats.snapshot().get("LIST", 0) // rounds
                assert [o.key for o in new_p.objects] == [o.key for o in old_p.objects]
                assert new_p.next_start_after == old_p.next_start_after
                t.add_row(
                    f"{name} / {n:,}",
                    f"{old_s * 1000:.1f}",
                    f"{new_s * 1000:.1f}",
                    f"{new_s / old_s:.2f}x",
                    f"{old_e:,} / {new_e:,}",
                    f"LIST={requests} each",
                )
    console.print(t)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    quick = "--quick" in args
    run([2_000] if quick else [10_000, 100_000], 3 if quick else 5)


if __name__ == "__main__":
    main()
