"""`ServiceSettings`: everything `flowledger serve` can be told (see docs/configuration.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _env_token() -> str | None:
    return os.environ.get("FLOWLEDGER_TOKEN") or None


def _env(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number") from None


@dataclass(frozen=True)
class ServiceSettings:
    #: Interface to listen on; anything but loopback needs `allow_remote`.
    host: str = "127.0.0.1"
    #: TCP port (0: any free port; the bound port is printed on start).
    port: int = 8080
    #: Listen on a non-loopback interface (the token is then the only guard: use TLS in front).
    allow_remote: bool = False
    #: The bearer token; default `$FLOWLEDGER_TOKEN`, else the token file.
    token: str | None = field(default_factory=_env_token, repr=False)
    #: Where the generated token is kept (default: the repository's state folder).
    token_file: str | None = None
    #: Largest request body accepted (content uploads included); larger is 413.
    max_request_size: int = field(
        default_factory=lambda: int(_env("FLOWLEDGER_MAX_REQUEST_SIZE", 64 * 2**20))
    )
    #: Wall-clock limit of one SQL query; the query is interrupted (DuckDB interrupt()).
    sql_timeout_s: float = field(default_factory=lambda: _env("FLOWLEDGER_SQL_TIMEOUT_S", 10.0))
    #: Rows one SQL answer carries at most (the answer says when it was truncated).
    sql_max_rows: int = field(default_factory=lambda: int(_env("FLOWLEDGER_SQL_MAX_ROWS", 10_000)))
    #: SQL queries running at once; more wait up to `sql_queue_timeout_s`, then get 503 with
    #: Retry-After.
    sql_concurrency: int = field(default_factory=lambda: int(_env("FLOWLEDGER_SQL_CONCURRENCY", 4)))
    sql_queue_timeout_s: float = field(
        default_factory=lambda: _env("FLOWLEDGER_SQL_QUEUE_TIMEOUT_S", 2.0)
    )
    #: SQL requests that may wait for a slot; beyond them a request is refused at once (503
    #: with Retry-After) instead of queueing without bound. A waiting request holds no thread,
    #: only its connection and its text (at most 100,000 characters).
    sql_queue_size: int = field(default_factory=lambda: int(_env("FLOWLEDGER_SQL_QUEUE_SIZE", 100)))
    #: Bytes of rows one SQL answer may carry (counted as they are fetched, before the JSON
    #: is built); a larger answer is refused with 413 naming this limit.
    sql_max_answer_bytes: int = field(
        default_factory=lambda: int(_env("FLOWLEDGER_SQL_MAX_ANSWER_BYTES", 32 * 2**20))
    )
    #: DuckDB memory of one SQL query (its memory_limit; DuckDB's own default is 80 % of the
    #: machine's memory per query). Over it the query fails with DuckDB's out-of-memory error.
    sql_memory_limit: int = field(
        default_factory=lambda: int(_env("FLOWLEDGER_SQL_MEMORY_LIMIT", 2**30))
    )
    #: Open connections at most (lowered at start to fit the process's file descriptor limit).
    #: At the limit a connection that has not sent a complete request is closed to make room;
    #: when every connection is busy with a request, a new one gets 503.
    max_connections: int = field(
        default_factory=lambda: int(_env("FLOWLEDGER_MAX_CONNECTIONS", 1000))
    )
    #: A connection must complete a request's headers this long after it opened (or after its
    #: previous answer); else it is closed. Guards against connections that never finish.
    header_timeout_s: float = field(
        default_factory=lambda: _env("FLOWLEDGER_HEADER_TIMEOUT_S", 10.0)
    )
    #: Bytes of a request line and headers at most; larger is 431 and the connection closed.
    max_header_size: int = field(
        default_factory=lambda: int(_env("FLOWLEDGER_MAX_HEADER_SIZE", 64 * 1024))
    )
    #: NiFi's provenance query / lineage submissions expire after this (NiFi: 10 minutes).
    query_expiration_s: int = 600
    #: Server processes sharing the port (uvicorn workers; each holds its own caches, as a
    #: replica does). One process serialises CPU-bound lookups on the GIL.
    workers: int = 1
    #: Automatic archival of old instants on the tables the service opens and on the
    #: provenance repository's table (`flowledger --no-auto-archive serve`: off).
    auto_archive: bool = True

    def __post_init__(self) -> None:
        if self.host not in LOOPBACK and not self.allow_remote:
            raise ValueError(
                f"refusing to listen on {self.host!r}: the service binds loopback only unless "
                "--allow-remote is given (put TLS in front of it)"
            )
        if self.token is not None and len(self.token) < 16:
            raise ValueError("FLOWLEDGER_TOKEN is too short: use at least 16 characters")
        if self.workers < 1:
            raise ValueError(f"--workers must be at least 1, not {self.workers}")
        if self.sql_concurrency < 1 or self.sql_timeout_s <= 0 or self.sql_max_rows < 1:
            raise ValueError("sql_concurrency, sql_timeout_s and sql_max_rows must be positive")
        if self.sql_queue_size < 0 or self.sql_max_answer_bytes < 1 or self.sql_memory_limit < 1:
            raise ValueError(
                "sql_queue_size must be >= 0, sql_max_answer_bytes and sql_memory_limit positive"
            )
        if self.max_connections < 1 or self.header_timeout_s <= 0 or self.max_header_size < 1:
            raise ValueError("max_connections, header_timeout_s, max_header_size must be positive")
