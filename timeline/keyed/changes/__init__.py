"""Keyed tables: changes."""
