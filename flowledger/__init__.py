"""flowledger: a data pipeline's content, provenance and ACID timeline on object storage."""

__version__ = "0.1.0"
__all__ = ["__version__"]
