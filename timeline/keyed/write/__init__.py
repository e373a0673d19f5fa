"""Keyed tables: write."""
