"""CLI command groups (typer apps), one module per group."""
