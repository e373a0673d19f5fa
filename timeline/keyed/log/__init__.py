"""Keyed tables: log."""
