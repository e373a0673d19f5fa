"""The repositories a session works on, opened together on one flowledger repository."""

from __future__ import annotations

from storage import Closing, ObjectStore, StoreSettings, open_store
from storage.content import ContentRepository, ContentRepositorySettings

from ..repository import ProvenanceRepository
from ..settings import ProvenanceSettings
from .session import ProcessSession


class FlowRepository(Closing):
    """Content + provenance of one repository root: `with repo.session() as s: ...` commits
    on a clean exit and rolls back on an exception (NiFi's process session factory)."""

    def __init__(self, content: ContentRepository, provenance: ProvenanceRepository) -> None:
        self.content = content
        self.provenance = provenance
        self._owned = False

    @classmethod
    def open(
        cls,
        repo: str | ObjectStore | None = None,
        store_settings: StoreSettings | None = None,
        content_settings: ContentRepositorySettings | None = None,
        provenance_settings: ProvenanceSettings | None = None,
    ) -> FlowRepository:
        root = repo if isinstance(repo, ObjectStore) else open_store(repo, store_settings)
        content = ContentRepository.open(root, content_settings, store_settings)
        out = cls(content, ProvenanceRepository.open(root, provenance_settings))
        out._owned = True
        return out

    def session(
        self, component_id: str = "flowledger", component_type: str = "ProcessSession"
    ) -> ProcessSession:
        return ProcessSession(self.content, self.provenance, component_id, component_type)

    def close(self) -> None:
        if self._owned:
            self.provenance.close()
            self.content.close()
