"""`flowledger serve`: the HTTP service (FastAPI), safe by default (see docs/service.md).

One module per resource: `provenance_routes` (NiFi's `/nifi-api/provenance...` queries and
lineage, `/nifi-api/flow/about`), `event_routes` (`/nifi-api/provenance-events...`), `sql_routes`
(`POST /sql`, sandboxed by `sandbox`), `timeline_routes`, `content_routes`, `ingest_routes`;
`app` builds the app (errors), `guard` checks token and body size before any body is read,
`auth` the bearer token, `connections` bounds connections (count, header time and size), `run`
serves it with uvicorn. Resource limits: docs/service.md."""

from .app import create_app
from .auth import state_dir
from .run import serve
from .settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app", "serve", "state_dir"]
