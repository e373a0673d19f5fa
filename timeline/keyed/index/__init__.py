"""Keyed tables: index."""
