"""Where the life test's tables live: a fresh, empty store for each machine run (a temporary
folder, or a new MinIO bucket), and how a child process opens the same store."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from abc import ABC, abstractmethod
from typing import Any

from storage import ObjectStore, StoreSettings, open_store
from tests.support.servers import S3Endpoint


def store_spec(uri: str, settings: Any) -> dict[str, Any]:
    """What a child process needs to open the store: its URI and settings."""
    return {"uri": uri, "settings": dataclasses.asdict(settings)}


class StoreFactory(ABC):
    """Opens a fresh, empty store for each machine run and says how a child process opens
    it (its URI and settings)."""

    @abstractmethod
    def open(self) -> ObjectStore: ...

    @abstractmethod
    def spec(self, store: ObjectStore) -> dict[str, Any]: ...

    def dispose(self, store: ObjectStore) -> None:
        store.close()


class LocalStores(StoreFactory):
    """Each table in a fresh temporary folder of the local filesystem."""

    def __init__(self) -> None:
        self.roots: dict[int, str] = {}

    def open(self) -> ObjectStore:
        root = tempfile.mkdtemp(prefix="keyed-life-")
        store = open_store("file://" + root, StoreSettings(fsync=False))
        self.roots[id(store)] = root
        return store

    def spec(self, store: ObjectStore) -> dict[str, Any]:
        return store_spec("file://" + self.roots[id(store)], StoreSettings(fsync=False))

    def dispose(self, store: ObjectStore) -> None:
        store.close()
        shutil.rmtree(self.roots.pop(id(store)), ignore_errors=True)


class MinioStores(StoreFactory):
    """Each table in a new bucket of the test MinIO."""

    def __init__(self, minio: S3Endpoint) -> None:
        self.minio = minio
        self.uris: dict[int, str] = {}

    def open(self) -> ObjectStore:
        uri = f"s3://{self.minio.new_bucket()}/repo"
        store = open_store(uri, self.minio.settings())
        self.uris[id(store)] = uri
        return store

    def spec(self, store: ObjectStore) -> dict[str, Any]:
        return store_spec(self.uris[id(store)], self.minio.settings())

    def dispose(self, store: ObjectStore) -> None:
        store.close()
        self.uris.pop(id(store), None)
