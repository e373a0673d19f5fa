"""The bearer token: where it comes from, where a generated one is kept, how it is checked.

Order: `FLOWLEDGER_TOKEN`, else the token file. A missing token file is created on first start
with a random token, owner-only (0600) in an owner-only folder, and the token is printed once to
the terminal (never through logging). Requests compare with `hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from storage import parse_uri

from .settings import ServiceSettings

STATE_FOLDER = ".flowledger-state"


def state_dir(repo_uri: str) -> Path:
    """The service's local state folder: inside a local repository, else per repository URI
    under `$XDG_STATE_HOME/flowledger/` (default `~/.local/state/flowledger/`)."""
    parsed = parse_uri(repo_uri)
    if parsed.scheme == "file":
        return Path(parsed.path) / STATE_FOLDER
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    digest = hashlib.sha256(str(parsed).encode()).hexdigest()[:16]
    return Path(base) / "flowledger" / digest


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) with the last level owner-only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # "environment", or the token file's path
    created: bool


def _read(path: Path) -> str:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise PermissionError(
            f"token file {path} is readable by others (mode {mode:o}): chmod 600 it or delete "
            "it to have a new token generated"
        )
    value = path.read_text(encoding="utf-8").strip()
    if len(value) < 16:
        raise ValueError(f"token file {path} holds no usable token: delete it to regenerate")
    return value


def resolve_token(settings: ServiceSettings, repo_uri: str) -> Token:
    if settings.token:
        return Token(settings.token, "environment", False)
    path = Path(settings.token_file) if settings.token_file else state_dir(repo_uri) / "token"
    if path.exists():
        return Token(_read(path), str(path), False)
    private_dir(path.parent)
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another replica won the race: use its token
        return Token(_read(path), str(path), False)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return Token(value, str(path), True)


def announce(token: Token) -> None:
    """Print a newly generated token once, to the terminal only (not to the log)."""
    if token.created:
        print(
            f"flowledger: generated an API token, stored in {token.source} (owner-only):\n"
            f"  {token.value}\n"
            "  send it as 'Authorization: Bearer <token>'; it is not shown again",
            file=sys.stderr,
            flush=True,
        )


_scheme = HTTPBearer(auto_error=False, description="the service's token (see docs/service.md)")


MISSING = "missing bearer token: send 'Authorization: Bearer <token>'"
INVALID = "invalid bearer token"


def bearer_problem(authorization: str | None, expected: bytes) -> str | None:
    """Why an `Authorization` header value does not carry the token (None: it does). Reads
    the header as FastAPI's HTTPBearer does: scheme `bearer` in any case, one space, the token
    (surrounding blanks ignored)."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not credentials:
        return MISSING
    if not hmac.compare_digest(credentials.strip().encode(), expected):
        return INVALID
    return None


def bearer_auth(token: str) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency: 401 unless `Authorization: Bearer <token>` matches. The guard in
    front of the app (guard.py) has already refused such requests before their body; this
    keeps every route safe on its own and documents the scheme in the OpenAPI schema."""
    expected = token.encode()

    # async: a check without I/O runs on the event loop; a sync dependency costs a hop to
    # the thread pool and back on every request (~0.2 ms of CPU, measured).
    async def check(
        credentials: HTTPAuthorizationCredentials | None = Depends(_scheme),  # noqa: B008
    ) -> None:
        given = None if credentials is None else f"Bearer {credentials.credentials}"
        problem = bearer_problem(given, expected)
        if problem is not None:
            raise HTTPException(401, problem, headers={"WWW-Authenticate": "Bearer"})

    return check
