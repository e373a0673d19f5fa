"""One conformance suite, run unchanged against the local filesystem, moto's server and MinIO."""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from storage import (
    ByteRange,
    Conflict,
    InvalidKey,
    NotFound,
    ObjectStore,
    RangeNotSatisfiable,
    S3ObjectStore,
    UnsafeBackend,
)
from tests.support.backends import Backend
from tests.support.paths import REPO_ROOT

MiB = 1024 * 1024


def test_create_only(store: ObjectStore) -> None:
    info = store.put_if_absent("a/first", b"one")
    assert info.size == 3
    with pytest.raises(Conflict, match="a/first"):
        store.put_if_absent("a/first", b"two")
    assert store.get("a/first") == b"one"
    assert store.head("a/first").etag == info.etag


def test_compare_and_swap(store: ObjectStore) -> None:
    first = store.put("cas", b"v1")
    body, info = store.get_object("cas")
    assert body == b"v1" and info.etag == first.etag
    second = store.put_if_match("cas", b"v2", info.etag)
    assert second.etag != info.etag
    with pytest.raises(Conflict):
        store.put_if_match("cas", b"v3", info.etag)  # stale etag
    assert store.get("cas") == b"v2"
    with pytest.raises(Conflict):
        store.put_if_match("missing", b"x", info.etag)
    assert not store.exists("missing")


def test_same_size_rewrites_get_new_etags(store: ObjectStore) -> None:
    etags = {store.put("counter", b"%04d" % i).etag for i in range(20)}
    assert len(etags) == 20


def test_cas_counter_threads(store: ObjectStore) -> None:
    """8 threads increment one counter by CAS: no lost update. Each body names its writer, as
    the store's callers must (a read-back after a lost answer compares bytes to prove
    ownership). Threads switch often, as on a loaded machine, so that a server running in this
    process (moto) shows a check-then-store race if it has one."""
    store.put("counter", b"0")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)

    def bump(writer: int) -> int:
        conflicts = 0
        for _ in range(5):
            while True:
                body, info = store.get_object("counter")
                value = int(body.split(b":")[0]) + 1
                try:
                    store.put_if_match("counter", b"%d:%d" % (value, writer), info.etag)
                    break
                except Conflict:
                    conflicts += 1
        return conflicts

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(bump, range(8)))
    finally:
        sys.setswitchinterval(interval)
    assert store.get("counter").split(b":")[0] == b"40"


def test_ranged_reads(store: ObjectStore) -> None:
    data = bytes(range(256)) * 4
    store.put("r", data)
    assert store.get("r", 10, 5) == data[10:15]
    assert store.get("r", 1000) == data[1000:]
    assert store.get("r", 1020, 100) == data[1020:]  # clipped at the end, like S3
    assert store.get("r", 5, 0) == b""
    with store.open_read("r", 100, 50) as stream:
        assert stream.read() == data[100:150]
    with pytest.raises(RangeNotSatisfiable):
        store.get("r", 5000, 1)
    with pytest.raises(NotFound, match="nope"):
        store.get("nope")
    with pytest.raises(NotFound):
        store.head("nope")
    assert not store.exists("nope") and store.exists("r")


def test_listing_order_paging_and_start_after(store: ObjectStore) -> None:
    odd = ["a-c", "a/b", "a0", "a/bc/d", "b", "é/x", "Z"]
    for k in odd:
        store.put(k, b"x")
    keys = [o.key for o in store.list()]
    assert keys == sorted(odd, key=lambda k: k.encode())
    assert [o.key for o in store.list("a/")] == ["a/b", "a/bc/d"]
    assert [o.key for o in store.list("a/b")] == ["a/b", "a/bc/d"]
    assert [o.key for o in store.list("a")] == ["a-c", "a/b", "a/bc/d", "a0"]
    assert [o.key for o in store.list(start_after="a0")] == ["b", "é/x"]
    pages, cursor = [], None
    while True:
        page = store.list_page("", cursor, max_keys=3)
        pages.append([o.key for o in page.objects])
        if page.next_start_after is None:
            break
        cursor = page.next_start_after
    assert [k for p in pages for k in p] == keys and all(len(p) <= 3 for p in pages)


def test_listing_and_batch_delete_past_1000_keys(store: ObjectStore) -> None:
    keys = [f"many/{i:05d}" for i in range(1205)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: store.put(k, b"."), keys))
    store.put("other", b"keep")
    assert [o.key for o in store.list("many/")] == keys
    assert [o.key for o in store.list("many/", start_after="many/01100")] == keys[1101:]
    store.delete_many([*keys, "many/never-existed"])
    assert list(store.list("many/")) == []
    assert store.get("other") == b"keep"
    store.delete("other")
    store.delete("other")  # deleting a missing key is fine
    assert not store.exists("other")


def _race_threads(store: ObjectStore, key: str, n: int = 16) -> list[int]:
    barrier = threading.Barrier(n)
    winners: list[int] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent(key, f"writer-{i}".encode())
            winners.append(i)
        except Conflict:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return winners


def test_create_race_threads_one_winner(store: ObjectStore) -> None:
    for trial in range(5):
        winners = _race_threads(store, f"race/{trial}")
        assert len(winners) == 1
        assert store.get(f"race/{trial}") == f"writer-{winners[0]}".encode()


