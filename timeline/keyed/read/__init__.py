"""Keyed tables: read."""
