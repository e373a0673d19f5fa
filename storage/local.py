"""Local filesystem backend: the embedded default, with the same guarantees as S3.

* create-only: the object is written to a temp file, fsynced, then hard-linked into place;
  `link` fails if the name exists, so exactly one of racing writers wins and no reader ever
  sees a partial object.
* compare-and-swap: under an `flock` on a per-key lock file (works across processes), the
  current etag is checked and the temp file is renamed over the object.
* keys map to paths as they are, so the repository can be browsed with `ls`. Like MinIO, a
  key cannot also be a folder of other keys (`a/b` and `a/b/c`): flowledger's layouts never
  need that, and such a write fails with a clear error.
* etags are (inode, mtime in ns, size); each write stamps a fresh nanosecond mtime with
  random low digits, so a recycled inode cannot make an old etag match again (ABA).
* a write that fails (a full disk above all) removes its temp file before raising, and the
  error names the repository folder (`StorageFull`). Temp files of writers that died are
  removed by the first write of a later store into the same folder once they are older
  than `multipart_purge_age` (local_sweep.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import random
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, cast

from .append_log import AppendLog, delete_idle
from .errors import (
    Conflict,
    InvalidKey,
    NotFound,
    RangeNotSatisfiable,
    StorageError,
    translate_os,
)
from .keys import RESERVED_PREFIX, validate_prefix
from .local_files import LimitedReader, discard_tmp
from .local_sweep import TempSweep, remove_stale
from .objectstore import (
    ByteRange,
    ListPage,
    ObjectInfo,
    ObjectStore,
    ObjectWriter,
    RequestStats,
)
from .settings import StoreSettings
from .upload_buffers import MemoryRoom

TMP_DIR = RESERVED_PREFIX + "tmp"
LOCK_DIR = RESERVED_PREFIX + "locks"


def key_path(root: Path, key: str) -> Path:
    """Where a key lives under `root`."""
    return root / key


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(
        key, st.st_size, _etag(st), datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC)
    )


class _LocalWriter(ObjectWriter):
    def __init__(
        self, store: LocalObjectStore, key: str, if_none_match: bool, tmp: Path, fh: BinaryIO
    ) -> None:
        """`fh` is the open temp file `tmp` (`LocalObjectStore.open_writer` creates it)."""
        self._store = store
        self._key = key
        self._if_none_match = if_none_match
        self._tmp = tmp
        self._fh: BinaryIO | None = fh

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._fh is None:
            raise StorageError(f"write to {self._store.url(self._key)} after commit/abort")
        with self._store._os_errors(self._key, "put"):
            return self._fh.write(data)

    def commit(self) -> ObjectInfo:
        if self._fh is None:
            raise StorageError(f"commit of {self._store.url(self._key)} after commit/abort")
        fh, self._fh = self._fh, None
        try:
            with self._store._os_errors(self._key, "put"):
                self._store._finish_tmp(fh)
        except BaseException:
            discard_tmp(fh, self._tmp)
            raise
        return self._store._publish(self._key, self._tmp, self._if_none_match)

    def abort(self) -> None:
        """Never raises: closing may flush buffered bytes into a full disk, and the temp
        file must go whatever happens."""
        fh, self._fh = self._fh, None
        discard_tmp(fh, self._tmp)


class LocalObjectStore(ObjectStore):
    def __init__(
        self,
        root: str | Path,
        settings: StoreSettings | None = None,
        stats: RequestStats | None = None,
        base: Path | None = None,
        sweep: TempSweep | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self.base = base or self.root  # where temp files and locks live (shared by scopes)
        self.settings = settings or StoreSettings()
        self.stats = stats or RequestStats()
        self.uri = "file://" + str(self.root)
        #: Stale temp files go before the first write (local_sweep.py; shared by scopes).
        self._sweep = sweep or TempSweep(self.base / TMP_DIR, self.settings.multipart_purge_age)

    @classmethod
    def open(cls, root: str | Path, settings: StoreSettings | None = None) -> LocalObjectStore:
        """The store at `root`, refused at once if `root` is a file (the constructor does no
        I/O). Folders are made by the first write, never by opening: a read of a repository
        or table that does not exist must leave nothing behind."""
        store = cls(root, settings)
        if store.root.exists() and not store.root.is_dir():
            raise StorageError(f"open {store.uri}: not a directory", store.uri)
        return store

    def _ensure_dir(self, path: Path) -> Path:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise translate_os(exc, self.uri, "open", str(self.base)) from exc
        return path

    @contextlib.contextmanager
    def _os_errors(self, key: str, op: str) -> Iterator[None]:
        """Translate the filesystem errors of a write to `key` (a full disk names the
        repository folder: temp files and objects live on its filesystem)."""
        try:
            yield
        except OSError as exc:
            raise translate_os(exc, self.url(key), op, str(self.base)) from exc

    def scoped(self, prefix: str) -> LocalObjectStore:
        validate_prefix(prefix)
        folder = key_path(self.root, prefix.strip("/") + "/x").parent
        return LocalObjectStore(folder, self.settings, self.stats, self.base, self._sweep)

    # -- helpers ----------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        return key_path(self.root, self._key(key))

    def _new_tmp(self) -> Path:
        folder = self._ensure_dir(self.base / TMP_DIR)
        self._sweep.before_write()
        return folder / uuid.uuid4().hex

    def _open_tmp(self, key: str) -> tuple[Path, BinaryIO]:
        tmp = self._new_tmp()
        with self._os_errors(key, "put"):
            return tmp, open(tmp, "wb")  # closed by the caller

    def _finish_tmp(self, fh: BinaryIO, durable: bool = True) -> None:
        """Stamp a unique mtime (see module doc), flush to disk and close."""
        fh.flush()
        if durable and self.settings.fsync:
            os.fsync(fh.fileno())
        stamp = time.time_ns() // 1000 * 1000 + random.randrange(1000)
        os.utime(fh.fileno(), ns=(stamp, stamp))
        fh.close()

    def _write_tmp(self, key: str, data: bytes, durable: bool = True) -> Path:
        """A finished temp file holding `data`; on any failure the temp file is gone."""
        tmp, fh = self._open_tmp(key)
        try:
            with self._os_errors(key, "put"):
                fh.write(data)
                self._finish_tmp(fh, durable)
        except BaseException:
            discard_tmp(fh, tmp)
            raise
        return tmp

    def _sync_dir(self, path: Path, durable: bool = True) -> None:
        if not (durable and self.settings.fsync):
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _publish(
        self, key: str, tmp: Path, if_none_match: bool, durable: bool = True
    ) -> ObjectInfo:
        """Move a finished temp file into place: link (create-only) or rename (overwrite)."""
        path = self._path(key)
        self.stats.add("PUT")
        # The etag is the temp file's own: once published, `path` may already name a later
        # version (a concurrent compare-and-swap), whose etag must not be paired with our body.
        published = os.stat(tmp)
        try:
            for _ in range(10):  # a concurrent delete may prune the parent directory
                path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if if_none_match:
                        os.link(tmp, path)
                    else:
                        os.replace(tmp, path)
                    break
                except FileNotFoundError:
                    continue
            else:
                raise NotFound(f"put {self.url(key)}: parent directory keeps vanishing", key)
            self._sync_dir(path.parent, durable)
            return _info(key, published)
        except NotADirectoryError as exc:
            raise InvalidKey(
                f"put {self.url(key)}: a parent of this key is itself an object; a key cannot "
                "also be a folder of other keys (MinIO has the same rule)",
                self.url(key),
            ) from exc
        except FileExistsError as exc:
            raise Conflict(
                f"put-if-absent {self.url(key)}: object already exists; another writer won",
                self.url(key),
            ) from exc
        except OSError as exc:
            raise translate_os(exc, self.url(key), "put", str(self.base)) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    @contextlib.contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        name = hashlib.sha1(str(self._path(key)).encode()).hexdigest()
        with self._os_errors(key, "lock"):
            fh = open(self._ensure_dir(self.base / LOCK_DIR) / name, "a+b")  # noqa: SIM115
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    # -- writes -----------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> ObjectInfo:
        self._key(key)
        # The bytes go to disk before the lock is taken: the lock only orders the rename.
        tmp = self._write_tmp(key, data)
        try:
            with self._key_lock(key):  # serialise with compare-and-swap on the same key
                return self._publish(key, tmp, False)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        self._key(key)
        return self._publish(key, self._write_tmp(key, data), True)

    def put_if_match(self, key: str, data: bytes, etag: str, *, durable: bool = True) -> ObjectInfo:
        self._key(key)
        tmp = self._write_tmp(key, data, durable)
        try:
            with self._key_lock(key):
                try:
                    current = _etag(os.stat(self._path(key)))
                except FileNotFoundError:
                    current = None
                if current != etag:
                    state = "does not exist" if current is None else "has changed"
                    raise Conflict(
                        f"put-if-match {self.url(key)}: object {state}; another writer won",
                        self.url(key),
                    )
                return self._publish(key, tmp, False, durable)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def open_append_log(self, key: str) -> AppendLog:
        self._key(key)
        path = self._path(key)
        self.stats.add("PUT")
        with self._os_errors(key, "put"):
            path.parent.mkdir(parents=True, exist_ok=True)
            return AppendLog(path, key, self.url(key), self.settings.fsync)

    def delete_idle_log(self, key: str) -> bool:
        self.stats.add("DELETE")
        with self._os_errors(key, "delete"):
            return delete_idle(self._path(key))

    def open_writer(
        self, key: str, *, if_none_match: bool = False, memory: MemoryRoom | None = None
    ) -> ObjectWriter:
        self._key(key)
        tmp, fh = self._open_tmp(key)  # closed by the writer's commit/abort
        return _LocalWriter(self, key, if_none_match, tmp, fh)

    def compose(
        self, key: str, sources: Sequence[ByteRange], *, if_none_match: bool = False
    ) -> ObjectInfo:
        writer = self.open_writer(key, if_none_match=if_none_match)
        try:
            for src in sources:
                with self.open_read(src.key, src.start, src.length) as stream:
                    writer.write_from(stream)
        except BaseException:
            writer.abort()
            raise
        return writer.commit()

    # -- reads ------------------------------------------------------------------------------
    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        path = self._path(key)
        self.stats.add("GET")
        try:
            fh = open(path, "rb")  # noqa: SIM115 - returned to the caller
        except OSError as exc:
            raise translate_os(exc, self.url(key), "get") from exc
        size = os.fstat(fh.fileno()).st_size
        if start > 0 and start >= size:
            fh.close()
            raise RangeNotSatisfiable(
                f"get {self.url(key)}: offset {start} is past the end ({size} bytes)",
                self.url(key),
            )
        fh.seek(start)
        if length is None:
            return fh
        return cast(BinaryIO, LimitedReader(fh, length))

    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        with self.open_read(key, start, length) as fh:
            return fh.read()

    def get_object(self, key: str) -> tuple[bytes, ObjectInfo]:
        path = self._path(key)
        self.stats.add("GET")
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                return fh.read(), _info(key, st)
        except OSError as exc:
            raise translate_os(exc, self.url(key), "get") from exc

    def head(self, key: str) -> ObjectInfo:
        self.stats.add("HEAD")
        try:
            return _info(key, os.stat(self._path(key)))
        except OSError as exc:
            raise translate_os(exc, self.url(key), "head") from exc

    def folder_version(self, folder: str) -> str | None:
        """A hash of the names in the folder (one directory read, no stat per key): any
        key added or removed changes it, whatever the clocks do (a folder's mtime would not
        do: the kernel stamps it from a coarse clock, so two changes a few ms apart can leave
        the same mtime, and on a network filesystem the server's clock stamps it)."""
        validate_prefix(folder)
        try:
            names = frozenset(os.listdir(self.root / folder.rstrip("/")))
        except (FileNotFoundError, NotADirectoryError):
            return ""  # no folder: no keys
        except OSError as exc:
            raise translate_os(exc, self.url(folder), "list") from exc
        # Python's string hash is salted per process: the token compares within one process.
        return f"{len(names)}-{hash(names):x}"

    def _walk(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Keys under `prefix` after `start_after`, lazily, in UTF-8 byte order like S3.

        Each folder's entries are ordered with a folder named `d` ranked as `d/` (every key in
        it starts so), which is exactly the order of the keys themselves (str order is code
        point order, the same as UTF-8 byte order). Entries that sort at or before
        `start_after` or outside `prefix` are dropped before sorting and whole subtrees are
        skipped without being opened, so a page costs the folders on the path to the start
        key (one directory read each) plus the keys returned.
        """
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = "" if folder == "" else folder + "/"
        yield from self._walk_dir(self.root / folder, base, prefix, start_after)

    def _walk_dir(self, path: Path, base: str, prefix: str, after: str | None) -> Iterator[str]:
        try:
            with os.scandir(path) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return  # deleted since, or never there
        except OSError as exc:
            raise translate_os(exc, self.url(base), "list") from exc
        ranked = []
        for name, is_dir in entries:
            if is_dir:
                if name.startswith(RESERVED_PREFIX):
                    continue  # temp files and locks, never keys
                rank = base + name + "/"
                # every key inside sorts at or before the start key: skip the whole folder
                if after is not None and rank < after and not after.startswith(rank):
                    continue
                if not (rank.startswith(prefix) or prefix.startswith(rank)):
                    continue
            else:
                rank = base + name
                if (after is not None and rank <= after) or not rank.startswith(prefix):
                    continue
            ranked.append((rank, name, is_dir))
        ranked.sort()
        for rank, name, is_dir in ranked:
            if is_dir:
                yield from self._walk_dir(path / name, rank, prefix, after)
            else:
                yield rank

    def list_page(
        self, prefix: str = "", start_after: str | None = None, max_keys: int = 1000
    ) -> ListPage:
        validate_prefix(prefix)
        self.stats.add("LIST")
        keys = list(itertools.islice(self._walk(prefix, start_after), max_keys + 1))
        page = keys[:max_keys]
        objects = []
        for k in page:
            try:
                objects.append(_info(k, os.stat(key_path(self.root, k))))
            except FileNotFoundError:
                continue  # deleted since the walk
        more = len(keys) > max_keys
        return ListPage(tuple(objects), page[-1] if more and page else None)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectInfo]:
        # One lazy walk for the whole listing; counted as the pages S3 would have needed.
        validate_prefix(prefix)
        self.stats.add("LIST")
        for n, k in enumerate(self._walk(prefix, start_after)):
            if n and n % 1000 == 0:
                self.stats.add("LIST")
            try:
                yield _info(k, os.stat(key_path(self.root, k)))
            except FileNotFoundError:
                continue

    # -- deletes ----------------------------------------------------------------------------
    def delete(self, key: str) -> None:
        path = self._path(key)
        self.stats.add("DELETE")
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise translate_os(exc, self.url(key), "delete") from exc
        self._prune(path.parent)

    def _prune(self, directory: Path) -> None:
        """Remove empty directories up to the root, so listings do not walk dead folders."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent

    def delete_many(self, keys: Iterable[str]) -> None:
        batch = [self._key(k) for k in keys]
        self.stats.add("DELETE_BATCH", max(1, -(-len(batch) // 1000)) if batch else 0)
        for key in batch:
            path = key_path(self.root, key)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise translate_os(exc, self.url(key), "delete") from exc
            self._prune(path.parent)

    def abort_stale_uploads(self, older_than: float | None = None) -> int:
        """Temp files of writers that died (they live under the repository root's temp
        folder, shared by every scope)."""
        age = self.settings.multipart_purge_age if older_than is None else older_than
        return remove_stale(self.base / TMP_DIR, age)

    def destroy(self) -> None:
        """Remove the whole repository directory (tests and `make clean`)."""
        shutil.rmtree(self.root, ignore_errors=True)
