"""What one service process holds open: the repository's stores, the SQL sandbox, the cache
of provenance query answers. Nothing here is needed by another replica (see docs/service.md)."""

from __future__ import annotations

from pathlib import Path

from fastapi import Request

from provenance import ProvenanceRepository
from storage import ObjectStore, open_store
from storage.content import ContentRepository, ContentRepositorySettings

from ..context import provenance_settings
from ..marquez_catalog import CatalogCache
from .auth import private_dir, state_dir
from .queries import Submissions
from .sandbox import SqlSandbox
from .settings import ServiceSettings

# The service reads and adds content; cleanup of old claims belongs to the pipeline's owner.
_CONTENT_SETTINGS = ContentRepositorySettings(archive_cleanup_frequency=0, cleanup_on_start=False)


class Services:
    def __init__(self, uri: str, settings: ServiceSettings) -> None:
        self.uri = uri
        self.settings = settings
        self.state_dir: Path = private_dir(state_dir(uri))
        self.root: ObjectStore = open_store(uri)
        prov_settings = provenance_settings(settings.auto_archive)
        self.prov = ProvenanceRepository.open(self.root, prov_settings, background=True)
        self.content = ContentRepository.open(self.root, _CONTENT_SETTINGS)
        self.sql = SqlSandbox(self.prov, settings, private_dir(self.state_dir / "duckdb-tmp"))
        self.submissions = Submissions(settings.query_expiration_s)
        self.marquez = CatalogCache()  # Marquez's read API (marquez_routes.py)

    def close(self) -> None:
        self.sql.close()
        try:
            self.content.close()
        finally:
            self.prov.close()


async def services(request: Request) -> Services:
    """FastAPI dependency: the process's open repository (async: no thread-pool hop)."""
    found: Services = request.app.state.services
    return found
