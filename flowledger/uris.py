"""One spelling per file or table URI, and the marker naming one commit of a table: what
provenance events of every writer (Python, Spark) carry, so that two spellings of one file
(`s3a://` and `s3://`, relative and absolute local paths) name one FlowFile."""

from __future__ import annotations

from storage.uri import parse_uri


def canonical(uri: str) -> str:
    """One spelling per file or table: s3a:// -> s3://, local paths absolute file://."""
    if "://" in uri and uri.split("://", 1)[0].lower() not in ("file", "s3", "s3a"):
        return uri  # hdfs://, gs://...: kept as Spark named it
    try:
        return str(parse_uri(uri))
    except ValueError:
        return uri


def commit_marker(table_uri: str, instant: str) -> str:
    """`<table>#instant=<instant>`: every event of one commit carries it."""
    return f"{canonical(table_uri)}#instant={instant}"
