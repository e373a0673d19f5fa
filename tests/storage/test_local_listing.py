"""The local backend's lazy, sorted walk lists exactly what a full sort of the keys gives.

Property-style: many random key sets with nested folders and names that sort around `/`
(`-` < `/` < `0`), each checked against sorting all keys in UTF-8 byte order and filtering.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from storage import LocalObjectStore, StorageError, open_store

pytestmark = pytest.mark.unit

ALPHABET = ["a", "b", "a-", "a0", "ab", "é", "z", "b.c"]


def _random_keys(rnd: random.Random) -> list[str]:
    keys: set[str] = set()
    for _ in range(rnd.randint(1, 40)):
        depth = rnd.randint(1, 4)
        keys.add("/".join(rnd.choice(ALPHABET) for _ in range(depth)))
    # A key cannot also be a folder of other keys (local FS and MinIO alike): drop folders.
    return [k for k in keys if not any(o.startswith(k + "/") for o in keys)]


def _expected(keys: list[str], prefix: str, start_after: str | None) -> list[str]:
    ordered = sorted(keys, key=lambda k: k.encode("utf-8"))
    out = [k for k in ordered if k.startswith(prefix)]
    if start_after is not None:
        out = [k for k in out if k.encode("utf-8") > start_after.encode("utf-8")]
    return out


def _probes(rnd: random.Random, keys: list[str]) -> list[str]:
    """Start keys and prefixes: existing keys, their folders, and strings between them."""
    found = list(keys) + [k.rsplit("/", 1)[0] + "/" for k in keys if "/" in k]
    found += [k[: rnd.randint(0, len(k))] for k in keys]
    found += ["/".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 3))) for _ in range(5)]
    return found


@pytest.mark.parametrize("seed", range(25))
def test_walk_matches_full_sort(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    keys = _random_keys(rnd)
    store = LocalObjectStore(tmp_path / "repo")
    for k in keys:
        store.put(k, b".")

    assert [o.key for o in store.list()] == _expected(keys, "", None)
    probes = _probes(rnd, keys)
    for probe in rnd.sample(probes, min(len(probes), 30)):
        assert [o.key for o in store.list(start_after=probe)] == _expected(keys, "", probe)
        prefix = probe if probe.endswith("/") or rnd.random() < 0.5 else probe[:-1]
        after = rnd.choice([*probes, None])
        got = [o.key for o in store.list(prefix, start_after=after)]
        assert got == _expected(keys, prefix, after), (prefix, after)

    # Paging with start_after = the previous page's last key reassembles the listing.
    max_keys = rnd.randint(1, 7)
    paged: list[str] = []
    cursor: str | None = None
    while True:
        page = store.list_page("", cursor, max_keys=max_keys)
        assert len(page.objects) <= max_keys
        paged += [o.key for o in page.objects]
        if page.next_start_after is None:
            break
        cursor = page.next_start_after
    assert paged == _expected(keys, "", None)


def test_start_after_skips_earlier_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page after a start key opens only the folders on the way to it and after it."""
    import os

    store = LocalObjectStore(tmp_path / "repo")
    for d in range(20):
        for f in range(5):
            store.put(f"log/{d:02d}/{f}", b".")
    opened: list[str] = []
    real = os.scandir

    def counting(path: object) -> object:
        opened.append(Path(str(path)).name)
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", counting)
    page = store.list_page("log/", start_after="log/18/4", max_keys=3)
    assert [o.key for o in page.objects] == ["log/19/0", "log/19/1", "log/19/2"]
    assert opened == ["log", "18", "19"]


def test_open_refuses_a_file_and_the_constructor_touches_nothing(tmp_path: Path) -> None:
    file = tmp_path / "repo"
    file.write_bytes(b"not a folder")
    LocalObjectStore(file)  # builds without looking at the disk
    with pytest.raises(StorageError, match="not a directory"):
        open_store(str(file))
    missing = tmp_path / "new" / "repo"
    store = open_store(str(missing))
    with store.open_writer("a/b") as writer:  # the temp file is made here, not before
        writer.write(b"x")
    assert store.get("a/b") == b"x" and missing.is_dir()


def test_folder_version_changes_with_every_key_added_or_removed(tmp_path: Path) -> None:
    """A listing of create-only keys may be reused while the token is equal: every add or
    delete of a key directly in the folder changes it at once, with no clock involved (two
    changes within one tick of the kernel's coarse mtime clock included)."""
    store = open_store(str(tmp_path))
    assert isinstance(store, LocalObjectStore)
    assert store.folder_version("j/") == ""  # no folder: no keys
    store.put_if_absent("j/a", b"1")
    first = store.folder_version("j/")
    assert first and store.folder_version("j/") == first  # nothing changed: the same token
    store.put_if_absent("j/b", b"2")
    second = store.folder_version("j/")
    store.put_if_absent("j/c/d", b"3")  # a sub-folder appears: a change too
    third = store.folder_version("j/")
    store.put_if_absent("j/c/e", b"4")  # inside a sub-folder: not a key directly in j/
    assert store.folder_version("j/") == third
    store.delete("j/a")
    fourth = store.folder_version("j/")
    assert len({first, second, third, fourth}) == 4
    store.put_if_absent("j/a", b"1")
    assert store.folder_version("j/") == third  # the same names again
