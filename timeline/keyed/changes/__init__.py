"""Incremental and CDC reads of keyed tables between two instants (Hudi's incremental
query and CDC), in one process or split into an engine's tasks. Exports what the table
operations use."""

from .ranges import cdc, incremental

__all__ = [
    "cdc",
    "incremental",
]