def _process_attempt(args: tuple[Backend, str, int, float]) -> bool:
    backend, key, i, start_at = args
    store = backend.open()
    store.exists("warm-up")  # connect before the start line
    time.sleep(max(0.0, start_at - time.time()))
    try:
        store.put_if_absent(key, f"proc-{i}".encode())
        return True
    except Conflict:
        return False


def test_create_race_processes_one_winner(backend: Backend) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(16) as pool:
        pool.map(abs, range(16))  # start every worker before the first trial
        for trial in range(3):
            key = f"prace/{trial}"
            start_at = time.time() + 1.0
            results = pool.map(_process_attempt, [(backend, key, i, start_at) for i in range(16)])
            assert results.count(True) == 1
            winner = results.index(True)
            assert backend.open().get(key) == f"proc-{winner}".encode()


def test_streaming_upload_and_abort(store: ObjectStore) -> None:
    chunk = os.urandom(MiB)
    digest = hashlib.sha256()
    with store.open_writer("big/stream") as w:
        for _ in range(20):  # 20 MiB: several parts on S3
            w.write(chunk)
            digest.update(chunk)
    assert store.head("big/stream").size == 20 * MiB
    h = hashlib.sha256()
    with store.open_read("big/stream") as stream:
        while block := stream.read(MiB):
            h.update(block)
    assert h.hexdigest() == digest.hexdigest()

    w = store.open_writer("big/aborted")
    w.write(chunk * 9)
    w.abort()
    assert not store.exists("big/aborted")
    with pytest.raises(RuntimeError), store.open_writer("big/failed") as w2:
        w2.write(chunk)
        raise RuntimeError("producer failed")
    assert not store.exists("big/failed")

    small = store.upload_stream("small", io.BytesIO(b"tiny"))
    assert small.size == 4 and store.get("small") == b"tiny"


def test_streaming_create_only(store: ObjectStore) -> None:
    """Honoured where the backend honours If-None-Match on CompleteMultipartUpload, else refused."""
    store.put("taken", b"first")
    payload = os.urandom(9 * MiB)
    try:
        writer = store.open_writer("taken", if_none_match=True)
    except UnsafeBackend as exc:
        assert isinstance(store, S3ObjectStore) and "CompleteMultipartUpload" in str(exc)
        assert not store.capabilities().conditional_multipart
        return
    writer.write(payload)
    with pytest.raises(Conflict):
        writer.commit()
    assert store.get("taken") == b"first"
    with store.open_writer("fresh", if_none_match=True) as w:
        w.write(payload)
    assert store.get("fresh") == payload


def test_compose_large_and_small(store: ObjectStore) -> None:
    a, b, c = os.urandom(6 * MiB), os.urandom(100), os.urandom(7 * MiB)
    store.put("c/a", a)
    store.put("c/b", b)
    store.put("c/c", c)
    sources = [
        ByteRange("c/a", MiB, 5 * MiB),
        ByteRange("c/b"),
        ByteRange("c/c"),
        ByteRange("c/a", 0, 10),
    ]
    store.stats.reset()
    info = store.compose("c/out", sources)
    expected = a[MiB:] + b + c + a[:10]
    assert info.size == len(expected)
    assert store.get("c/out") == expected
    if isinstance(store, S3ObjectStore):
        assert store.stats.snapshot().get("MPU_COPY", 0) >= 1  # server-side where parts are large
    small = store.compose("c/small", [ByteRange("c/b"), ByteRange("c/b", 0, 5)])
    assert store.get("c/small") == b + b[:5] and small.size == 105
    with pytest.raises(Conflict):
        store.compose("c/small", [ByteRange("c/b")], if_none_match=True)


def test_key_safety(store: ObjectStore) -> None:
    for bad in ["", "/abs", "a//b", "a/../b", "..", "a/./b", "dir/", "a\nb", "a\x00b", "x" * 1025]:
        with pytest.raises(InvalidKey):
            store.put(bad, b"x")
    with pytest.raises(InvalidKey, match="1024"):
        store.get("k" * 1100)
    store.put("ok/ünïcode key (1).txt", b"fine")
    assert store.get("ok/ünïcode key (1).txt") == b"fine"


def test_scoped_store_shares_keyspace(store: ObjectStore) -> None:
    sub = store.scoped("tables/t1")
    sub.put("x", b"1")
    assert store.get("tables/t1/x") == b"1"
    assert [o.key for o in sub.list()] == ["x"]


_RSS_SCRIPT = r"""
import os, sys, pickle
sys.path.insert(0, os.getcwd())
backend = pickle.loads(bytes.fromhex(sys.argv[1]))
store = backend.open()
store.exists("warm-up")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
block = os.urandom(1024 * 1024)
before = rss()
with store.open_writer("huge") as w:
    for _ in range(256):
        w.write(block)
# VmHWM is this process's own peak; ru_maxrss would include the parent's (kept over exec).
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
print(peak - before, store.head("huge").size)
"""


def test_multipart_256mib_bounded_memory(backend: Backend, tmp_path: Path) -> None:
    import pickle

    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, pickle.dumps(backend).hex()],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        timeout=600,
    ).stdout.split()
    growth, size = int(out[0]), int(out[1])
    assert size == 256 * MiB
    assert growth < 64 * MiB, f"peak RSS grew by {growth / MiB:.1f} MiB"
