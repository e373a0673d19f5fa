"""Names a request may use to point into the repository (tables, content claims).

A name is one path segment of [A-Za-z0-9_.-], not `.` or `..`: joined under the repository's
own prefix it can never leave it, whatever the backend (a local folder or a bucket prefix)."""

from __future__ import annotations

import re

from .errors import Forbidden

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")


def checked(name: str, what: str) -> str:
    if not _NAME.match(name) or name in (".", "..") or ".." in name:
        raise Forbidden(
            f"{what} {name[:80]!r} is not allowed: use letters, digits, '_', '.' and '-' "
            "(one name inside the repository, no '..', no '/')"
        )
    return name
