"""Keyed tables: compaction."""
