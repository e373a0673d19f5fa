"""The one DuckDB sandbox every user-written SQL runs in (`table sql`, `provenance sql`, a
filter delete's predicate): UTC times, no access to files, the network or extensions beyond
what the connection was given before it was locked, and a configuration nobody can change
back afterwards."""

from __future__ import annotations

import duckdb


def lock_down(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Turn external access off and lock the configuration (call it after registering what
    the connection may read: views over allowed paths, Arrow tables)."""
    con.execute("SET enable_external_access=false")
    con.execute("SET lock_configuration=true")
    return con


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory connection with the sandbox's time zone (lock it with `lock_down`
    once its inputs are registered)."""
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    return con


__all__ = ["connect", "lock_down"]
